"""The run report: what automation reads (JSON) and what a person reads (a table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from folio.models import DocumentOutcome, DocumentResult
from folio.security.display import printable, table_cell


def document_summary(doc: DocumentResult) -> dict[str, Any]:
    """One document's line in the report; these key names are a public contract."""
    return {
        "source": doc.source,
        "doc_id": doc.doc_id,
        "sha256": doc.sha256,
        "pages": doc.page_count,
        "outcome": doc.outcome.value,
        "format": doc.format,
        "reason": doc.reason,
        "pages_ok": doc.pages_ok,
        "pages_fallback": doc.pages_fallback,
        "pages_quarantined": doc.pages_quarantined,
        "pages_recovered": sum(1 for p in doc.pages if p.outcome == "recovered"),
        "pages_without_text": doc.pages_without_text,
        "engine": doc.engine,
        "seconds": round(doc.seconds, 3),
        "cached": doc.cached,
        "retryable": doc.retryable,
        "repaired": doc.repaired,
        "compressed": doc.compression.used,
        "chunks": doc.chunks,
        "figures": doc.figures,  # crops written beside document.md (folio.figures)
        "figure_bytes": doc.figure_bytes,
        "outputs": doc.outputs,
        "vector_table": doc.vector_table,
        "quarantined_pages": [
            # page from 1, as document.md, pages.jsonl and the vector rows count them
            {"page": p.index + 1, "reason": p.reason}
            for p in doc.pages if p.outcome == "quarantined"
        ],
    }


def build_report(docs: list[DocumentResult], *, seconds: float, out: str,
                 excluded: int = 0) -> dict[str, Any]:
    """The run report: a line per entry (skipped ones included) and the totals; entries
    the run's include/exclude globs left out are counted (``excluded``), not listed."""
    documents = [document_summary(d) for d in docs]
    pages = sum(d.page_count for d in docs if not d.cached)
    totals: dict[str, Any] = {
        "documents": len(docs),
        "pages": sum(d.page_count for d in docs),
        "pages_ok": sum(d.pages_ok for d in docs),
        "pages_fallback": sum(d.pages_fallback for d in docs),
        "pages_quarantined": sum(d.pages_quarantined for d in docs),
        "pages_without_text": sum(d.pages_without_text for d in docs),
        "cached": sum(1 for d in docs if d.cached),
        "figures": sum(d.figures for d in docs if not d.cached),
        "figure_bytes": sum(d.figure_bytes for d in docs if not d.cached),
        "excluded": excluded,
        "seconds": round(seconds, 3),
        "pages_per_s": round(pages / seconds, 3) if seconds > 0 else 0.0,
        "out": out,
    }
    for outcome in DocumentOutcome:
        totals[outcome.value] = sum(1 for d in docs if d.outcome is outcome)
    return {"documents": documents, "totals": totals}


#: the final state's message of a run in which every document it processed was
#: quarantined opens with this (folio_prefect.flows.ingest fails such a run; a trigger's
#: ``--wait`` reads it to exit 3, as for quarantined documents, rather than 1)
ALL_QUARANTINED = "every document quarantined"


def nothing_processed(report: dict[str, Any]) -> str | None:
    """Why a run produced nothing, or None when it did: every document it processed (not
    those an earlier run finished) was quarantined. The message opens with
    :data:`ALL_QUARANTINED` and gives the first reasons (one line)."""
    fresh = [d for d in report["documents"] if not d["cached"]]
    if not fresh or any(d["outcome"] != "quarantined" for d in fresh):
        return None
    reasons = list(dict.fromkeys(" ".join(str(d["reason"]).split()) for d in fresh))
    shown = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")
    return f"{ALL_QUARANTINED} ({len(fresh)}): {shown}"


