"""folio's reading of the models' answers against the reference code of those models,
not against a reading of it: folio's Chandra markdown against ``chandra.output
.parse_markdown`` on the recorded answers and on snippets of what the models write, its
boxes against ``parse_layout``, and its reading of olmOCR's front matter against
``FrontMatterParser``: the same fields from the answers olmOCR accepts, an attempt
refused (asked again) for the ones it refuses. The requests folio sends are tested in
tests/test_conformance.py; this file was split from it when it passed 500 lines
(issue 46).

Where folio deliberately differs, the difference is named here (``deliberate_*``,
``DELIBERATE``) and allowed only in that form:

- Labels: folio maps Chandra's labels onto its own vocabulary (``map_label``), and drops
  Blank-Page blocks, which Chandra 1's ``parse_layout`` keeps (Chandra 2 drops them too).
- An answer without any top-level layout div (a model that forgot the layout): Chandra
  makes nothing of it, folio converts it whole, as Chandra converts one Text div.
- A box written ``[x0, y0, x1, y1]`` in Chandra 2's answer (the format Chandra 1's prompt
  names): Chandra 2 cannot read it and falls back to [0, 0, 1, 1]; folio reads it.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from PIL import Image

from folio.engines.openai_engine import EngineBadOutputError, OpenAIEngine
from folio.errors import BadOutputError
from folio.gpu.vllm_server import RemoteEndpoint
from folio.models import Block, Label, PagePrep
from folio.parsers._common import map_label
from folio.parsers.olmocr import AnswerError, read_answer
from folio.settings.presets import get_preset
from tests import reference_pipelines as ref
from tests.openai_fake import FakeServer
from tests.test_conformance import _diff

DATA = Path(__file__).parent / "data" / "model_outputs"


# --- Chandra's answers -----------------------------------------------------------------------


def _div(label: str, inner: str, box: str = "50 100 950 400") -> str:
    return f'<div data-bbox="{box}" data-label="{label}">{inner}</div>'


#: what the models write, in Chandra's layout format (boxes in 0-1000 "x0 y0 x1 y1";
#: turned into Chandra 1's 0-1024 JSON lists for it)
SNIPPETS: dict[str, str] = {
    "table": _div("Table", '<table><thead><tr><th>Item</th><th colspan="2">Cost ($)</th></tr>'
                  "</thead><tbody><tr><td>A &amp; B</td><td>1.5</td><td><math>x^2</math></td>"
                  '</tr><tr><td rowspan="2">C<br>D</td><td>2</td><td>3</td></tr><tr><td>4</td>'
                  "<td>5 * 6</td></tr></tbody></table>")
    + _div("Caption", "<p>Table 2: costs_by_item</p>", "50 410 950 440"),
    "math": _div("Text", "<p>The energy <math>E = mc^2</math> is conserved, and "
                 "<math>a_1 * b_2</math> too.</p>")
    + _div("Equation-Block", '<math display="block">\\int_0^1 f(x)\\,dx = F(1) - F(0)</math>',
           "50 410 950 480"),
    "escaping": _div("Text", "<p>5 * 3 = 15, snake_case_name, __init__, costs $5 and 10$; "
                     "2 &lt; 3 &amp; 4 &gt; 1; #hash, [brackets], `tick`, 1. not a list, "
                     "- not a bullet, + plus, &gt; not a quote</p>"),
    "links": _div("Text", '<p>See <a href="https://example.com/a_(b)">the docs (v2) [here]</a>'
                  ' and <a href="mailto:x@y.z">mail_me</a>, or <a>no href</a>.</p>'),
    "lists": _div("List-Group", "<ul><li>one</li><li>two<ol><li>a</li><li>b</li></ol></li>"
                  "<li>three *starred*</li></ul>")
    + _div("List-Group", "<ol><li>first</li><li>second<br>continued</li></ol>", "50 410 950 480")
    + _div("Form", '<p><input type="checkbox" checked> Yes <input type="checkbox"> No</p>',
           "50 490 950 520"),
    "headers-footers": _div("Page-Header", "<p>Annual Report — 2024</p>", "50 10 950 40")
    + _div("Section-Header", "<h1>Overview</h1>", "50 60 950 100")
    + _div("Text", "<p>Body text.</p>", "50 110 950 300")
    + _div("Page-Footer", "<p>Page 3 of 10</p>", "450 960 550 990"),
    "blank": _div("Blank-Page", "", "0 0 1000 1000"),
    "images": _div("Image", '<img alt="A red barn under a blue sky"/>', "50 100 500 400")
    + _div("Figure", "<p>Figure 3: a chart of sales, rising.</p>", "500 100 950 400")
    + _div("Text", '<p>Inline <img alt="logo"/> mark.</p>', "50 410 950 440")
    + _div("Image", '<img alt="Photo"/><p>Caption inside the image block</p>', "50 450 950 700"),
    "formatting": _div("Text", "<p><b>bold</b> <i>italic</i> <u>under</u> <del>gone</del> "
                       "H<sub>2</sub>O x<sup>2</sup> <code>a_b*c</code> <strong>strong</strong>"
                       "</p>")
    + _div("Code-Block", "<pre><code>def f(x_1):\n    return x_1 * 2  # $cost</code></pre>",
           "50 410 950 480"),
    "bare-text": _div("Text", "plain text without any tag, with a_b and *stars*"),
    "outside-divs": "<p>Stray paragraph outside the layout.</p>"
    + _div("Text", "<p>Inside.</p>"),
    "no-divs": "<p>An answer without any layout div, a_b costs $5.</p><ul><li>item</li></ul>",
    "bracket-boxes": _div("Text", "<p>Boxed the Chandra 1 way.</p>", "[100, 200, 300, 400]")
    + _div("Caption", "<p>Spaced box.</p>", "100 410 300 440"),
    "line-breaks": _div("Text", "<p>line one<br>line two<br/>line three</p>"),
    "headings": _div("Section-Header", "<h2>2.1 Methods <i>and</i> data</h2>")
    + _div("Section-Header", "<h3>Sub_section</h3>", "50 410 950 440")
    + _div("Title", "<h1>Document Title</h1>", "50 450 950 500"),
    "entities": _div("Text", "<p>&lt;tag&gt; &quot;quoted&quot; &#39;single&#39; — café "
                     "&nbsp;non-breaking</p>"),
}
_BOX = re.compile(r'data-bbox="(\d+) (\d+) (\d+) (\d+)"')


def for_version(html: str, version: int) -> str:
    """Chandra 1 writes boxes as JSON lists on a 0-1024 scale."""
    if version == 2:
        return html
    return _BOX.sub(lambda m: 'data-bbox="[{}]"'.format(
        ", ".join(str(round(int(v) * 1024 / 1000)) for v in m.groups())), html)


#: (preset, name, answer): the recorded answers and every snippet for both versions
ANSWERS = [("chandra", "recorded", (DATA / "chandra1_page.html").read_text()),
           ("chandra2", "recorded", (DATA / "chandra2_page.html").read_text())] + [
    (preset, name, for_version(html, 1 if preset == "chandra" else 2))
    for name, html in SNIPPETS.items() for preset in ("chandra", "chandra2")]
#: snippets without any top-level layout div
NO_LAYOUT = frozenset({"no-divs"})
_BRACKET_BOX = re.compile(r'data-bbox="\[(\d+), (\d+), (\d+), (\d+)\]"')


def deliberate_read_as(preset: str, name: str, html: str) -> str:
    """The answer as folio reads it, in the form the reference reads the same way (see
    the module doc): a layout-less answer in one Text div; Chandra 2's bracketed boxes
    written as it expects them."""
    if name in NO_LAYOUT:
        return f'<div data-label="Text">{html}</div>'
    if preset == "chandra2":
        return _BRACKET_BOX.sub(r'data-bbox="\1 \2 \3 \4"', html)
    return html


@pytest.mark.parametrize(("preset", "name", "html"), ANSWERS,
                         ids=[f"{p}-{n}" for p, n, _ in ANSWERS])
def test_chandra_markdown(preset: str, name: str, html: str) -> None:
    expected = ref.reference_chandra_markdown(deliberate_read_as(preset, name, html), preset)
    _, got = get_preset(preset).parse(html, width_pt=612, height_pt=792, image_px=(1632, 2112))
    assert got == expected, _diff(expected, got, f"{preset} markdown")


def _lists_joined(blocks: list[Block]) -> list[Block]:
    """DELIBERATE: folio cuts a model's list block into one List-Item an item (and its
    lead-in lines into Text), each with the list block's box (folio.parsers._common
    .split_lists); Chandra keeps the list as one block. The pieces of one block (the same
    box, next to each other, at least one of them an item) are joined back here, so the
    boxes and labels are compared block for block."""
    out: list[Block] = []
    for block in blocks:
        last = out[-1] if out else None
        if (last is not None and block.bbox is not None and block.bbox == last.bbox
                and Label.LIST_ITEM.value in (block.label, last.label)):
            out[-1] = last.model_copy(update={"label": Label.LIST_ITEM.value})
            continue
        out.append(block)
    return out


@pytest.mark.parametrize(("preset", "name", "html"), ANSWERS,
                         ids=[f"{p}-{n}" for p, n, _ in ANSWERS])
def test_chandra_boxes(preset: str, name: str, html: str) -> None:
    """Each block's box in the image's pixels, as ``parse_layout`` computes it (it
    truncates to whole pixels: 1 px apart allowed), and its label (as folio maps it)."""
    size = (1632, 2112)
    width_pt, height_pt = 612.0, 792.0
    if name in NO_LAYOUT:  # DELIBERATE: no layout, no boxes (Chandra: no blocks at all)
        assert ref.reference_chandra_layout(html, size, preset) == []
        blocks, _ = get_preset(preset).parse(html, width_pt=612, height_pt=792, image_px=size)
        assert blocks and all(b.bbox is None for b in blocks)
        return
    expected = [b for b in ref.reference_chandra_layout(
        deliberate_read_as(preset, name, html), size, preset)
        if b.label != "Blank-Page"]  # DELIBERATE: folio keeps no Blank-Page block
    blocks, _ = get_preset(preset).parse(html, width_pt=width_pt, height_pt=height_pt,
                                         image_px=size)
    got = [(b.label, None if b.bbox is None else (
        b.bbox.x0 * size[0] / width_pt, b.bbox.y0 * size[1] / height_pt,
        b.bbox.x1 * size[0] / width_pt, b.bbox.y1 * size[1] / height_pt))
        for b in _lists_joined(blocks)]
    want = [(map_label(b.label), b.bbox) for b in expected]  # DELIBERATE: folio's labels
    assert [label for label, _ in got] == [label for label, _ in want]
    for (_, box), (label, pixels) in zip(got, want):
        assert box is not None, label
        assert all(abs(g - e) <= 1 for g, e in zip(box, pixels)), (label, box, pixels)


# --- olmOCR's front matter -------------------------------------------------------------------


def _front(body: str = "Some text.", **fields: str) -> str:
    values = {"primary_language": "en", "is_rotation_valid": "True", "rotation_correction": "0",
              "is_table": "False", "is_diagram": "False", **fields}
    lines = "".join(f"{k}: {v}\n" for k, v in values.items() if v != "<omit>")
    return f"---\n{lines}---\n{body}"


#: answers olmOCR accepts
VALID_FRONT_MATTER: dict[str, str] = {
    "recorded": (DATA / "olmocr2_page.md").read_text(),
    "plain": _front(),
    "lowercase booleans": _front(is_rotation_valid="true", is_table="true", is_diagram="false"),
    "rotation asked": _front(is_rotation_valid="False", rotation_correction="90"),
    "no language": _front(primary_language="null"),
    "quoted values": _front(primary_language='"de"', rotation_correction="'180'"),
    "norwegian": _front(primary_language="no"),  # YAML 1.1: False, read as None
    "yes/no booleans": _front(is_table="yes", is_diagram="no"),
    "empty body": _front(body=""),
    "body with margins": _front(body="\n\n  Indented first line.\n\nLast line.  \n\n"),
    "body with a rule": _front(body="Above\n---\nBelow"),
    "spaces around values": _front(primary_language="  fr  "),
}
#: answers olmOCR's FrontMatterParser refuses (the attempt is asked again)
MALFORMED_FRONT_MATTER: dict[str, str] = {
    "no front matter": "Just the page text.",
    "missing field": _front(is_diagram="<omit>"),
    "extra field": _front(confidence="0.9"),
    "bad rotation": _front(rotation_correction="45"),
    "text rotation": _front(rotation_correction="ninety"),
    "unterminated": "---\nprimary_language: en\nis_rotation_valid: True\n",
    "leading blank line": "\n" + _front(),
    "number as language": _front(primary_language="12"),
    "number as boolean": _front(is_table="1"),
    "yaml syntax error": _front(primary_language="[en"),
    "list as language": _front(primary_language="[en, de]"),
}


@pytest.mark.parametrize("name", sorted(VALID_FRONT_MATTER))
def test_olmocr_front_matter_read_as_olmocr_reads_it(name: str) -> None:
    text = VALID_FRONT_MATTER[name]
    expected = ref.reference_olmocr_front_matter(text)
    assert expected.fields is not None, expected.error
    got = dataclasses.asdict(read_answer(text))
    assert got == expected.fields, _diff(str(expected.fields.get("natural_text")),
                                         str(got.get("natural_text")), "natural_text")


@pytest.mark.parametrize("name", sorted(MALFORMED_FRONT_MATTER))
def test_olmocr_front_matter_refused_as_olmocr_refuses_it(name: str) -> None:
    text = MALFORMED_FRONT_MATTER[name]
    expected = ref.reference_olmocr_front_matter(text)
    assert expected.fields is None, f"olmOCR accepts {name!r}: {expected.fields}"
    with pytest.raises(AnswerError):
        read_answer(text)


@pytest.fixture(scope="module")
def blank_page(tmp_path_factory: pytest.TempPathFactory) -> PagePrep:
    path = tmp_path_factory.mktemp("fm") / "p.png"
    Image.new("RGB", (996, 1288), "white").save(path)
    return PagePrep(index=0, width_pt=612, height_pt=792, image_path=str(path))


def _recognize_olmocr(text: str, page: PagePrep) -> str | None:
    """None when folio's engine accepts ``text`` as olmOCR 2's answer, else why not."""
    # the fake takes a file name in tests/data/model_outputs, else the text itself
    output = "olmocr2_page.md" if text == VALID_FRONT_MATTER["recorded"] else text
    with FakeServer(output=output) as fake:
        engine = OpenAIEngine(endpoint=RemoteEndpoint(fake.url), model="fake-ocr",
                              preset=get_preset("olmocr2"), backoff_s=0.01)
        try:
            engine.recognize(page, 0)
        except BadOutputError as exc:
            return str(exc)
        finally:
            engine.close()
    return None


#: answers olmOCR accepts and uses as they are: not the ones saying the page is turned
UPRIGHT_ANSWERS = sorted(name for name, text in VALID_FRONT_MATTER.items()
                         if "is_rotation_valid: False" not in text)


@pytest.mark.parametrize("name", UPRIGHT_ANSWERS)
def test_olmocr_answers_olmocr_accepts_are_accepted(name: str, blank_page: PagePrep) -> None:
    assert _recognize_olmocr(VALID_FRONT_MATTER[name], blank_page) is None


def test_olmocr_answer_saying_the_page_is_turned_asks_again(blank_page: PagePrep) -> None:
    """olmOCR's process_page: an answer with is_rotation_valid false is asked again, the
    image turned by its rotation_correction (the turn itself: test_olmocr_turned_image)."""
    text = VALID_FRONT_MATTER["rotation asked"]
    expected = ref.reference_olmocr_front_matter(text).fields
    assert expected is not None and expected["is_rotation_valid"] is False
    with FakeServer(output=text) as fake:
        engine = OpenAIEngine(endpoint=RemoteEndpoint(fake.url), model="fake-ocr",
                              preset=get_preset("olmocr2"), backoff_s=0.01)
        try:
            with pytest.raises(EngineBadOutputError) as caught:
                engine.recognize(blank_page, 0)
        finally:
            engine.close()
    assert caught.value.attempt.rotation_correction == expected["rotation_correction"]


@pytest.mark.parametrize("name", sorted(MALFORMED_FRONT_MATTER))
def test_olmocr_answers_olmocr_refuses_are_refused(name: str, blank_page: PagePrep) -> None:
    text = MALFORMED_FRONT_MATTER[name]
    expected = ref.reference_olmocr_front_matter(text)
    assert expected.fields is None, f"olmOCR accepts {name!r}: {expected.fields}"
    assert _recognize_olmocr(text, blank_page) is not None, \
        f"folio accepts what olmOCR refuses ({expected.error})"
