"""The sweep: keep an S3 prefix ingested, at any size, with several sweeps and workers.

    list the prefix (paginated) -> skip what the ledger says is done
      -> claim (conditional write, leased) -> batches -> document deployment runs
         (at most ``max_in_flight`` per sweep, plus an optional global concurrency limit)
      -> per document: complete (done record) or fail (retried next sweep) -> release

Started twice, or killed and started again, it converges: a dead sweep's claims expire,
its batches' runs are found by tag and waited for (or resent when their worker died),
and documents already processed are found done, never processed again. With
``wait_for_others`` (default) a sweep returns only when every listed document is done,
failed or given up, whoever did the work. See :mod:`folio.claims` for the ledger.

    python -m folio_prefect.flows.sweep s3://bucket/in s3://bucket/out --inline
"""

from __future__ import annotations

import argparse
import heapq
import json
import logging
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple
from uuid import UUID

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.client.schemas.objects import FlowRun
from prefect.futures import PrefectFuture
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import BaseModel

# the S3 result block's class, which Prefect looks up by its slug
import folio_prefect.deployments.result_storage  # noqa: F401
from folio.claims import (
    ClaimKeeper,
    ClaimLedger,
    line_from_outputs,
    record_lines,
    report_lines,
)
from folio.claims.plan import plan_sweep
from folio.cli import run_mapped
from folio.index import sync as index_sync
from folio.io.s3 import ObjectRef, parse_s3_uri
from folio.settings.config import PipelineConfig, S3Settings, SourceSettings
from folio.settings.run_config import resolve_config
from folio.settings.vocabulary import EngineName, RouteRequest
from folio_prefect.deployments.runs import crash_run, is_zombie, read_run, run_report
from folio_prefect.tasks.sweep import find_batch_run, send_batch

log = logging.getLogger(__name__)

#: tally keys, in the order the summary shows them
COUNTS = ("documents", "processed", "cached", "skipped", "failed", "given_up",
          "claimed_by_others", "taken_over", "adopted", "lost", "resent", "batches",
          "excluded")
#: times a batch's documents are sent again in one sweep when its run crashed
RESENDS = 1
#: after a holder's lease expires, look again this much later (clock skew, renew delay)
RECHECK_MARGIN_S = 1.0


class Running(NamedTuple):
    """A batch in flight in this process: its documents, its task's future, and an event
    set by the future's done callback when the task has returned, whatever the Prefect
    API has heard of it."""

    uris: list[str]
    future: PrefectFuture[Any]
    ended: threading.Event


class SweepOptions(BaseModel):
    prefix: str
    out: str
    batch_size: int
    max_in_flight: int
    deployment: str
    inline: bool
    lease_s: float
    concurrency_limit: str | None
    wait_for_others: bool
    max_attempts: int
    zombie_after_s: float
    poll_s: float
    owner: str
    parameters: dict[str, Any]  # what every batch run gets, besides its sources
    scope: SourceSettings = SourceSettings()  # include/exclude globs over the prefix


