"""The ``folio`` command line without Prefect: its arguments, the commands that need no
Prefect (search, samples), the Prefect-free halves of ``ingest`` (settings, secrets,
pre-run checks, the summary and its exit code) and the mapping of errors to exit codes.

The commands that run a flow or start a deployment (``ingest``, ``trigger``) live in the
Prefect layer, ``flows/cli.py``, which is the ``folio`` console script: it passes them to
:func:`main`. The core never imports that layer (docs/ARCHITECTURE.md), so ``python -m
folio.cli`` runs search and samples only.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from folio.security.display import printable
from folio.security.secret_settings import is_postgres_dsn
from folio.settings.vocabulary import ENGINES, ROUTE_REQUESTS

#: what ``folio --help`` says
DESCRIPTION = "``folio`` command line: ingest PDFs through the Prefect flow, search the results."

#: a subcommand: the parsed arguments in, the process's exit code out
Command = Callable[[argparse.Namespace], int]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="folio", description=DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True)

    ing = sub.add_parser("ingest", help="ingest PDFs (files, folders, s3:// prefixes)")
    ing.add_argument("sources", nargs="+", help="local file/folder or s3://bucket/prefix")
    ing.add_argument("--out", required=True, help="output folder or s3://bucket/prefix")
    ing.add_argument("--report", help="write the JSON run report to this file")
    ing.add_argument("--engine", choices=ENGINES, default="tesseract")
    ing.add_argument("--route", choices=ROUTE_REQUESTS, default="default",
                     help="auto: trust good text layers and OCR the rest; ocr: every page to "
                     "the engine; text-layer: never OCR; default: ocr for a vision model "
                     "(--engine vllm|openai), auto for the others")
    ing.add_argument("--reprocess", action="store_true", help="OCR again even if already done")
    ing.add_argument("--sync", action="store_true", help="also remove the chunks and outputs "
                     "of sources indexed under SOURCES that are gone from them "
                     "(docs/index-sync.md)")
    ing.add_argument("--dry-run", action="store_true",
                     help="with --sync: list what would be removed; ingest nothing")
    _scope_options(ing)
    ing.add_argument("--password", help="refused: every local user can read a command "
                     "line; give --password-file or FOLIO_PASSWORD")
    ing.add_argument("--password-file", metavar="FILE", help="password for encrypted PDFs: "
                     "its first line (- reads stdin); or FOLIO_PASSWORD")
    ing.add_argument("--no-compress", action="store_true", help="skip Ghostscript compression")
    ing.add_argument("--keep-headers-footers", action="store_true",
                     help="keep running headers and footers in the markdown and the chunks")
    ing.add_argument("--store", choices=["lancedb", "pgvector", "none"], help="vector store")
    ing.add_argument("--store-uri", help="LanceDB folder/URI or PostgreSQL DSN")
    ing.add_argument("--endpoint", action="append", help="OpenAI-compatible endpoint "
                     "(--engine openai); give it once per server to spread pages over several")
    ing.add_argument("--model", help="model path or id (--engine vllm|openai)")
    ing.add_argument("--profile", help="hardware profile for --engine vllm (auto|NAME)")
    ing.add_argument("--preset", help="model preset: prompt + parser (chandra, chandra2, "
                     "olmocr2, generic, qwen2.5-vl, qwen3-vl, hunyuan-ocr)")
    ing.add_argument("--s3-endpoint-url", help="S3 endpoint (MinIO, R2, a local server)")
    ing.add_argument("--s3-region", help="S3 region")
    ing.add_argument("--figures", choices=["crops", "none"],
                     help="figure crops beside document.md (default crops; figures.mode)")
    ing.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="any setting, e.g. --set render.max_dpi=200 (value parsed as JSON)")
    ing.add_argument("--quiet", action="store_true", help="no progress bar")
    ing.add_argument("--verbose", action="store_true", help="show Prefect's logs")

    se = sub.add_parser("search", help="search the chunks an ingest wrote")
    se.add_argument("query")
    se.add_argument("--out", help="the --out of the ingest (its LanceDB index)")
    se.add_argument("--store", choices=["lancedb", "pgvector"],
                    help="the ingest's --store (default: store.kind, lancedb)")
    se.add_argument("--store-uri", help="the ingest's --store-uri: LanceDB folder/URI or "
                    "PostgreSQL DSN (pgvector: else FOLIO_PG_DSN)")
    se.add_argument("-k", type=int, default=5)
    se.add_argument("--doc-id", action="append", default=[], help="only this document's "
                    "chunks (repeat for several)")
    se.add_argument("--source", action="append", default=[], help="only this source's "
                    "chunks, as ingest named it (repeat for several)")
    se.add_argument("--source-prefix", help="only sources under this folder or prefix")
    se.add_argument("--kind", action="append", default=[], choices=["text", "table", "figure"],
                    help="only chunks of this kind (repeat for several)")
    se.add_argument("--json", action="store_true", help="the hits as a JSON array: id, "
                    "doc_id, source, page_start, page_end (pages from 1), headings, boxes, "
                    "kind, text, score")
    se.add_argument("--s3-endpoint-url", help="S3 endpoint (MinIO, R2, a local server)")
    se.add_argument("--s3-region", help="S3 region")

    sa = sub.add_parser("samples", help="write the built-in sample PDFs to a folder")
    sa.add_argument("directory")

    tr = sub.add_parser(
        "trigger", help="ask the Prefect server (PREFECT_API_URL) to ingest one source",
        description="Start the document deployment for SOURCE. Repeating the same request "
        "(same source, out, settings and --revision) while SOURCE's bytes are the same (its "
        "size and S3 ETag or modification time) returns the run in flight or done instead of "
        "starting another; once they changed, or that run failed, it starts a new run. Exit code with --wait: 0 indexed and ok (or skipped), 3 partial or "
        "quarantined, 1 the run failed, 4 still running at --timeout, 2 bad arguments.")
    tr.add_argument("source", help="a PDF, folder or s3://bucket/prefix the worker can read")
    tr.add_argument("--out", default="folio-out", help="output folder or s3://bucket/prefix")
    tr.add_argument("--engine", choices=ENGINES, default="tesseract")
    tr.add_argument("--route", choices=ROUTE_REQUESTS, default="default",
                    help="default: ocr for vllm/openai, auto for the others")
    tr.add_argument("--reprocess", action="store_true", help="OCR again even if already done")
    tr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="any setting, e.g. --set render.max_dpi=200 (value parsed as JSON)")
    tr.add_argument("--sync", action="store_true", help="also remove what is indexed under "
                    "SOURCE (a folder or prefix) and gone from it")
    tr.add_argument("--s3-endpoint-url", help="S3 endpoint the worker reads SOURCE and writes "
                    "--out through (MinIO, R2, a local server); passed to the run as the "
                    "setting s3.endpoint_url, so a worker without AWS_ENDPOINT_URL reaches it")
    tr.add_argument("--s3-region", help="S3 region, passed to the run as s3.region")
    _scope_options(tr)
    tr.add_argument("--revision", help="your version of the source (ETag, job id): a new "
                    "revision is a new request, the same one a retry")
    tr.add_argument("--deployment", default="folio-ingest-document/document",
                    help="FLOW/DEPLOYMENT to run (default: %(default)s)")
    tr.add_argument("--event", action="store_true",
                    help="POST a folio.ingest.requested event instead (the deployment trigger "
                    "in prefect.yaml starts the run)")
    tr.add_argument("--wait", action="store_true", help="wait for the result and print it")
    tr.add_argument("--timeout", type=float, default=3600.0, help="seconds --wait waits")
    return p


def _secret_environment(args: argparse.Namespace) -> dict[str, str]:
    """The PDF password and a PostgreSQL DSN as the environment variables the flow's
    settings read (FOLIO_PASSWORD, FOLIO_PG_DSN): never flow-run parameters, which Prefect
    stores in its database and shows in the UI."""
    from folio.security.command_line import read_password_file
    from folio.stores import PG_DSN_ENV

    env = {"FOLIO_PASSWORD": read_password_file(args.password_file)} if args.password_file else {}
    if args.store_uri and is_postgres_dsn(args.store_uri):
        env[PG_DSN_ENV] = args.store_uri
    return env


def _scope_options(parser: argparse.ArgumentParser) -> None:
    """--include / --exclude: the globs that scope a folder or prefix (docs/inputs.md)."""
    parser.add_argument("--include", action="append", default=[], metavar="GLOB",
                        help="read only entries whose path below the source matches (repeat "
                        "for several; * also crosses /), e.g. --include 'scans/*'")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="leave out entries whose path below the source matches; they "
                        "are counted in the summary, not listed")


def scope_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The --include/--exclude globs as settings (sources.include, sources.exclude)."""
    settings: dict[str, Any] = {}
    if getattr(args, "include", None):
        settings["sources.include"] = list(args.include)
    if getattr(args, "exclude", None):
        settings["sources.exclude"] = list(args.exclude)
    return settings


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """Flow parameters from the options; never secrets (see _secret_environment)."""
    settings: dict[str, Any] = {}
    if args.no_compress:
        settings["compress"] = False
    if args.keep_headers_footers:
        settings["chunk.keep_headers_footers"] = True
    store_uri = None if args.store_uri and is_postgres_dsn(args.store_uri) else args.store_uri
    urls = args.endpoint or []
    if len(urls) > 1:
        settings["ocr.endpoints"] = urls
    for key, value in [("store.kind", args.store), ("store.uri", store_uri),
                       ("ocr.endpoint", urls[0] if len(urls) == 1 else None),
                       ("ocr.model", args.model),
                       ("ocr.profile", args.profile), ("ocr.preset", args.preset),
                       ("figures.mode", args.figures),
                       ("s3.endpoint_url", args.s3_endpoint_url),
                       ("s3.region", args.s3_region)]:
        if value:
            settings[key] = value
    settings.update(scope_settings(args))
    settings.update(parse_set(args.set))
    return settings


