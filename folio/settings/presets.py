"""Model presets: what each OCR model is asked, at what image size, and how it answers.

A preset ties a prompt (the one the model was trained with: rewording it changes the
output distribution), the image budget the model expects, and the parser for its output
format. ``ocr.preset`` picks one; ``generic`` suits any markdown-speaking VLM.

Example:
    >>> p = get_preset("olmocr2")
    >>> p.longest_side_px, p.parser
    (1288, 'olmocr')
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from folio.errors import ConfigError
from folio.models import Block
from folio.parsers import chandra, markdown, olmocr
from folio.settings.config import RenderSettings

ParserName = Literal["chandra", "olmocr", "markdown"]


class Parser(Protocol):
    def __call__(
        self, text: str, *, width_pt: float, height_pt: float, image_px: tuple[int, int] | None = None
    ) -> tuple[list[Block], str]: ...


# Chandra's prompts, as chandra-ocr builds them (chandra/prompts.py): 0.1.8 for Chandra 1,
# 0.2.0 for Chandra 2. The tag and attribute lists are Python list reprs inside the text,
# quotes and all: a model answers best to the prompt it was trained on, character for
# character (tests/test_conformance.py compares them byte for byte with the packages).
_CHANDRA1_TAGS = [
    "math", "br", "i", "b", "u", "del", "sup", "sub", "table", "tr", "td", "p", "th", "div",
    "pre", "h1", "h2", "h3", "h4", "h5", "ul", "ol", "li", "input", "a", "span", "img", "hr",
    "tbody", "small", "caption", "strong", "thead", "big", "code",
]
_CHANDRA2_TAGS = [*_CHANDRA1_TAGS, "chem"]
_CHANDRA1_ATTRS = [
    "class", "colspan", "rowspan", "display", "checked", "type", "border", "value", "style",
    "href", "alt", "align",
]
_CHANDRA2_ATTRS = [*_CHANDRA1_ATTRS, "data-bbox", "data-label"]
_CHANDRA1_LABELS = [
    "Caption", "Footnote", "Equation-Block", "List-Group", "Page-Header", "Page-Footer",
    "Image", "Section-Header", "Table", "Text", "Complex-Block", "Code-Block", "Form",
    "Table-Of-Contents", "Figure",
]
_CHANDRA2_LABELS = [*_CHANDRA1_LABELS, "Chemical-Block", "Diagram", "Bibliography", "Blank-Page"]
_CHANDRA_IMAGES_1 = (
    "* Images: Include a description of any images in the alt attribute of an <img> tag. "
    "Do not fill out the src property."
)
_CHANDRA_IMAGES_2 = (
    _CHANDRA_IMAGES_1 + " Describe in detail inside the div tag. Also convert charts to high "
    "fidelity data, and convert diagrams to mermaid."
)


def _chandra_prompt(version: int) -> str:
    v2 = version == 2
    tags, attrs = (_CHANDRA2_TAGS, _CHANDRA2_ATTRS) if v2 else (_CHANDRA1_TAGS, _CHANDRA1_ATTRS)
    labels = "\n".join(f"- {label}" for label in (_CHANDRA2_LABELS if v2 else _CHANDRA1_LABELS))
    box = "x0 y0 x1 y1 format.  Bboxes are normalized 0-1000" if v2 else (
        "[x0, y0, x1, y1] format.  Bboxes are normalized 0-1024")
    guidelines = [
        "* Inline math: Surround math with <math>...</math> tags. Math expressions should be "
        "rendered in KaTeX-compatible LaTeX. Use display for block math.",
        "* Tables: Use colspan and rowspan attributes to match table structure.",
        "* Formatting: Maintain consistent formatting with the image, including spacing, "
        "indentation, subscripts/superscripts, and special characters.",
        _CHANDRA_IMAGES_2 if v2 else _CHANDRA_IMAGES_1,
        "* Forms: Mark checkboxes and radio buttons properly.",
        "* Text: join lines together properly into paragraphs using <p>...</p> tags.  Use <br> "
        "tags for line breaks within paragraphs, but only when absolutely necessary to "
        "maintain meaning.",
    ]
    if v2:
        guidelines += [
            "* Chemistry: Use <chem>...</chem> tags for chemical formulas with reactive SMILES.",
            "* Lists: Preserve indents and proper list markers.",
        ]
    guidelines += [
        "* Use the simplest possible HTML structure that accurately represents the content of "
        "the block.",
        "* Make sure the text is accurate and easy for a human to read and interpret.  Reading "
        "order should be correct and natural.",
    ]
    ending = (f"Only use these tags {tags}, and these attributes {attrs}.\n\nGuidelines:\n"
              + "\n".join(guidelines))
    return (
        "OCR this image to HTML, arranged as layout blocks.  Each layout block should be a div "
        f"with the data-bbox attribute representing the bounding box of the block in {box}. "
        "The data-label attribute is the label for the block.\n\nUse the following labels:\n"
        f"{labels}\n\n{ending}"
    )


#: olmocr/prompts/prompts.py build_no_anchoring_v4_yaml_prompt (0.4.27), what olmOCR 2 was
#: trained with
OLMOCR2_PROMPT = (
    "Attached is one page of a document that you must process. Just return the plain text "
    "representation of this document as if you were reading it naturally. Convert equations "
    "to LateX and tables to HTML.\n"
    "If there are any figures or charts, label them with the following markdown syntax "
    "![Alt text describing the contents of the figure](page_startx_starty_width_height.png)\n"
    "Return your output as markdown, with a front matter section on top specifying values for "
    "the primary_language, is_rotation_valid, rotation_correction, is_table, and is_diagram "
    "parameters."
)
GENERIC_PROMPT = (
    "Convert this document page to markdown. Keep the reading order, headings as #, lists "
    "as -, tables as markdown pipe tables, equations as LaTeX between $$. Do not describe "
    "the page; output only its content."
)


class Sampling(BaseModel):
    """How one attempt samples: the reference pipeline's temperature (and top_p) for it."""

    temperature: float
    top_p: float | None = None