class Sweep:
    """One sweep's bookkeeping: what is pending, running, adopted or waited for."""

    def __init__(self, ledger: ClaimLedger, keeper: ClaimKeeper, opts: SweepOptions,
                 s3: S3Settings) -> None:
        self.ledger, self.keeper, self.opts, self.s3 = ledger, keeper, opts, s3
        self.tally: Counter[str] = Counter({k: 0 for k in COUNTS})
        self.started = ledger.clock()
        self.pending: list[str] = []
        self.running: list[Running] = []
        self.adopted: dict[UUID, list[str]] = {}
        self.waiting: list[tuple[float, int, ObjectRef]] = []
        self.sends: Counter[str] = Counter()
        self._seq = 0
        self.listed: list[str] = []  # every source the listing found (for sync)

    # --- the listing pass -------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        plan = plan_sweep(self.opts.prefix, self.ledger, self.s3,
                          max_attempts=self.opts.max_attempts, scope=self.opts.scope,
                          on_excluded=lambda _: self.tally.update(excluded=1),
                          own=[self.opts.out])
        for obj, verdict in plan:
            self.tally["documents"] += 1
            self.listed.append(obj.uri)
            if verdict == "todo":
                self.claim(obj, first=True)
            else:
                self.tally[verdict] += 1
            if len(self.pending) >= self.opts.batch_size:
                self.flush(full_only=True)
            elif self.running:
                self.reap()
        self.settle()
        return dict(self.tally)

    def claim(self, obj: ObjectRef, *, first: bool) -> None:
        claim = self.ledger.try_claim(obj, self.opts.owner, self.opts.lease_s)
        if claim is None:
            self.tally["claimed_by_others"] += first
            if self.opts.wait_for_others:
                self.wait_on(obj)
            return
        if self.ledger.is_done(obj):  # finished between the listing and the claim
            self.ledger.release(claim)
            self.tally["skipped"] += 1
            return
        self.tally["taken_over"] += bool(claim.takeovers)
        self.keeper.add(claim)
        if not (claim.previous_batch and self.adopt(obj.uri, claim.previous_batch)):
            self.pending.append(obj.uri)

    def adopt(self, uri: str, batch_id: str) -> bool:
        """Follow the run a dead holder sent the document in; False: send it again."""
        run = find_batch_run(batch_id)
        if run is None or run.state is None:
            return False
        if run.state.is_final():
            lines = report_lines(run_report(run))
            if uri not in lines:
                return False
            self.tally["adopted"] += 1
            self.record([uri], lines)
            return True
        self.adopted.setdefault(run.id, []).append(uri)
        self.tally["adopted"] += 1
        return True

    def wait_on(self, obj: ObjectRef) -> None:
        holder = self.ledger.current(obj.uri)
        at = (holder.expires_at if holder else self.ledger.clock()) + RECHECK_MARGIN_S
        self._seq += 1
        heapq.heappush(self.waiting, (at, self._seq, obj))

    # --- batches ------------------------------------------------------------------------
    def flush(self, *, full_only: bool) -> None:
        """Send pending documents in batches as slots free up. ``full_only`` (listing):
        wait for a slot and send full batches only; otherwise send what fits now."""
        while self.pending:
            self.reap()
            if len(self.running) >= self.opts.max_in_flight:
                if not full_only:
                    return
                time.sleep(self.opts.poll_s)
                continue
            if full_only and len(self.pending) < self.opts.batch_size:
                return
            batch, self.pending = (self.pending[:self.opts.batch_size],
                                   self.pending[self.opts.batch_size:])
            self.submit(batch)

    def submit(self, uris: list[str]) -> None:
        batch_id = uuid.uuid4().hex[:16]
        kept = [c.source for c in self.keeper.assign(uris, batch_id)]
        self.tally["lost"] += len(uris) - len(kept)
        if not kept:
            return
        self.sends.update(kept)
        self.tally["batches"] += 1
        future = send_batch.submit(
            batch_id, deployment=self.opts.deployment, inline=self.opts.inline,
            parameters={**self.opts.parameters, "sources": kept},
            concurrency_limit=self.opts.concurrency_limit, poll_s=self.opts.poll_s,
            zombie_after_s=self.opts.zombie_after_s,
        )
        ended = threading.Event()
        future.add_done_callback(lambda _: ended.set())
        self.running.append(Running(kept, future, ended))

    def reap(self) -> None:
        """Record every batch whose task has returned.

        Whether it has is asked of the future in this process, not of the Prefect API
        (``future.state`` reads the task run from the server): the server learns a task
        run's states from events, which Prefect sends best-effort. One event lost (the
        server restarted, or this process's events sent to another server) left the
        batch Running there for good, and the sweep waiting for it forever."""
        for item in [r for r in self.running if r.ended.is_set()]:
            self.running.remove(item)
            report, run = item.future.result()
            self.finish(item.uris, report, run)

    def finish(self, uris: list[str], report: dict[str, Any] | None, run: FlowRun | None) -> None:
        lines = report_lines(report)
        if report is None and run is not None and run.state is not None and run.state.is_completed():
            lines = self.lines_from_outputs(uris)
        missing = self.record(uris, lines)
        why = f"run {run.name} ended {run.state.name}" if run and run.state else "run failed"
        for uri in missing:
            self.resend_or_fail(uri, why)

    def record(self, uris: list[str], lines: dict[str, dict[str, Any]]) -> list[str]:
        result = record_lines(self.ledger, self.keeper, uris, lines)
        for key in ("processed", "cached", "failed", "lost"):
            self.tally[key] += len(result[key])
        return result["missing"]

    def lines_from_outputs(self, uris: list[str]) -> dict[str, dict[str, Any]]:
        """The run completed but its report is unreadable: ask the outputs instead."""
        lines = {}
        with tempfile.TemporaryDirectory(prefix="folio-sweep-") as tmp:
            for uri in uris:
                claim = self.keeper.held_claim(uri)
                line = claim and line_from_outputs(claim, out=self.opts.out, s3=self.s3,
                                                   work_dir=Path(tmp))
                if line:
                    lines[uri] = line
        return lines

    def resend_or_fail(self, uri: str, why: str) -> None:
        if self.sends[uri] <= RESENDS:
            self.tally["resent"] += 1
            self.pending.append(uri)
            return
        claim = self.keeper.take(uri)
        if claim is None:
            self.tally["lost"] += 1
            return
        self.ledger.fail(claim, f"infrastructure: {why}", retryable=True)
        self.tally["failed"] += 1

    # --- after the listing: adopted runs, documents others hold, resends ------------------
    def settle(self) -> None:
        while self.pending or self.running or self.adopted or self.waiting:
            self.flush(full_only=False)
            self.reap()
            self.check_adopted()
            self.check_waiting()
            time.sleep(self.opts.poll_s)

    def check_adopted(self) -> None:
        for run_id, uris in list(self.adopted.items()):
            run = read_run(run_id)
            if run.state is not None and not run.state.is_final():
                if not is_zombie(run, self.opts.zombie_after_s):
                    continue
                crash_run(run, f"no heartbeat for {self.opts.zombie_after_s:.0f} s")
                run = read_run(run_id)
            del self.adopted[run_id]
            self.finish(uris, run_report(run), run)

    def check_waiting(self) -> None:
        now = self.ledger.clock()
        while self.waiting and self.waiting[0][0] <= now:
            _, _, obj = heapq.heappop(self.waiting)
            if self.ledger.is_done(obj):
                self.tally["skipped"] += 1
                continue
            failure = self.ledger.failure(obj.uri)
            if failure and failure.same_version(obj) and failure.failed_at >= self.started:
                self.tally["failed"] += 1  # failed under another sweep: retried next time
                continue
            self.claim(obj, first=False)