def trigger_settings(args: argparse.Namespace) -> dict[str, Any]:
    """A trigger's settings: the S3 options as the settings they stand for (the endpoint
    is where the worker's run reads and writes, not a secret: credentials stay in the
    worker's environment), then ``--set``, which wins."""
    settings: dict[str, Any] = {key: value for key, value in [
        ("s3.endpoint_url", args.s3_endpoint_url), ("s3.region", args.s3_region)] if value}
    settings.update(parse_set(args.set))
    return settings


def parse_set(items: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs; a value is JSON when it parses as JSON, else a string.

    Raises:
        ConfigError: an item without ``=`` (exit 2, one line).
    """
    from folio.errors import ConfigError

    settings: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set wants KEY=VALUE, got {item!r} (e.g. --set "
                              "render.max_dpi=200)")
        try:
            settings[key] = json.loads(raw)
        except json.JSONDecodeError:
            settings[key] = raw
    return settings


@contextmanager
def progress_bar(enabled: bool) -> Iterator[None]:
    """A rich progress bar over pages, fed by folio.progress events from task threads."""
    if not enabled:
        yield
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from folio import progress

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("pages"), TimeElapsedColumn(), transient=False)
    task = bar.add_task("ingesting", total=0)
    docs = {"seen": 0, "done": 0}

    def listener(event: progress.ProgressEvent) -> None:
        if event.kind == "document-start":
            docs["seen"] += 1
        elif event.kind == "pages-known":
            bar.update(task, total=(bar.tasks[0].total or 0) + event.pages)
        elif event.kind == "page-done":
            bar.advance(task, event.pages)
        elif event.kind == "document-done":
            docs["done"] += 1
        bar.update(task, description=f"documents {docs['done']}/{docs['seen']}")

    progress.add_listener(listener)
    bar.start()
    try:
        yield
    finally:
        bar.stop()
        progress.remove_listener(listener)


@contextmanager
def progress_lines(enabled: bool) -> Iterator[None]:
    """Without a terminal (CI logs, ``| tee``): one line per finished document."""
    if not enabled:
        yield
        return
    from folio import progress

    done = {"n": 0}
    lock = threading.Lock()

    def listener(event: progress.ProgressEvent) -> None:
        if event.kind != "document-done":
            return
        with lock:
            done["n"] += 1
            rate = f", {event.pages / event.seconds:.2f} pages/s" if event.seconds > 0 else ""
            name = printable(event.source.rsplit('/', 1)[-1])  # a name may hold escapes
            print(f"folio: [{done['n']}] {name}: {event.outcome}, "
                  f"{event.pages} page(s){rate}", file=sys.stderr, flush=True)

    progress.add_listener(listener)
    try:
        yield
    finally:
        progress.remove_listener(listener)


def prepare_ingest(args: argparse.Namespace) -> dict[str, Any]:
    """The Prefect-free start of ``folio ingest``: Prefect's environment (quiet unless
    --verbose; set before Prefect is first imported, which reads it then), the secrets as
    environment variables, and the pre-run checks, so a run that cannot finish stops here
    in one line before Prefect starts. Returns the flow's settings."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if not args.verbose:  # Prefect's own logs only with --verbose; folio's lines stay
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "CRITICAL")
    from folio.checks.run_checks import check_run
    from folio.errors import ConfigError
    from folio.security import secret_settings
    from folio.settings.run_config import resolve_config

    if args.dry_run and not args.sync:
        raise ConfigError("--dry-run goes with --sync: it lists what --sync would remove")
    os.environ.update(_secret_environment(args))
    # main() refused secrets on the command line; a caller that came another way still
    # hands them to the environment the flow (in this process) reads, never a parameter
    settings, secret_env = secret_settings.split(_settings(args))
    os.environ.update(secret_env)
    check_run(args.sources, args.out, resolve_config(
        engine=args.engine, route=args.route, reprocess=args.reprocess, settings=settings))
    return settings


