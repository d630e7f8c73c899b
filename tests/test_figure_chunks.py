"""Figure chunks carry what makes them findable (issue 55): caption, alt text, the words
inside, the sentences that refer to the figure; a figure with nothing but a generic
caption is embedded with the text around it and no longer outranks the text that answers
a query (the real embedder, a real LanceDB table)."""

from __future__ import annotations

from pathlib import Path

from folio.figures.text import figure_number, referring_sentences, says_nothing
from folio.models import BBox, Block, DocumentResult, PageOutcome, PageResult
from folio.output.chunking import chunk_document, embedding_text
from folio.output.embeddings import Embedder
from folio.settings.config import ChunkSettings, EmbeddingSettings, S3Settings, StoreSettings
from folio.stores import open_store

GENERIC = "Figure 1: This is an example image."
BREAD = ("Bread dough is left to rise for two hours before it is shaped and baked at 230 "
         "degrees. The crust is brushed with water for a shine.")
RAIN = ("Monthly rainfall in Lisbon peaks in November, at about 120 millimetres, and the "
        "summer months are almost dry.")
#: queries near the generic caption's words that the rainfall text answers
QUERIES = ("an example image of rainfall", "example of rainfall figures", "rainfall example")


def _page(index: int, blocks: list[Block]) -> PageResult:
    return PageResult(index=index, width_pt=612, height_pt=792, outcome=PageOutcome.OK,
                      blocks=blocks)


def _picture(caption: str, order: int, **extra: str) -> Block:
    return Block(label="Picture", bbox=BBox(x0=100, y0=300, x1=500, y1=500), content="",
                 order=order, image="figures/p0001-1.png", caption=caption, **extra)


def _doc(pages: list[PageResult]) -> DocumentResult:
    return DocumentResult(source="/in/a.pdf", doc_id="d", sha256="s", config_hash="c",
                          page_count=len(pages), pages=pages, folder_uri="/out/a-d")


def test_the_sentence_that_refers_to_a_figure_joins_its_chunk() -> None:
    said = "As Figure 2 shows, latency doubled under load."
    doc = _doc([_page(0, [Block(label="Text", content=f"We measured it. {said}", order=0),
                          _picture("Figure 2: Latency.", 1)]),
                _page(1, [Block(label="Text", content="Fig. 2 also shows the tail. "
                                "Figure 12 is another.", order=0)])])
    (figure,) = [c for c in chunk_document(doc, ChunkSettings()) if c.kind == "figure"]
    assert figure.text == f"Figure 2: Latency.\n\n{said}\n\nFig. 2 also shows the tail."
    assert figure.image_uri == "/out/a-d/figures/p0001-1.png"


def test_what_counts_as_a_generic_caption() -> None:
    assert figure_number("Fig. 3b: Results") == "3b" and figure_number("Results") is None
    assert says_nothing(_picture(GENERIC, 0), [])
    assert not says_nothing(_picture("Figure 1: Rainfall by month", 0), [])
    assert not says_nothing(_picture(GENERIC, 0, alt="A bar chart of rain"), [])
    assert not says_nothing(_picture(GENERIC, 0), ["Figure 1 shows the rain."])
    assert referring_sentences("1", ["See figures 10 and 11. Figure 1 is here."]) == [
        "Figure 1 is here."]


def test_a_generic_figure_no_longer_outranks_the_text_that_answers(tmp_path: Path) -> None:
    doc = _doc([
        _page(0, [Block(label="Text", content=BREAD, order=0), _picture(GENERIC, 1),
                  Block(label="Text", content="Loaves keep for three days in a cloth.",
                        order=2)]),
        _page(1, [Block(label="Section-Header", content="Climate", order=0),
                  Block(label="Text", content=RAIN, order=1)]),
    ])
    chunks = chunk_document(doc, ChunkSettings())
    (figure,) = [c for c in chunks if c.kind == "figure"]
    assert figure.text.startswith(GENERIC) and "rise for two hours" in figure.text
    assert figure.image_uri == "/out/a-d/figures/p0001-1.png"  # it keeps its chunk
    embedder = Embedder(EmbeddingSettings())
    store = open_store(StoreSettings(), default_uri=str(tmp_path / "vectors"), s3=S3Settings(),
                       dim=embedder.dim)
    store.replace_document("d", chunks, embedder.embed([embedding_text(c) for c in chunks]))
    caption_alone = embedder.embed([GENERIC])[0]
    rain = next(c for c in chunks if "Lisbon" in c.text)
    for query, vector in zip(QUERIES, embedder.embed(list(QUERIES)), strict=True):
        # the failure this guards against: the caption alone is nearer than the answer
        rain_vector = embedder.embed([embedding_text(rain)])[0]
        assert float(vector @ caption_alone) > float(vector @ rain_vector), query
        hits = store.search(vector, k=len(chunks))
        assert hits[0]["id"] == rain.id, query