def sweep_sync(config: PipelineConfig, out: str, prefix: str, listed: list[str], *,
               apply: bool, started: Any, ledger: ClaimLedger) -> dict[str, Any]:
    """Count (or with ``apply`` remove) the sources indexed under ``prefix`` that its
    listing no longer has: as ``folio ingest --sync`` does. A gone source whose claim
    another sweep holds is left alone (it is being worked on: the claims that serialise
    documents serialise their removal too)."""

    def busy(uri: str) -> bool:
        claim = ledger.current(uri)
        return claim is not None and claim.held_at(ledger.clock())

    from folio.io.sinks import open_sink
    from folio.pipeline.services import Services
    from folio.stores.base import NullStore, VectorStore

    # the run's services (page workers, engines, the embedder) only when rows are to go:
    # most sweeps only count the indexed sources, which reads records from the sink
    opened: list[Services] = []

    def store() -> VectorStore:
        if config.store.kind == "none":
            return NullStore()
        if not opened:
            opened.append(Services(config, out))
        return opened[0].store()

    try:
        return index_sync.sync_roots(
            open_sink(out, config.s3), store, [prefix], listed, apply=apply, dry_run=False,
            started=started, s3=config.s3, busy=busy).model_dump(mode="json")
    finally:
        for services in opened:
            services.close()