def report_ingest(args: argparse.Namespace, report: dict[str, Any]) -> int:
    """Print the run's summary; the exit code: 3 when a document under the sources is
    partial or quarantined, whether this run processed it or an earlier run did and it
    is still so (cached): a rerun over a folder with a broken file says so every time,
    until the file is fixed, removed or left out (``--exclude``), else 0."""
    from folio.output.report import markdown_summary, still_failing

    print(markdown_summary(report))
    sync = report.get("sync") or {}
    if sync.get("dry_run"):
        for uri in sync.get("gone", []):
            print(f"would remove: {uri}")
    if args.report:
        print(f"\nreport: {args.report}")
    # skipped entries (a format folio does not read, a symlink out of the source) are
    # in the report and the summary but do not fail the run: nothing went wrong, and a
    # bucket's every ZIP would otherwise fail every run over it (docs/inputs.md)
    return EXIT_SOME_FAILED if still_failing(report["documents"]) else 0


def cmd_search(args: argparse.Namespace) -> int:
    """The ``k`` chunks nearest the query: one line each, or ``--json`` for a program (the
    citation a RAG answer needs: document id, pages from 1, boxes). A client of
    :mod:`folio.retrieval`, which a Python program uses to do the same in-process."""
    from folio.retrieval import open_index

    with open_index(args.out, store=args.store, store_uri=args.store_uri,
                    s3_endpoint_url=args.s3_endpoint_url, s3_region=args.s3_region) as index:
        hits = index.search(args.query, k=args.k, doc_id=args.doc_id or None,
                            source=args.source or None, source_prefix=args.source_prefix,
                            kind=args.kind or None)
    if args.json:
        print(json.dumps([hit.model_dump() for hit in hits], ensure_ascii=False))
        return 0
    for hit in hits:
        where = f" {printable(hit.location)}" if hit.location else ""
        print(f"{hit.score:.3f}  {printable(hit.source)} {hit.pages}{where}  doc {hit.doc_id}  "
              f"{hit.text[:100]!r}")
    return 0


