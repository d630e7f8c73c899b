"""Figures as Picture blocks, their links and their chunks: the pure parts of
folio.figures, and the vector tables' image_uri column on real LanceDB and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from folio.cli import _parser, _settings
from folio.figures.crops import crop_size
from folio.figures.links import resolve_page
from folio.figures.regions import (
    cpu_pictures,
    match_regions,
    model_pictures,
    page_pictures,
)
from folio.models import BBox, Block, Chunk, DocumentResult, Label, PageOutcome, PageResult, Region
from folio.output.chunking import chunk_document
from folio.parsers import chandra
from folio.retrieval import Hit
from folio.settings.config import ChunkSettings, S3Settings, StoreSettings
from folio.stores import open_store
from folio.stores.lance_schema import chunk_schema
from folio.stores.lancedb_store import LanceDBStore
from folio.stores.pgvector_store import PgVectorStore
from tests.store_data import DIM, chunks, vectors

W, H = 612.0, 792.0
FIGURE = BBox(x0=300, y0=400, x1=560, y1=700)


def _record(row: dict[str, object]) -> dict[str, object]:
    """A store row as ``folio search --json`` prints it."""
    return Hit.from_row(row).model_dump()


def _block(label: str, box: tuple[float, float, float, float], text: str, order: int) -> Block:
    return Block(label=label, bbox=BBox(x0=box[0], y0=box[1], x1=box[2], y1=box[3]),
                 content=text, order=order)


def _region(label: Label, box: BBox) -> Region:
    return Region(label=label, bbox=box, score=0.9, source_class=label.value.lower())


def _drawing_page() -> list[Block]:
    """A text column, then a drawing whose labels the layout labelled Figure one by one
    (as amt_handbook_sample.pdf's eleven), then its caption."""
    labels = ["Nut case", "Untightened nut", "Locking shoulder", "Threaded nut core",
              "Keyway", "Tightened nut"]
    blocks = [_block("Text", (72, 100, 290, 300), "Body text of the page " * 5, 0)]
    for n, text in enumerate(labels):
        blocks.append(_block("Figure", (320 + 10 * n, 420 + 40 * n, 420 + 10 * n, 432 + 40 * n),
                             text, len(blocks)))
    blocks.append(_block("Caption", (321, 705, 480, 716), "Figure 7-27. A nut.", len(blocks)))
    return blocks


def test_the_words_inside_a_figure_are_one_picture_block_not_scattered_blocks() -> None:
    blocks = _drawing_page()
    found, markdown = page_pictures(
        blocks, "", block_markdown=True, layout=[_region(Label.FIGURE, FIGURE)], images=[],
        width=W, height=H, min_cover=0.5, min_side=48)
    assert [b.label for b in found] == ["Text", "Picture", "Caption"]
    picture = found[1]
    assert picture.content.split("\n") == [b.content for b in blocks[1:-1]]
    assert picture.bbox == FIGURE
    assert picture.caption == "Figure 7-27. A nut."
    assert [b.order for b in found] == [0, 1, 2]
    # the markdown shows the figure as its image (pending until the crop is written)
    assert f"![Figure 7-27. A nut.]({picture.image})" in markdown
    assert "Keyway" not in markdown


def _item(box: tuple[float, float, float, float], text: str, order: int) -> Block:
    return _block("List-Item", box, text, order).model_copy(update={"marker": "-", "level": 1})


def test_a_list_on_a_page_taken_for_a_figure_stays_a_list_and_a_drawings_goes_in_it() -> None:
    """A flyer the layout model takes for one picture (docling's redp5110 page 3): its
    prose makes the region text again, and its bulleted lines stay list items. A real
    drawing's bulleted labels go into its picture as its other labels do."""
    from folio.page.layout_labels import label_blocks

    page = _region(Label.FIGURE, BBox(x0=40, y0=60, x1=570, y1=740))
    prose = _block("Text", (72, 80, 540, 160), " ".join(["sentence"] * 50) + ".", 0)
    items = [_item((90, 200 + 20 * n, 400, 214 + 20 * n), f"point number {n}", 1 + n)
             for n in range(3)]
    labelled, _ = label_blocks([prose, *items], [page], 0.5)
    found = cpu_pictures(labelled, [page], [], width=W, height=H, min_cover=0.5, min_side=48)
    assert [(b.label, b.marker, b.content) for b in found[1:]] == [
        ("List-Item", "-", f"point number {n}") for n in range(3)]
    assert found[0].label == "Text"

    labels = [_item((320, 430 + 30 * n, 450, 442 + 30 * n), f"part {n}", n) for n in range(3)]
    labelled, _ = label_blocks(labels, [_region(Label.FIGURE, FIGURE)], 0.5)
    found = cpu_pictures(labelled, [_region(Label.FIGURE, FIGURE)], [], width=W, height=H,
                         min_cover=0.5, min_side=48)
    assert [b.label for b in found] == ["Picture"]
    assert found[0].content.split("\n") == ["part 0", "part 1", "part 2"]


def test_an_item_in_a_figure_too_small_to_be_one_stays_an_item() -> None:
    """A layout region over one numbered step, too thin for a picture: the step stays a
    list item; a block that leaves the list keeps its marker in its words."""
    from folio.page.layout_labels import label_blocks

    thin = _region(Label.FIGURE, BBox(x0=130, y0=380, x1=545, y1=395))
    step = _item((136, 381, 540, 394), "Look at the definition of the table.", 0)
    step = step.model_copy(update={"marker": "2."})
    labelled, _ = label_blocks([step], [thin], 0.5)
    found = cpu_pictures(labelled, [thin], [], width=W, height=H, min_cover=0.5, min_side=48)
    assert [(b.label, b.marker, b.level, b.content) for b in found] == [
        ("List-Item", "2.", 1, "Look at the definition of the table.")]
    text = step.relabelled("Text")
    assert (text.label, text.marker, text.level, text.content) == (
        "Text", None, None, "2. Look at the definition of the table.")


def test_a_figure_without_words_is_a_picture_in_its_place_in_the_reading_order() -> None:
    above = _block("Text", (72, 100, 540, 300), "Text above.", 0)
    below = _block("Text", (72, 720, 540, 760), "Text below.", 1)
    found = cpu_pictures([above, below], [_region(Label.FIGURE, FIGURE)], [], width=W,
                         height=H, min_cover=0.5, min_side=48)
    assert [b.label for b in found] == ["Text", "Picture", "Text"]
    assert found[1].content == "" and found[1].bbox == FIGURE


def test_image_objects_the_layout_model_missed_are_pictures_unless_tiny_or_the_page() -> None:
    text = _block("Text", (72, 72, 540, 100), "A heading line.", 0)
    photo = BBox(x0=72, y0=200, x1=300, y1=380)
    tiles = [BBox(x0=320, y0=200, x1=540, y1=290), BBox(x0=320, y0=290, x1=540, y1=380)]
    logo = BBox(x0=500, y0=20, x1=580, y1=50)  # 30 pt high: under min_side
    scan = BBox(x0=0, y0=0, x1=W, y1=H)
    covered = BBox(x0=305, y0=405, x1=555, y1=695)  # the layout's figure has it already
    found = cpu_pictures([text], [_region(Label.FIGURE, FIGURE)],
                         [photo, *tiles, logo, scan, covered], width=W, height=H,
                         min_cover=0.5, min_side=48)
    boxes = sorted((b.bbox.x0, b.bbox.y0, b.bbox.x1, b.bbox.y1)
                   for b in found if b.label == "Picture" and b.bbox)
    assert boxes == [(72, 200, 300, 380), (300, 400, 560, 700), (320, 200, 540, 380)]


def test_an_image_under_a_paragraph_is_a_background_not_a_figure() -> None:
    prose = _block("Text", (80, 110, 520, 380), " ".join(["word"] * 80), 0)
    found = cpu_pictures([prose], [], [BBox(x0=72, y0=100, x1=540, y1=400)], width=W,
                         height=H, min_cover=0.5, min_side=48)
    assert [b.label for b in found] == ["Text"]


def test_a_figure_region_the_labelling_made_a_table_is_no_picture() -> None:
    cells = [_block("Table", (310, 410 + 20 * n, 550, 425 + 20 * n), f"row {n}", n)
             for n in range(3)]
    found = cpu_pictures(cells, [_region(Label.FIGURE, FIGURE)], [], width=W, height=H,
                         min_cover=0.5, min_side=48)
    assert [b.label for b in found] == ["Table"] * 3


def test_a_figure_region_of_paragraphs_is_text_not_a_picture() -> None:
    """A layout model takes a list, a table of contents or a page of a script without
    letter case for one picture; hidden in a Picture its text would leave document.md."""
    items = [_block("Figure", (310, 410 + 40 * n, 550, 440 + 40 * n),
                    " ".join(["item"] * 15), n) for n in range(4)]
    found, markdown = page_pictures(
        items, "", block_markdown=True, layout=[_region(Label.FIGURE, FIGURE)], images=[],
        width=W, height=H, min_cover=0.5, min_side=48)
    assert [b.label for b in found] == ["Text"] * 4
    assert markdown.count("item") == 60


CHANDRA_ANSWER = (
    '<div data-bbox="[80, 60, 940, 120]" data-label="Section-Header"><h2>Results</h2></div>'
    '<div data-bbox="[300, 300, 724, 600]" data-label="Image">'
    '<img alt="A photo of a [red] bridge"/></div>'
    '<div data-bbox="[300, 610, 724, 640]" data-label="Caption"><p>Figure 1: The bridge.</p></div>'
    '<div data-bbox="[100, 700, 900, 900]" data-label="Figure">'
    '<img alt="Bar chart of revenue"/></div>'
)


def _chandra_page() -> PageResult:
    blocks, markdown = chandra.parse(CHANDRA_ANSWER, width_pt=W, height_pt=H)
    found, markdown = page_pictures(blocks, markdown, block_markdown=False, layout=None,
                                    images=None, width=W, height=H, min_cover=0.5,
                                    min_side=48)
    return PageResult(index=2, width_pt=W, height_pt=H, blocks=found, markdown=markdown,
                      outcome=PageOutcome.OK, engine="openai")


def test_chandra_s_image_names_are_replaced_by_the_crops_and_none_dangles() -> None:
    page = _chandra_page()
    assert "_img.webp" in page.markdown  # Chandra's own names, which nobody writes
    pictures = [b for b in page.blocks if b.label == Label.PICTURE.value]
    assert [p.alt for p in pictures] == ["A photo of a [red] bridge", "Bar chart of revenue"]
    assert pictures[0].caption == "Figure 1: The bridge."
    written = {pictures[0].image: "figures/p0003-1.jpg", pictures[1].image: "figures/p0003-2.png"}
    done = resolve_page(page, {k: v for k, v in written.items() if k})
    assert "_img.webp" not in done.markdown
    assert "![Figure 1: The bridge.](figures/p0003-1.jpg)" in done.markdown
    assert "![Bar chart of revenue](figures/p0003-2.png)" in done.markdown
    assert [b.image for b in done.blocks if b.label == "Picture"] == list(written.values())
    # no crop (figures.mode none): no link at all, the description stays as text
    bare = resolve_page(page, {})
    assert "](" not in bare.markdown and "Bar chart of revenue" in bare.markdown
    assert all(b.image is None for b in bare.blocks if b.label == "Picture")


def test_a_page_without_figures_is_left_as_it_is() -> None:
    page = PageResult(index=0, width_pt=W, height_pt=H, markdown="a\n\n\n\nb",
                      blocks=[Block(label="Text", content="a", order=0)])
    assert resolve_page(page, {}) is page


def test_olmocr_s_images_take_the_layout_s_figure_regions_in_reading_order() -> None:
    top, bottom = BBox(x0=72, y0=100, x1=540, y1=300), BBox(x0=72, y0=400, x1=540, y1=600)
    own = BBox(x0=80, y0=410, x1=530, y1=590)  # olmOCR's page_x_y_w_h, near the bottom one
    assert match_regions([None, None], [bottom, top]) == [top, bottom]
    assert match_regions([None, own], [bottom, top]) == [top, bottom]
    assert match_regions([None, None, None], [top]) == [top, None, None]
    blocks = [Block(label="Text", content="Intro", order=0),
              Block(label="Figure", content="![Latency histogram](page_1_2.png)", order=1)]
    found = model_pictures(blocks, [_region(Label.FIGURE, bottom)])
    assert found[1].label == "Picture" and found[1].bbox == bottom
    assert (found[1].alt, found[1].image) == ("Latency histogram", "page_1_2.png")


def test_a_crop_keeps_to_its_dpi_under_the_pixel_cap() -> None:
    assert crop_size(BBox(x0=0, y0=0, x1=72, y1=144), 150, 10**7)[1:] == (150, 300)
    scale, w, h = crop_size(BBox(x0=0, y0=0, x1=1440, y1=1440), 150, 1_000_000)
    assert w * h <= 1_000_000 and w == h == 1000


def test_each_figure_is_a_chunk_of_its_own_carrying_its_crop_s_uri() -> None:
    picture = Block(label="Picture", bbox=FIGURE, content="Keyway\nNut case", order=1,
                    image="figures/p0001-1.png", caption="Figure 7-27. A nut.",
                    alt="A cut-away nut")
    page = PageResult(index=0, width_pt=W, height_pt=H, outcome=PageOutcome.OK, blocks=[
        Block(label="Text", content="Before the figure.", order=0), picture,
        Block(label="Text", content="After the figure.", order=2)])
    doc = DocumentResult(source="s3://b/in/a.pdf", doc_id="d", sha256="s", config_hash="c",
                         page_count=1, pages=[page], folder_uri="s3://b/out/a-d")
    found = chunk_document(doc, ChunkSettings())
    assert [c.kind for c in found] == ["text", "figure", "text"]
    figure = found[1]
    assert figure.text == "Figure 7-27. A nut.\n\nA cut-away nut\n\nKeyway\nNut case"
    assert figure.image_uri == "s3://b/out/a-d/figures/p0001-1.png"
    assert figure.boxes == [(1, FIGURE)] and found[0].image_uri is None


def test_figures_none_on_the_command_line_is_the_figures_mode_setting() -> None:
    args = _parser().parse_args(["ingest", "x.pdf", "--out", "o", "--figures", "none"])
    assert _settings(args)["figures.mode"] == "none"
    args = _parser().parse_args(["ingest", "x.pdf", "--out", "o"])
    assert "figures.mode" not in _settings(args)


def _with_images(doc_id: str) -> list[Chunk]:
    rows = chunks(doc_id, 2)
    rows[1] = rows[1].model_copy(update={"kind": "figure", "image_uri": "/out/d/figures/p1-1.png"})
    rows[0] = rows[0].model_copy(update={"location": "Shipments!A1:C9"})  # a sheet's range
    return rows


#: the columns tables made before figure chunks, native Office reading and recorded
#: embedders lack, last
LATE = ["image_uri", "location", "embedder"]


def test_lancedb_rows_carry_image_uri_and_location_last_and_an_older_table_gets_them(
        tmp_path: Path) -> None:
    import lancedb
    import pyarrow as pa

    assert chunk_schema(DIM).names[-3:] == LATE
    uri = str(tmp_path / "v")
    old = pa.schema([f for f in chunk_schema(DIM) if f.name not in LATE])
    row = {"id": "old-0", "doc_id": "old", "source": "a.pdf", "chunk_index": 0, "kind": "text",
           "text": "old chunk", "page_start": 1, "page_end": 1, "headings": [], "boxes": [],
           "vector": vectors(1, 3)[0].tolist()}
    lancedb.connect(uri).create_table("chunks", pa.Table.from_pylist([row], schema=old))
    store = LanceDBStore(uri, dim=DIM)
    (hit,) = store.search(vectors(1, 3)[0], k=1)  # read before any write: no column yet
    assert hit["id"] == "old-0" and _record({**hit, "score": 1.0})["image_uri"] is None
    assert _record({**hit, "score": 1.0})["location"] is None
    store.replace_document("d", _with_images("d"), vectors(2, 5))
    assert lancedb.connect(uri).open_table("chunks").schema.names[-3:] == LATE
    hits = {h["id"]: h for h in store.search(vectors(2, 5)[1], k=3)}
    assert {_record(h)["image_uri"] for h in hits.values()} == {
        None, "/out/d/figures/p1-1.png"}
    assert {_record(h)["location"] for h in hits.values()} == {None, "Shipments!A1:C9"}


@pytest.fixture()
def pg_store(pg_dsn: str) -> Iterator[tuple[PgVectorStore, str]]:
    table = f"fig_{uuid.uuid4().hex[:8]}"
    store = open_store(StoreSettings(kind="pgvector", uri=pg_dsn, table=table),
                       default_uri="ignored", s3=S3Settings(), dim=DIM)
    assert isinstance(store, PgVectorStore)
    yield store, table
    store.close()


def test_pgvector_rows_carry_image_uri_and_location_and_an_older_table_gets_them(
        pg_dsn: str, pg_store: tuple[PgVectorStore, str]) -> None:
    store, table = pg_store
    store.replace_document("a", chunks("a", 1), vectors(1, 1))  # makes the tables
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # as an older folio made them
        for name in (table, store.delta_table):
            conn.execute(sql.SQL("ALTER TABLE {t} DROP COLUMN image_uri, DROP COLUMN location,"
                                 " DROP COLUMN embedder")
                         .format(t=sql.Identifier(name)))
    older = open_store(StoreSettings(kind="pgvector", uri=pg_dsn, table=table),
                       default_uri="ignored", s3=S3Settings(), dim=DIM)
    assert isinstance(older, PgVectorStore)
    try:
        first = _record(older.search(vectors(1, 1)[0], k=1)[0])
        assert first["image_uri"] is None and first["location"] is None
        older.replace_document("d", _with_images("d"), vectors(2, 5))
        hits = older.search(vectors(2, 5)[1], k=3)
        assert "/out/d/figures/p1-1.png" in {_record(h)["image_uri"] for h in hits}
        assert "Shipments!A1:C9" in {_record(h)["location"] for h in hits}
    finally:
        older.close()
    with psycopg.connect(pg_dsn) as conn:
        cols = [r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
            " AND attnum > 0 AND NOT attisdropped ORDER BY attnum", (table,))]
    assert cols[-3:] == LATE


def test_pgvector_table_of_the_last_release_keeps_its_image_uri_before_any_write(
        pg_dsn: str, pg_store: tuple[PgVectorStore, str]) -> None:
    """A table written before location and embedder came in (it has image_uri): a
    read-only search returns its crops, and NULL for the columns it lacks."""
    store, table = pg_store
    store.replace_document("d", _with_images("d"), vectors(2, 5))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for name in (table, store.delta_table):
            conn.execute(sql.SQL("ALTER TABLE {t} DROP COLUMN location, DROP COLUMN embedder")
                         .format(t=sql.Identifier(name)))
    older = open_store(StoreSettings(kind="pgvector", uri=pg_dsn, table=table),
                       default_uri="ignored", s3=S3Settings(), dim=DIM)
    assert isinstance(older, PgVectorStore)
    try:
        hits = [_record(h) for h in older.search(vectors(2, 5)[1], k=3)]
        assert "/out/d/figures/p1-1.png" in {h["image_uri"] for h in hits}
        assert {h["location"] for h in hits} == {None}
        assert older.recorded_embedder() is None
    finally:
        older.close()