def _owner() -> str:
    run_id = flow_run.get_id() or uuid.uuid4().hex
    return f"{socket.gethostname()}/{os.getpid()}/{run_id}"


def summary_markdown(summary: dict[str, Any]) -> str:
    rows = "\n".join(f"| {k} | {summary[k]} |" for k in COUNTS if k in summary)
    return (f"**Sweep of `{summary['prefix']}` into `{summary['out']}`** "
            f"in {summary['seconds']:.1f} s\n\n| count | value |\n|---|---|\n{rows}\n")


@flow(
    name="folio-sweep",
    description="Ingest every object under an S3 prefix exactly once, with leased claims.",
    task_runner=ThreadPoolTaskRunner(max_workers=32),  # type: ignore[arg-type]
)
def sweep(
    prefix: str,
    out: str,
    batch_size: int = 50,
    max_in_flight: int = 4,
    document_deployment: str = "folio-ingest/batch",
    engine: EngineName = "tesseract",
    route: RouteRequest = "default",
    settings: dict[str, Any] | None = None,
    lease_s: float = 300.0,
    inline: bool = False,
    concurrency_limit: str | None = None,
    wait_for_others: bool = True,
    max_attempts: int = 1,
    zombie_after_s: float = 600.0,
    poll_s: float = 5.0,
    sync: bool = False,
    reprocess: bool = False,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
) -> dict[str, Any]:
    """Ingest every object under ``prefix`` not yet done with this configuration (what
    folio does not read ends skipped, recorded as done).

    Args:
        prefix: s3://bucket/prefix to list (any size: listed page by page).
        out: outputs, vector store and the claim ledger (s3://bucket/prefix or a folder).
        batch_size: documents per run of the document deployment.
        max_in_flight: batch runs this sweep keeps going at once.
        document_deployment: "flow/deployment" taking ``sources``, ``out``, ``engine``,
            ``route`` and ``settings``, returning the ingest report (results persisted).
        engine, route, settings: as for ``folio-ingest``; they set the config hash.
        lease_s: claim lease; claims are renewed every third of it while work runs, so
            it bounds how long a dead sweep's documents wait, not how long a batch takes.
        inline: run batches in this process (no workers needed) instead of deployments.
        concurrency_limit: a Prefect global concurrency limit each batch run holds.
        wait_for_others: after the listing, wait for documents other sweeps hold (and
            take them over if their holder dies), so the sweep ends with all settled.
        max_attempts: tries per source version for documents that fail on their own
            merits (transient failures are always retried). 1, as ``folio ingest`` does:
            a document quarantined for good is skipped until its bytes change.
        sync: after the sweep, remove the rows and outputs of sources indexed under
            ``prefix`` that are gone from it (docs/index-sync.md).
        reprocess: try documents quarantined for good again (and process again what is
            sent; done documents stay skipped).
        zombie_after_s: a running batch run without heartbeats for this long is dead.
        poll_s: how often run states and waited-for claims are checked.
        include, exclude: globs of keys below ``prefix`` to sweep / to leave out (the
            excluded are counted); default: settings' sources.include / sources.exclude.
    """
    from folio.security.secret_settings import refuse

    refuse(settings or {})  # a parameter Prefect stores and shows: the worker's env holds keys
    started = time.monotonic()
    config = resolve_config(engine=engine, route=route, reprocess=False, settings=settings)
    scope = SourceSettings(include=include or config.sources.include,
                           exclude=exclude or config.sources.exclude)
    ledger = ClaimLedger.for_output(out, config.s3, config.config_hash())
    opts = SweepOptions(
        prefix=prefix, out=out, batch_size=max(1, batch_size), max_in_flight=max(1, max_in_flight),
        deployment=document_deployment, inline=inline, lease_s=lease_s,
        concurrency_limit=concurrency_limit, wait_for_others=wait_for_others,
        max_attempts=10**9 if reprocess else max_attempts, zombie_after_s=zombie_after_s,
        poll_s=poll_s, owner=_owner(),
        parameters={"out": out, "engine": engine, "route": route, "settings": settings,
                    **({"reprocess": True} if reprocess else {})},
        scope=scope,
    )
    get_run_logger().info("sweep %s -> %s as %s", prefix, out, opts.owner)
    sync_started = index_sync.now()
    with ClaimKeeper(ledger, lease_s) as keeper:
        work = Sweep(ledger, keeper, opts, config.s3)
        counts = work.run()
    summary: dict[str, Any] = {
        **counts, "prefix": prefix, "out": out, "config_hash": ledger.config_hash,
        "owner": opts.owner, "seconds": round(time.monotonic() - started, 3),
    }
    summary["sync"] = sweep_sync(config, out, prefix, work.listed, apply=sync,
                                 started=sync_started, ledger=ledger)
    create_markdown_artifact(summary_markdown(summary), key="folio-sweep-summary",
                             description="folio sweep summary")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m folio_prefect.flows.sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix")
    ap.add_argument("out")
    ap.add_argument("--batch-size", type=int, default=50)
    ap.add_argument("--max-in-flight", type=int, default=4)
    ap.add_argument("--deployment", default="folio-ingest/batch")
    ap.add_argument("--engine", default="tesseract")
    ap.add_argument("--route", default="default", help="default: ocr for vllm/openai, else auto")
    ap.add_argument("--lease-s", type=float, default=300.0)
    ap.add_argument("--zombie-after-s", type=float, default=600.0)
    ap.add_argument("--poll-s", type=float, default=5.0)
    ap.add_argument("--inline", action="store_true")
    ap.add_argument("--no-wait", action="store_true", help="do not wait for other sweeps' work")
    ap.add_argument("--sync", action="store_true",
                    help="also remove what is indexed under PREFIX and gone from it")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a PipelineConfig override (JSON values allowed)")
    ap.add_argument("--include", action="append", default=[], metavar="GLOB",
                    help="sweep only keys below the prefix matching one of these")
    ap.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                    help="leave out keys below the prefix matching one (counted)")
    ap.add_argument("--verbose", action="store_true", help="the traceback of an internal error")
    args = ap.parse_args(argv)
    settings = dict(_setting(s) for s in args.set) or None

    def run() -> int:
        # bad input is told before Prefect starts (a flow's failure is logged with its
        # traceback): the prefix to list, and the settings every batch will run with
        parse_s3_uri(args.prefix)
        resolve_config(engine=args.engine, route=args.route, reprocess=False, settings=settings)
        summary = sweep(
            prefix=args.prefix, out=args.out, batch_size=args.batch_size,
            max_in_flight=args.max_in_flight, document_deployment=args.deployment,
            engine=args.engine, route=args.route, settings=settings, lease_s=args.lease_s,
            inline=args.inline, wait_for_others=not args.no_wait,
            zombie_after_s=args.zombie_after_s, poll_s=args.poll_s, sync=args.sync,
            include=args.include or None, exclude=args.exclude or None,
        )
        sys.stdout.write(json.dumps(summary) + "\n")
        return 0

    # the README's exit codes and a one-line reason, as `folio ingest` ends
    return run_mapped(run, verbose=args.verbose, prog="folio sweep")


def _setting(text: str) -> tuple[str, Any]:
    key, _, raw = text.partition("=")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


if __name__ == "__main__":
    raise SystemExit(main())