def cmd_samples(args: argparse.Namespace) -> int:
    from folio.samples import make_samples

    for name, path in make_samples(Path(args.directory)).items():
        print(f"{name:10s} {path}")
    return 0


#: exit codes (README, "Using it"): 0 all ok
EXIT_INTERNAL = 1  # a bug: the traceback is shown with --verbose
EXIT_USAGE = 2  # bad arguments, a missing source, settings or credentials to fix
EXIT_SOME_FAILED = 3  # some documents under the sources are partial or quarantined, this run's or an earlier run's (cached) alike
EXIT_NOTHING = 5  # nothing to work on: no entry under the sources, no vectors to search
EXIT_UNREACHABLE = 6  # S3, the vector store or an OCR server could not be reached: retry


def main(argv: Sequence[str] | None = None,
         commands: Mapping[str, Command] | None = None) -> int:
    """Run one ``folio`` subcommand and map its errors to the README's exit codes.
    ``commands`` adds the subcommands the core cannot run itself (``ingest`` and
    ``trigger``, from the Prefect layer) to search and samples."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    known: dict[str, Command] = {"search": cmd_search, "samples": cmd_samples,
                                 **(commands or {})}
    command = known.get(args.command)
    if command is None:
        print(f"folio: `{args.command}` runs on Prefect: start it as `folio {args.command}` "
              f"or `python -m folio_prefect.flows.cli {args.command}`", file=sys.stderr)
        return EXIT_USAGE
    from folio.security.command_line import refuse_secrets

    def run() -> int:
        refuse_secrets(args)  # a command line is anyone's to read (exit 2, one line)
        return command(args)

    return run_mapped(run, verbose=getattr(args, "verbose", False))


class Terminated(KeyboardInterrupt):
    """SIGTERM (``docker stop``, a pod evicted, ``kill``), turned into the same orderly
    stop as Ctrl-C: the run's ``finally`` blocks close what it opened, and the process
    ends with one line and 143 instead of dying mid-write with no word."""


def _on_sigterm(signum: int, frame: object) -> None:
    from folio import stop_hooks

    stop_hooks.run_stop_hooks("SIGTERM")  # the report first: the orderly stop may not come
    stop_hooks.end_after_sigterm()
    raise Terminated()


def run_mapped(run: Callable[[], int], *, verbose: bool = False, prog: str = "folio") -> int:
    """``run()``'s exit code, or the README's exit code for the error it raised, with a
    one-line message on stderr (the traceback only with ``verbose``): every entry point
    a person starts ends the same way, bad input told apart from an outage."""
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _mapped(run, verbose=verbose, prog=prog)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _mapped(run: Callable[[], int], *, verbose: bool, prog: str) -> int:
    from folio.errors import BadInputError, ConfigError, FolioError, NothingToDoError

    try:
        return run()
    except NothingToDoError as err:
        code, message = EXIT_NOTHING, str(err)
    except (ConfigError, BadInputError) as err:
        code, message = EXIT_USAGE, str(err)
    except FolioError as err:  # transient: storage, endpoints, timeouts
        code, message = EXIT_UNREACHABLE, f"{err} (try again later)"
    except KeyboardInterrupt as err:
        # documents done so far stay done; the rest are not marked, so a rerun resumes
        how = "stopped by SIGTERM" if isinstance(err, Terminated) else "interrupted"
        print(f"{prog}: {how}; a rerun resumes with the documents not yet done",
              file=sys.stderr)
        return 143 if isinstance(err, Terminated) else 130
    except Exception as err:
        if verbose:
            raise
        code, message = EXIT_INTERNAL, (f"internal error: {type(err).__name__}: {err} "
                                        "(run again with --verbose for the traceback)")
    if verbose:
        import traceback

        traceback.print_exc()
    # a message may quote a setting (a DSN with its password) or a name from the input
    # (an escape sequence): neither reaches the terminal as it is
    from folio.security.redaction import redact_uri

    shown = "\n".join(printable(line) for line in redact_uri(message).split("\n"))
    print(f"{prog}: {shown}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
