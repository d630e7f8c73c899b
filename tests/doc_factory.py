"""Hand-built DocumentResults for tests of the stages after OCR."""

from __future__ import annotations

import hashlib

from folio.models import BBox, Block, DocumentOutcome, DocumentResult, PageOutcome, PageResult


def block(label: str, content: str, order: int, y: float = 0.0) -> Block:
    return Block(
        label=label, content=content, order=order, bbox=BBox(x0=50, y0=y, x1=550, y1=y + 20)
    )


def page(
    index: int, blocks: list[Block], outcome: PageOutcome = PageOutcome.OK, reason: str = ""
) -> PageResult:
    markdown = "\n\n".join(b.content for b in sorted(blocks, key=lambda b: b.order))
    return PageResult(
        index=index,
        width_pt=612,
        height_pt=792,
        route="ocr",
        engine="tesseract",
        blocks=blocks,
        markdown=markdown if outcome != PageOutcome.QUARANTINED else "",
        outcome=outcome,
        reason=reason,
    )


def document(
    pages: list[PageResult], source: str = "s3://bucket/in/Annual Report.pdf", seed: str = "doc"
) -> DocumentResult:
    sha = hashlib.sha256(seed.encode()).hexdigest()
    quarantined = sum(p.outcome == PageOutcome.QUARANTINED for p in pages)
    return DocumentResult(
        source=source,
        doc_id=sha[:32],
        sha256=sha,
        config_hash="cfg0123456789abc",
        page_count=len(pages),
        pages=pages,
        outcome=DocumentOutcome.PARTIAL if quarantined else DocumentOutcome.OK,
        engine="tesseract",
    )


TABLE_HTML = (
    "<table><tr><th>Year</th><th>Revenue</th></tr>"
    + "".join(f"<tr><td>{2000 + i}</td><td>{i * 1000}</td></tr>" for i in range(60))
    + "</table>"
)


def report_document() -> DocumentResult:
    """Three pages: a title, sections, a long table, page furniture, a quarantined page."""
    p0 = page(
        0,
        [
            block("Page-Header", "ACME Corp — Annual Report", 0, 10),
            block("Title", "# Annual Report 2024", 1, 40),
            block("Text", "ACME had a strong year. Revenue grew in every region.", 2, 80),
            block("Section-Header", "## Finances", 3, 120),
            block("Text", "Revenue is summarised in the table below.", 4, 160),
            block("Table", TABLE_HTML, 5, 200),
            block("Page-Footer", "Page 1", 6, 760),
        ],
    )
    p1 = page(
        1,
        [
            block("Text", "The table shows steady growth over six decades.", 0, 40),
            block("Section-Header", "### Costs", 1, 80),
            block("Text", "Costs fell because the factory in Lyon was modernised.", 2, 120),
        ],
    )
    p2 = page(2, [], PageOutcome.QUARANTINED, "validation: repeat ratio 0.9")
    p3 = page(
        3,
        [
            block("Section-Header", "## Outlook", 0, 40),
            block("Text", "Next year the company plans to open two new plants.", 1, 80),
        ],
    )
    return document([p0, p1, p2, p3])
