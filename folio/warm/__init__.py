"""A warm process that forks folio's commands and flow runs instead of starting Python.

Why: a one-page document takes well under a second of folio's own work, but a new
interpreter that imports Prefect (1.3 s), folio's flow modules (0.4 s), LanceDB (1 s) and,
in the validation child, Great Expectations (3-4 s) costs several seconds of CPU before
the first page, on every ``folio ingest``, every ``folio trigger`` and every flow run a
worker starts (issue 57: 5-30 s of machinery around a one-page document). A warm server
imports all of it once and forks a child per request: the child is a fresh process
(own pid, own process group, the caller's environment, working folder, umask and
standard streams), a few milliseconds after the request.

Pieces (Prefect-free; what a child runs is named by the caller):

- :mod:`folio.warm.identity`: which server a request may use. A server serves exactly one
  code and configuration: its name is a fingerprint of the interpreter, the installed
  packages, folio's source files and the environment without a run's own variables, so
  an edited checkout, a ``pip install`` or another setting starts a new server and the
  old one ends when idle. Its socket lives in a folder only this user can enter.
- :mod:`folio.warm.wire`: the messages (a request with the caller's standard streams as
  file descriptors; the child's pid; its exit status).
- :mod:`folio.warm.server`: the server process (``python -m folio.warm.server``).
- :mod:`folio.warm.client`: start or reach the server, run a command there with signals
  relayed and the child's exit status as this process's; or start a helper process
  (the validation child, the page-worker zygote) the same way.

``FOLIO_WARM=0`` turns it off (every command and run is a new interpreter, as before);
``FOLIO_WARM_IDLE_S`` is how long an idle server waits for the next request (3600 s).
"""