#: olmOCR's ladder (olmocr/pipeline.py TEMPERATURE_BY_ATTEMPT, --max_page_retries 8)
_OLMOCR_SAMPLING = [Sampling(temperature=t) for t in (0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0)]
#: Chandra 2 (chandra/model/vllm.py, 0.2.0): greedy with top_p 0.1, then up to
#: MAX_VLLM_RETRIES (6) retries at min(0.2 * (retry + 1), 0.8) with top_p 0.95
_CHANDRA2_SAMPLING = [Sampling(temperature=0.0, top_p=0.1)] + [
    Sampling(temperature=min(round(0.2 * (r + 1), 1), 0.8), top_p=0.95) for r in range(6)]
#: Chandra 1 (0.1.8): the same first attempt, then six retries at 0.3 / 0.95
_CHANDRA1_SAMPLING = [Sampling(temperature=0.0, top_p=0.1)] + [
    Sampling(temperature=0.3, top_p=0.95) for _ in range(6)]
#: models without a reference pipeline: greedy first, then a rising temperature
_GENERIC_SAMPLING = [Sampling(temperature=t) for t in (0.0, 0.2, 0.5)]

ImageSizing = Literal["adaptive", "olmocr", "chandra1", "chandra2"]


class ModelPreset(BaseModel):
    """One model family: prompt, image size, output budget, sampling, output parser.

    For models with a reference pipeline (olmOCR 2, Chandra 1 and 2) every field is what
    that pipeline does, read from its code (tests/test_conformance.py checks them against
    the installed packages); ``generic`` and the Qwen presets have no reference.
    """

    name: str
    description: str = ""
    prompt: str
    parser: ParserName
    bbox_scale: int | None = Field(None, description="coordinate range of the model's boxes")
    longest_side_px: int = Field(description="render the page's longest side to this")
    max_pixels: int = Field(description="cap on width*height the model should see")
    min_pixels: int = Field(256 * 256, description="images below this are upscaled by the server")
    image_first: bool = Field(True, description="image part before the text part")
    image_sizing: ImageSizing = Field(
        "adaptive", description="adaptive: folio's render plan within the pixel budget; "
        "olmocr / chandra1 / chandra2: exactly the size the reference pipeline sends "
        "(folio.pdf.model_image)")
    max_tokens: int = Field(4096, description="output tokens asked for (the reference's)")
    sampling: list[Sampling] = Field(
        default_factory=lambda: list(_GENERIC_SAMPLING),
        description="one entry per attempt on a page, in order; the attempts a page gets")
    keep_cut_answers: bool = Field(
        False, description="an answer cut at max_tokens is kept (Chandra keeps it; olmOCR "
        "asks again)")
    max_context: int | None = Field(
        None, description="an answer whose prompt + output tokens exceed this is asked again "
        "(olmOCR's MODEL_MAX_CONTEXT)")
    rotation_feedback: bool = Field(
        False, description="the answer says whether the page is upright and how to turn it; "
        "the image is turned and the page asked again (olmOCR)")
    pixel_kwargs: Literal["size", "min_max_pixels"] = Field(
        "size",
        description="how vLLM's --mm-processor-kwargs spells the pixel cap: Qwen3-VL's "
        "processor reads size.longest_edge (a pixel count), older Qwen2.5-VL min/max_pixels",
    )
    default_model: str = Field("", description="Hugging Face id, for docs and preflight")

    @property
    def prompt_format(self) -> str:
        return f"{self.name}:{self.parser}"

    @property
    def attempts(self) -> int:
        return len(self.sampling)

    def sampling_for(self, attempt: int) -> Sampling:
        """The sampling of ``attempt`` (0-based); past the list, its last entry."""
        return self.sampling[min(max(attempt, 0), len(self.sampling) - 1)]

    def parser_fn(self) -> Parser:
        if self.parser == "chandra":
            fn: Parser = partial(chandra.parse, bbox_scale=self.bbox_scale or 1024)
            return fn
        return olmocr.parse if self.parser == "olmocr" else markdown.parse

    def parse(
        self, text: str, *, width_pt: float, height_pt: float, image_px: tuple[int, int] | None = None
    ) -> tuple[list[Block], str]:
        return self.parser_fn()(text, width_pt=width_pt, height_pt=height_pt, image_px=image_px)

    def render_settings(self, base: RenderSettings | None = None) -> RenderSettings:
        """``base`` with this model's image size: its pixel budget, and for a model with a
        reference pipeline that pipeline's sizing rule (renders the model would downscale
        anyway cost page-worker time and request bytes for nothing)."""
        base = base or RenderSettings()
        return base.model_copy(
            update={
                "longest_side_px": self.longest_side_px,
                "max_pixels": min(base.max_pixels, self.max_pixels),
                "model_sizing": self.image_sizing,
            }
        )

    def mm_processor_kwargs(self, max_pixels: int | None = None) -> dict[str, Any]:
        """The server-side pixel cap in the spelling this model's processor reads."""
        cap = max_pixels or self.max_pixels
        if self.pixel_kwargs == "size":
            return {"size": {"longest_edge": cap, "shortest_edge": self.min_pixels}}
        return {"max_pixels": cap, "min_pixels": self.min_pixels}


PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in [
        ModelPreset(
            name="chandra",
            description="Chandra 1 (Qwen3-VL based): HTML layout blocks, boxes 0-1024; "
            "driven as chandra-ocr 0.1.8 does",
            prompt=_chandra_prompt(1), parser="chandra", bbox_scale=1024,
            # >= 192 DPI, shortest side >= 1024 px, area capped at 3072x2048
            longest_side_px=3072, max_pixels=3072 * 2048, min_pixels=1024 * 1024 // 4,
            image_sizing="chandra1", max_tokens=8192, sampling=_CHANDRA1_SAMPLING,
            keep_cut_answers=True, default_model="datalab-to/chandra",
        ),
        ModelPreset(
            name="chandra2",
            description="Chandra 2: HTML layout blocks, boxes 0-1000, more labels; driven as "
            "chandra-ocr 0.2.0 does",
            prompt=_chandra_prompt(2), parser="chandra", bbox_scale=1000,
            longest_side_px=3072, max_pixels=3072 * 2048, min_pixels=1024 * 1024 // 4,
            image_sizing="chandra2", max_tokens=12384, sampling=_CHANDRA2_SAMPLING,
            keep_cut_answers=True, default_model="datalab-to/chandra-ocr-2",
        ),
        ModelPreset(
            name="olmocr2",
            description="olmOCR 2 (Qwen2.5-VL-7B fine-tune): YAML front matter + markdown; "
            "driven as olmocr 0.4.27's pipeline does",
            prompt=OLMOCR2_PROMPT, parser="olmocr",
            longest_side_px=1288, max_pixels=1288 * 1288, image_first=False,
            image_sizing="olmocr", max_tokens=8000, sampling=_OLMOCR_SAMPLING,
            max_context=16384, rotation_feedback=True,
            pixel_kwargs="min_max_pixels", default_model="allenai/olmOCR-2-7B-1025-FP8",
        ),
        ModelPreset(
            name="generic",
            description="any markdown VLM (Qwen2.5-VL, Qwen3-VL, HunyuanOCR)",
            prompt=GENERIC_PROMPT, parser="markdown",
            longest_side_px=1600, max_pixels=1600 * 1280, default_model="Qwen/Qwen3-VL-8B-Instruct",
        ),
        ModelPreset(
            name="qwen2.5-vl",
            description="Qwen2.5-VL instruct models, markdown",
            prompt=GENERIC_PROMPT, parser="markdown",
            longest_side_px=1600, max_pixels=1600 * 1280, pixel_kwargs="min_max_pixels",
            default_model="Qwen/Qwen2.5-VL-7B-Instruct",
        ),
        ModelPreset(
            name="qwen3-vl",
            description="Qwen3-VL instruct models, markdown",
            prompt=GENERIC_PROMPT, parser="markdown",
            longest_side_px=1600, max_pixels=1600 * 1280, default_model="Qwen/Qwen3-VL-8B-Instruct",
        ),
        ModelPreset(
            name="hunyuan-ocr",
            description="HunyuanOCR: markdown (tables as HTML)",
            prompt="Extract all information from the main body of the document image and "
            "represent it in markdown format, ignoring headers and footers. Tables should be "
            "expressed in HTML format, formulas in the document should be represented using "
            "LaTeX format, and the parsing should be organized according to the reading order.",
            parser="markdown", longest_side_px=1600, max_pixels=1600 * 1600,
            pixel_kwargs="min_max_pixels", default_model="tencent/HunyuanOCR",
        ),
    ]
}


def get_preset(name: str) -> ModelPreset:
    """The preset called ``name`` (case-insensitive); ConfigError lists the known ones."""
    preset = PRESETS.get(name.strip().lower())
    if preset is None:
        raise ConfigError(f"unknown model preset {name!r}; known: {', '.join(sorted(PRESETS))}")
    return preset
