"""The ``folio`` command (the console script, and ``python -m folio_prefect.flows.cli``): the core's
parser, Prefect-free commands and exit codes (:mod:`folio.cli`), with the two commands
that need Prefect passed in: ``ingest`` runs the ingest flow in this process on folio's
local Prefect server, ``trigger`` asks a Prefect server to run the document deployment.

Prefect is imported inside the commands, never at module level: ``ingest`` sets Prefect's
environment (log level, analytics) first, and ``folio search`` or ``folio --help`` do not
pay for Prefect's import at all.
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from folio import cli
from folio_prefect.deployments import warm_start

#: how far before its request ``folio trigger --event --wait`` takes a document event as
#: the answer (the clocks of this host and the worker's may differ by this much)
EVENT_SKEW_S = 5.0


def cmd_ingest(args: argparse.Namespace) -> int:
    settings = cli.prepare_ingest(args)
    _use_local_prefect_server(quiet=args.quiet)
    warm_start.reread_prefect_settings()  # in a warm child Prefect was imported before
    from folio_prefect.flows.ingest import ingest, run_report_of

    run = ingest
    if args.engine == "vllm":
        run = _with_vllm_runner(args, settings)
    tty = sys.stderr.isatty()
    with cli.progress_bar(not args.quiet and tty), \
            cli.progress_lines(not args.quiet and not tty), _no_heartbeats():
        report = run_report_of(run(
            sources=args.sources, out=args.out, engine=args.engine, route=args.route,
            reprocess=args.reprocess, report=args.report, settings=settings,
            sync=args.sync, dry_run=args.dry_run,
            return_state=True,  # a run of quarantined documents fails with its report
        ))
    return cli.report_ingest(args, report)


@contextmanager
def _no_heartbeats() -> Iterator[None]:
    """The flow run in this process sends no heartbeats, unless
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY asks for them. Heartbeats let a sweep tell a dead
    worker's run from a live one; nobody waits on a run that lives in the user's terminal,
    and Prefect's heartbeat thread, which sleeps in one-second steps, holds every run's
    end up to a second (a quarter of a cached rerun)."""
    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" in os.environ:
        yield
        return
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def _use_local_prefect_server(*, quiet: bool) -> None:
    """Point Prefect at this machine's folio Prefect server, started by the first run and
    reused by the next ones (deployments/local_server.py), unless PREFECT_API_URL names a
    server already or FOLIO_PREFECT_SERVER=ephemeral asks for Prefect's temporary one."""
    from folio_prefect.deployments.local_server import (
        AUTH_FILE,
        IDLE_ENV,
        MODE_ENV,
        attach,
        auth_string,
        default_home,
        ui_enabled,
    )

    if os.environ.get("PREFECT_API_URL") or os.environ.get(MODE_ENV) == "ephemeral":
        return
    login = default_home() / AUTH_FILE

    def where(url: str) -> str:
        if not url:
            return "its address once it has a port"
        return (f"UI at {url.removesuffix('/api')} (log in with the text in {login})"
                if ui_enabled() else f"API at {url}, no UI here")

    def waiting(waited: float, url: str) -> None:  # the address first, then a line a while
        if not quiet:
            print(f"folio: waiting for the local Prefect server to start ({waited:.0f} s), "
                  f"{where(url)}", file=sys.stderr, flush=True)

    url, started = attach(progress=waiting)
    os.environ["PREFECT_API_URL"] = url
    # the server requires its login; Prefect's client sends it (children never see it:
    # folio.security.redaction.child_env)
    os.environ["PREFECT_API_AUTH_STRING"] = auth_string()
    if started and not quiet:
        idle = float(os.environ.get(IDLE_ENV, 1800))
        print(f"folio: started a Prefect server for folio runs, {where(url)} "
              f"(stops after {idle / 60:.0f} idle minutes; {MODE_ENV}=ephemeral for none)",
              file=sys.stderr)


def _with_vllm_runner(args: argparse.Namespace, settings: dict[str, Any]) -> Any:
    """The ingest flow on a VLLMTaskRunner that starts (or shares, or attaches to) the
    vLLM server. The flow resolves its settings itself, the same way as here and as a
    deployment on a GPU pool does (folio.settings.run_config), so nothing is copied over."""
    from folio.settings.run_config import resolve_config
    from folio_prefect.flows.ingest import ingest
    from folio_prefect.flows.vllm_runner import VLLMTaskRunner

    config = resolve_config(engine="vllm", route=args.route, reprocess=args.reprocess,
                            settings=settings)
    return ingest.with_options(task_runner=cast(Any, VLLMTaskRunner.from_config(config)))