def still_failing(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The report's documents that are partial or quarantined, cached or not: what a
    rerun's exit code 3 and its summary own up to (a cached quarantine is not fixed)."""
    return [d for d in documents if d["outcome"] in ("partial", "quarantined")]


def markdown_summary(report: dict[str, Any], *, links: bool = False,
                     data_docs: str | None = None) -> str:
    """The report as a markdown table (a Prefect artifact, and the CLI's printout), then
    the reasons of the documents that have one, as a list.

    The table fits a normal window (the Prefect UI at 1400 px, whose table cells do not
    wrap): four short columns, the engine and the rate in the line over it, and the
    reasons (the long text) in the list under it, where lines wrap. ``links`` (the
    Prefect UI) names each document by its output folder, relative to the output folder
    the line over the table gives (an ``s3://`` URI or a path as given): the worker's
    absolute path, as a ``file://`` link, opened nothing in a browser on another
    machine. ``data_docs`` links the Data Docs site.
    """
    t = report["totals"]
    engines = sorted({str(d["engine"]) for d in report["documents"] if d.get("engine")})
    lines = [
        (f"**{t['documents']} documents, {t['pages']} pages** in {t['seconds']:.1f} s "
         f"({t['pages_per_s']:.2f} pages/s{', ' + ', '.join(engines) if engines else ''}): "
         f"{t['ok']} ok, {t['partial']} partial, {t['quarantined']} quarantined, "
         f"{t.get('skipped', 0)} skipped, {t['cached']} already done"
         + (f", {t['excluded']} excluded by --include/--exclude" if t.get("excluded") else "")
         + f". Outputs: `{t['out']}`"
         + (f"{OUTPUT_FILES}" if links else "")),
    ]
    earlier = [d for d in still_failing(report["documents"]) if d["cached"]]
    if earlier:
        lines[0] += (f". Still partial or quarantined from earlier runs: {len(earlier)} "
                     "(cached: fix or remove the file, or leave it out with --exclude)")
    lines += _sync_lines(report.get("sync"))
    if t.get("pages_without_text"):
        lines[0] += f". Pages read without text on them: {t['pages_without_text']}."
    if data_docs:
        lines.append(f"Validation results: {_link('Great Expectations Data Docs', data_docs)}")
    lines += ["", "| document | outcome | pages ok | s |", "|---|---|---|---|"]
    reasons = []
    for d in report["documents"]:
        outcome = d["outcome"] + (" (cached)" if d["cached"] else "")
        folder = _folder(d.get("outputs") or {}, str(t["out"])) if links else None
        name = f"`{table_cell(folder)}/`" if folder else _cell(_short(_file_name(d["source"])))
        lines.append(f"| {name} | {outcome} | {d['pages_ok']}/{d['pages']} | "
                     f"{d['seconds']:.1f} |")
        # a name or reason from the input is shown with its control characters escaped
        # (an escape sequence must not reach the terminal, a newline the list)
        reason = printable(" ".join(str(d["reason"]).split()))
        if reason:
            reasons.append(f"- {printable(_file_name(d['source']))} "
                           f"({outcome}{_page_counts(d)}): {reason}")
    if reasons:
        lines += ["", "Reasons:", "", *reasons]
    return "\n".join(lines)


#: what each document's output folder holds (folio.output.outputs), said once over the table
OUTPUT_FILES = "; each document's folder there holds document.md, document.json, pages.jsonl"
#: a file name longer than this is shortened in the table (cells do not wrap in the UI)
NAME_CHARS = 48


def _cell(text: str) -> str:
    return table_cell(text)


def _short(name: str) -> str:
    if len(name) <= NAME_CHARS:
        return name
    half = (NAME_CHARS - 1) // 2
    return f"{name[:half]}…{name[-half:]}"


def _file_name(source: str) -> str:
    """A source's last part (``s3://b/in/a.pdf`` -> ``a.pdf``): the full URI is one long
    word; the quarantine table names it whole."""
    return source.rstrip("/").rsplit("/", 1)[-1] or source


def _page_counts(d: dict[str, Any]) -> str:
    """``; 1 fallback, 1 quarantined of 4 pages`` (none: empty)."""
    parts = [f"{d[key]} {name}" for key, name in (
        ("pages_fallback", "fallback"), ("pages_quarantined", "quarantined")) if d.get(key)]
    return f"; {', '.join(parts)} of {d['pages']} pages" if parts else ""


def output_ref(uri: str, out: str) -> str:
    """Where an output is, for a person: relative to the output folder ``out`` when it
    lies under it (``s3://b/out/x/document.md`` under ``s3://b/out`` -> ``x/document.md``,
    a local path likewise), else the URI or path as it is."""
    if "://" in out or "://" in uri:
        prefix = out.rstrip("/") + "/"
        return uri[len(prefix):] if uri.startswith(prefix) else uri
    try:
        return Path(uri).absolute().relative_to(Path(out).absolute()).as_posix()
    except ValueError:
        return uri


def _folder(outputs: dict[str, str], out: str) -> str | None:
    """The one folder (relative to ``out``) a document's outputs share, or None."""
    folders = {output_ref(uri, out).rsplit("/", 1)[0] for name, uri in outputs.items()
               if name != "quarantine" and "/" in output_ref(uri, out)}
    return folders.pop() if len(folders) == 1 else None


def link_target(uri: str) -> str:
    """A URL for an output: ``file://`` for a local path, other schemes unchanged."""
    if "://" in uri:
        return uri
    return Path(uri).absolute().as_uri()


def _link(text: str, uri: str) -> str:
    return f"[{text}]({link_target(uri).replace(' ', '%20').replace(')', '%29')})"


def _sync_lines(sync: dict[str, Any] | None) -> list[str]:
    """What the run found (and with --sync did) about indexed sources gone from its
    roots (docs/index-sync.md)."""
    if not sync:
        return []
    refused = [f"--sync: left alone a live record folio did not write: {printable(line)}"
               for line in sync.get("refused", [])]
    return refused + _sync_outcome(sync)


def _sync_outcome(sync: dict[str, Any]) -> list[str]:
    if sync.get("dry_run"):
        return [f"--sync --dry-run: {len(sync.get('gone', []))} indexed source(s) gone from "
                "the roots would be removed (listed below); nothing was changed"]
    if sync.get("applied"):
        kept = f", {len(sync['kept'])} found again and kept" if sync.get("kept") else ""
        return [f"--sync: removed {len(sync.get('removed', []))} source(s) gone from the roots "
                f"({sync.get('rows_removed', 0)} vector rows){kept}"]
    if sync.get("gone_count"):
        named = [printable(uri) for uri in sync.get("gone", [])]
        more = sync["gone_count"] - len(named)
        listed = ": " + ", ".join(named) + (f" and {more} more" if more > 0 else "") if named else ""
        return [f"{sync['gone_count']} indexed source(s) are gone from the roots{listed}; "
                "`folio ingest --sync` removes their chunks and outputs"]
    return []
