"""Flow runs and ``folio`` commands forked from a warm process (:mod:`folio.warm`).

A worker starts each flow run with the deployment's command; the deployments in
prefect.yaml name this module::

    .venv/bin/python -m folio_prefect.deployments.warm_start

which asks this user's warm server (started by the first run, kept while runs come, gone
after ``FOLIO_WARM_IDLE_S`` idle) to fork ``python -m prefect.engine`` with this process's
environment, folder and streams, passes Prefect's cancellation signals on to it and ends
with its exit status. Where no warm server can be used (``FOLIO_WARM=0``) it runs
``prefect.engine`` itself, as Prefect's own command does. The ``folio`` command goes the
same way (:func:`command`).

Why: a flow run's process spent about 3 s importing Prefect, folio's flow modules and
LanceDB before the flow began, and its validation child 3-4 s more importing Great
Expectations, for a one-page document whose own work is under a second (issue 57).

This module is the server's preload too: importing it imports what a run of either kind
would import, and :func:`after_fork` makes a child read Prefect's settings from its own
environment and folder (the server's were read once, at its start).
"""

from __future__ import annotations

import os
import runpy
import sys

from folio.warm import client

#: what the warm server imports once (this module: its imports below run only there)
PRELOAD = ("folio_prefect.deployments.warm_preload",)


#: set by the ``folio`` launcher for its warm child and removed there by :func:`after_fork
#: <folio_prefect.deployments.warm_preload.after_fork>`: the command reads Prefect's settings
#: itself once it has set its own Prefect variables (the API's address and login, the log
#: level: ``cmd_ingest``, ``cmd_trigger``), so a reading at the fork would be thrown away,
#: and each reading costs 0.1-0.2 s (Prefect's logging setup parses its YAML file again)
SETTINGS_LATER_ENV = "FOLIO_WARM_PREFECT_SETTINGS_LATER"

#: the ``folio`` subcommands worth a warm child: those that import Prefect, LanceDB or
#: the embedding model (``folio --help`` or ``folio samples`` start no server)
WARM_COMMANDS = frozenset({"ingest", "trigger", "search"})


def command(argv: list[str] | None = None) -> int | None:
    """The ``folio`` command in a warm child: its exit status, or None to run it here."""
    argv = sys.argv if argv is None else argv
    words = [a for a in argv[1:] if not a.startswith("-")]
    if not words or words[0] not in WARM_COMMANDS:
        return None
    os.environ[SETTINGS_LATER_ENV] = "1"  # the request carries this process's environment
    try:
        return client.run_command("call", "folio_prefect.flows.cli:run", PRELOAD, argv)
    finally:
        del os.environ[SETTINGS_LATER_ENV]  # run here, the command reads them as usual


def reread_prefect_settings() -> None:
    """Prefect's settings and log levels read again from the environment and folder as
    they are now, if Prefect is imported already. A new interpreter imports Prefect after
    the ``folio`` command has set ``PREFECT_API_URL`` and the log level, and reads them
    then; a warm child's Prefect was imported by the server, with the server's
    environment (without this, a ``folio ingest`` child started a temporary Prefect
    server of its own: 7 s)."""
    if "prefect.context" not in sys.modules:
        return
    import prefect.context
    from prefect.logging.configuration import setup_logging

    prefect.context.refresh_global_settings_context()
    setup_logging()


def engine() -> None:
    """A worker's flow-run command: ``prefect.engine`` in a warm child, else here."""
    status = client.run_command("module", "prefect.engine", PRELOAD)
    if status is None:
        runpy.run_module("prefect.engine", run_name="__main__", alter_sys=True)
        return
    client.exit_with(status)


if __name__ == "__main__":
    engine()