def cmd_trigger(args: argparse.Namespace) -> int:
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    warm_start.reread_prefect_settings()
    from folio.settings.run_config import IngestRequest
    from folio_prefect.deployments import trigger as trig

    _require_api_url()
    from folio.security.secret_settings import refuse

    refuse(cli.parse_set(args.set))  # a trigger's settings are stored by Prefect, shown in its UI
    request = IngestRequest(source=args.source, out=args.out, engine=args.engine,
                            route=args.route, reprocess=args.reprocess,
                            settings=cli.trigger_settings(args), revision=args.revision,
                            sync=args.sync, include=args.include, exclude=args.exclude)
    if args.event:
        # the wait takes the events that occurred from now on (a few seconds for clock
        # skew): an earlier version's event of the same source is not this request's
        since = datetime.now(UTC) - timedelta(seconds=EVENT_SKEW_S)
        event_id = trig.request_ingest(request)
        print(json.dumps({"event_id": str(event_id), "event": trig.REQUESTED}))
        if not args.wait:
            return 0
        try:
            doc = trig.wait_for_indexed(args.source, timeout=args.timeout, since=since)
        except TimeoutError as err:
            print(f"folio: {err}", file=sys.stderr)
            return 4
        print(doc.model_dump_json(exclude={"payload"}))
        return 0 if doc.outcome in ("ok", "skipped") else 3
    from prefect.exceptions import ObjectNotFound

    try:
        run = trig.trigger(request, deployment=args.deployment)
    except ObjectNotFound:
        print(f"folio: no deployment {args.deployment!r} on {_api_url()}: run "
              "`prefect deploy --all` first", file=sys.stderr)
        return 2
    print(run.model_dump_json())
    if not args.wait:
        return 0
    result = trig.wait_for_result(run.flow_run_id, timeout=args.timeout)
    print(result.model_dump_json(exclude={"documents": {"__all__": {"payload"}}}))
    if result.state not in ("COMPLETED", "TIMEOUT"):  # the cause, where a person looks
        print(f"folio: run {result.flow_run_id} {result.state}: "
              f"{result.message or 'no message (see the run in the UI)'}", file=sys.stderr)
    return result.exit_code


def _require_api_url() -> None:
    """A trigger is for a Prefect server that workers poll: without PREFECT_API_URL (in
    the environment or the Prefect profile) Prefect would start a temporary server of its
    own, with no deployment and no worker, and the run could never start.

    Raises:
        ConfigError: no API URL is set.
    """
    from prefect.settings import PREFECT_API_URL

    from folio.errors import ConfigError

    if not PREFECT_API_URL.value():
        raise ConfigError("folio trigger needs the Prefect server your workers poll: set "
                          "PREFECT_API_URL=http://HOST:4200/api (README, \"On a Prefect server\")")


def _api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or "the ephemeral API (PREFECT_API_URL is not set)"


#: the subcommands that need Prefect, added to the core's
COMMANDS: dict[str, cli.Command] = {"ingest": cmd_ingest, "trigger": cmd_trigger}


def main(argv: Sequence[str] | None = None) -> int:
    """:func:`folio.cli.main` with every subcommand."""
    return cli.main(argv, COMMANDS)


_exit_code = cli.EXIT_INTERNAL  # what the process ends with if main() never returns


def run() -> None:
    """The ``folio`` command: :func:`main` in a child of the warm server
    (:mod:`folio_prefect.deployments.warm_start`), else here, then an exit without the
    interpreter's teardown. Freeing the objects of Prefect's thousands of modules one by one takes a
    third of a second, a tenth of a cached rerun, and does nothing for the user: every
    exit handler still runs first (Prefect's log and event flushes included), then
    output is flushed and the process ends with main's exit code."""
    global _exit_code
    status = warm_start.command()  # in a warm child, where Prefect is imported already
    if status is not None:
        warm_start.client.exit_with(status)
    atexit.register(_exit_now)  # registered before the run's own handlers: runs after them
    try:
        _exit_code = main()
    except SystemExit as stop:  # argparse's usage errors
        _exit_code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        raise
    raise SystemExit(_exit_code)


def _exit_now() -> None:
    logging.shutdown()  # registered before ours (logging was imported first): run it here
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said there
            pass
    os._exit(_exit_code)


if __name__ == "__main__":
    run()
