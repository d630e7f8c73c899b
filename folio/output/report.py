"""The run report: what automation reads (JSON) and what a person reads (a table)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from folio.models import DocumentOutcome, DocumentResult


def document_summary(doc: DocumentResult) -> dict[str, Any]:
    """One document's line in the report; these key names are a public contract."""
    return {
        "source": doc.source,
        "doc_id": doc.doc_id,
        "sha256": doc.sha256,
        "pages": doc.page_count,
        "outcome": doc.outcome.value,
        "reason": doc.reason,
        "pages_ok": doc.pages_ok,
        "pages_fallback": doc.pages_fallback,
        "pages_quarantined": doc.pages_quarantined,
        "pages_recovered": sum(1 for p in doc.pages if p.outcome == "recovered"),
        "engine": doc.engine,
        "seconds": round(doc.seconds, 3),
        "cached": doc.cached,
        "retryable": doc.retryable,
        "repaired": doc.repaired,
        "compressed": doc.compression.used,
        "chunks": doc.chunks,
        "outputs": doc.outputs,
        "vector_table": doc.vector_table,
        "quarantined_pages": [
            # page from 1, as document.md, pages.jsonl and the vector rows count them
            {"page": p.index + 1, "reason": p.reason}
            for p in doc.pages if p.outcome == "quarantined"
        ],
    }


def build_report(docs: list[DocumentResult], *, seconds: float, out: str) -> dict[str, Any]:
    documents = [document_summary(d) for d in docs]
    pages = sum(d.page_count for d in docs if not d.cached)
    totals: dict[str, Any] = {
        "documents": len(docs),
        "pages": sum(d.page_count for d in docs),
        "pages_ok": sum(d.pages_ok for d in docs),
        "pages_fallback": sum(d.pages_fallback for d in docs),
        "pages_quarantined": sum(d.pages_quarantined for d in docs),
        "cached": sum(1 for d in docs if d.cached),
        "seconds": round(seconds, 3),
        "pages_per_s": round(pages / seconds, 3) if seconds > 0 else 0.0,
        "out": out,
    }
    for outcome in DocumentOutcome:
        totals[outcome.value] = sum(1 for d in docs if d.outcome is outcome)
    return {"documents": documents, "totals": totals}


def markdown_summary(report: dict[str, Any], *, links: bool = False,
                     data_docs: str | None = None) -> str:
    """The report as a markdown table (a Prefect artifact, and the CLI's printout).

    ``links`` adds a column linking each document's outputs (for the Prefect UI; a
    terminal shows the raw URIs badly) and ``data_docs`` a link to the Data Docs site.
    """
    t = report["totals"]
    out = _link(t["out"], t["out"]) if links else f"`{t['out']}`"
    lines = [
        (f"**{t['documents']} documents, {t['pages']} pages** in {t['seconds']:.1f} s "
         f"({t['pages_per_s']:.2f} pages/s): {t['ok']} ok, {t['partial']} partial, "
         f"{t['quarantined']} quarantined, {t['cached']} already done. Outputs: {out}"),
    ]
    if data_docs:
        lines.append(f"Validation results: {_link('Great Expectations Data Docs', data_docs)}")
    extra = " outputs |" if links else ""
    lines += [
        "",
        ("| document | outcome | pages | ok | fallback | quarantined | engine | s | pages/s | "
         f"reason |{extra}"),
        "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if links else ""),
    ]
    for d in report["documents"]:
        outcome = d["outcome"] + (" (cached)" if d["cached"] else "")
        # whole, never cut mid-word: the UI wraps the cell, a terminal wraps the line
        reason = " ".join(str(d["reason"]).split()).replace("|", "\\|")
        rate = d["pages"] / d["seconds"] if d["seconds"] > 0 and not d["cached"] else 0.0
        row = (
            f"| {d['source']} | {outcome} | {d['pages']} | {d['pages_ok']} | "
            f"{d['pages_fallback']} | {d['pages_quarantined']} | {d['engine']} | "
            f"{d['seconds']:.1f} | {rate:.2f} | {reason} |"
        )
        if links:
            outputs = d.get("outputs") or {}
            row += " " + " ".join(_link(name, uri) for name, uri in outputs.items()) + " |"
        lines.append(row)
    return "\n".join(lines)


def link_target(uri: str) -> str:
    """A URL for an output: ``file://`` for a local path, other schemes unchanged."""
    if "://" in uri:
        return uri
    return Path(uri).absolute().as_uri()


def _link(text: str, uri: str) -> str:
    return f"[{text}]({link_target(uri).replace(' ', '%20').replace(')', '%29')})"
