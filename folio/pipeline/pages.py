"""Stage 2 for one page: route it, then the engine ladder (attempts, fallbacks, quarantine)."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from pathlib import Path

from folio.engines.base import GENERATIVE_ENGINES, EngineOutput, OcrEngine
from folio.engines.markdown import BLOCK_MARKDOWN_ENGINES, blocks_to_markdown
from folio.engines.text_layer import TextLayerEngine
from folio.errors import BadOutputError, FolioError, TransientError, is_transient_code
from folio.figures.regions import find_pictures
from folio.models import Attempt, PageOutcome, PagePrep, PageResult
from folio.page.answer_gate import answer_work
from folio.page.caption_order import captions_beside
from folio.page.layer_or_ocr import layer_holds_text, layer_is_better
from folio.page.layout_labels import label_blocks
from folio.page.private_use import scrub_page
from folio.page.quality import mean_confidence, repeat_ratio
from folio.page.route import route_page
from folio.page.running_heads import keep_content_lines, keep_page_text
from folio.pipeline.geometry import fit_blocks
from folio.pipeline.outcome import page_failed
from folio.pipeline.services import Services
from folio.settings.config import ValidationSettings

log = logging.getLogger(__name__)

#: attempts a page gets on an engine without a sampling ladder of its own (a CPU engine
#: is deterministic: later attempts run only after a transient failure)
DEFAULT_ATTEMPTS = 3


def discard_image(page: PagePrep) -> None:
    """Delete a page's rendered image once nothing needs it (they can be large)."""
    if page.image_path:
        Path(page.image_path).unlink(missing_ok=True)


def process_page(page: PagePrep, services: Services) -> PageResult:
    """Route one page and run the engine ladder: attempts, then fallbacks, then quarantine."""
    try:
        return _process_page(page, services)
    except Exception as err:  # one page's bug must not sink the document
        log.exception("page %s failed", page.index)
        return page_failed(page, f"internal: {type(err).__name__}: {err}", retryable=True)
    finally:
        discard_image(page)


def _process_page(page: PagePrep, services: Services) -> PageResult:
    config = services.config
    result = PageResult(
        index=page.index, width_pt=page.width_pt, height_pt=page.height_pt, plan=page.plan,
        blank=page.blank,
    )
    if page.error:  # from the page worker, as text: classified once, here
        result.reason, result.retryable = page.error, is_transient_code(page.error)
        return result
    route = route_page(page, config.route)
    result.route, result.route_reason = route.kind, route.reason
    if route.kind == "none":
        result.outcome, result.reason = PageOutcome.OK, "blank page"
        return result
    primary = "text-layer" if route.kind == "text-layer" else config.ocr.engine
    # a vision model gets the attempts of its preset's ladder (olmOCR asks up to 8 times)
    attempts = config.ocr.max_attempts
    if attempts is None:
        attempts = int(getattr(services.engine(primary), "attempts", DEFAULT_ATTEMPTS))
    ladder: list[tuple[str, int, PageOutcome]] = [
        (primary, n, PageOutcome.OK if n == 0 else PageOutcome.RECOVERED)
        for n in range(attempts)
    ]
    ladder += [(name, 0, PageOutcome.FALLBACK) for name in config.ocr.fallback if name != primary]
    errors: list[str] = []
    last_transient = False
    turn = 0  # the model's rotation corrections so far (olmOCR adds them up)
    usable: EngineOutput | None = None  # the last attempt's answer, if it is one to keep
    for name, attempt, outcome in ladder:
        if name != primary and usable is not None:
            # every attempt said the page is turned, the last one readably: olmOCR keeps it
            return _accept(result, usable, primary, PageOutcome.RECOVERED, errors)
        engine = services.engine(name)
        if attempt > 0 and getattr(engine, "deterministic", False) and not last_transient:
            continue  # the same input gives the same bad output: go to the fallbacks
        generative = name in GENERATIVE_ENGINES
        try:
            asked = page.model_copy(update={"turn": turn}) if turn and name == primary else page
            output = _recognize(engine, asked, attempt)
            with answer_work() if generative else nullcontext():
                output.blocks, output.geometry = fit_blocks(output.blocks, page.width_pt,
                                                            page.height_pt)
                apply_layout(output, name, page, config.layout.min_cover)
                find_pictures(output, name, page, config.layout.min_cover, config.figures)
                problem = page_problem(output, page, config.validation, generative=generative)
                # a CPU engine's reading may lose to the layer; a vision model's answer is
                # kept, as its reference pipeline keeps it (tables score low as text; a
                # valid answer with no text is a blank page, as olmOCR reads it, and the
                # layer under such a page is often show-through or a hidden old OCR)
                kept = (_keep_layer(output, page, services)
                        if route.kind == "ocr" and name == primary and not problem
                        and not generative else None)
            if problem:
                output.attempt.error = problem
                result.attempts.append(output.attempt)
                raise BadOutputError(problem)
        except FolioError as err:
            attempt_record = getattr(err, "attempt", None)
            if isinstance(attempt_record, Attempt):
                result.attempts.append(attempt_record)
                if attempt_record.rotation_correction:
                    turn = (turn + attempt_record.rotation_correction) % 360
            elif not (result.attempts and result.attempts[-1].error == str(err)):
                result.attempts.append(Attempt(engine=name, error=err.reason))
            usable = getattr(err, "usable", None) if name == primary else None
            errors.append(err.reason)
            last_transient = isinstance(err, TransientError)
            continue
        if kept is not None:  # the text layer beat the OCR (checked above, in the gate)
            result.attempts.append(output.attempt)
            output, name = kept, "text-layer"
        result.attempts.append(output.attempt)
        return _accept(result, output, name, outcome, errors)
    if usable is not None:
        return _accept(result, usable, primary, PageOutcome.RECOVERED, errors)
    if (last := _layer_last_resort(page, services)) is not None:
        # never worse than the layer: its text, whatever it scored, beats a quarantined
        # page; a transient failure still marks the page (and its document) for a retry
        result.attempts.append(last.attempt)
        accepted = _accept(result, last, "text-layer", PageOutcome.FALLBACK, errors)
        layer = page.text_layer
        assert layer is not None
        failed = [e for e in dict.fromkeys(errors) if "no usable text layer" not in e]
        accepted.reason = (f"text layer kept (score {layer.score:.2f}) after: "
                           + "; ".join(failed))
        accepted.retryable = last_transient
        return accepted
    result.outcome = PageOutcome.QUARANTINED
    result.reason = "; ".join(dict.fromkeys(errors)) or "no engine could read the page"
    result.retryable = last_transient
    return result


def _accept(result: PageResult, output: EngineOutput, engine: str, outcome: PageOutcome,
            errors: list[str]) -> PageResult:
    result.engine, result.model = engine, output.attempt.model
    result.prompt_format = output.prompt_format
    # the one point every engine's text passes: no private-use glyph goes further
    result.blocks, result.markdown = output.blocks, scrub_page(output.blocks, output.markdown)
    result.notes = [output.geometry] if output.geometry else []
    result.outcome = outcome
    result.reason = "" if outcome is PageOutcome.OK else f"after: {errors[-1]}"
    if output.no_text and not output.markdown.strip():
        result.blank = True  # the engine read the page and found no text on it
        result.reason = result.reason or f"no text on the page: {engine} found none"
    return result


def _keep_layer(output: EngineOutput, page: PagePrep, services: Services
                ) -> EngineOutput | None:
    """The text layer's output when it beats the OCR ``output`` (:mod:`folio.page.layer_or_ocr`),
    the OCR attempt marked with why; None when the OCR stands. Both attempts are kept."""
    why = layer_is_better(output.markdown, page.text_layer, width_pt=page.width_pt,
                          height_pt=page.height_pt)
    if why is None:
        return None
    layer = _layer_output(page, services)
    if layer is None:
        return None
    output.attempt.error = why
    return layer


def _layer_output(page: PagePrep, services: Services) -> EngineOutput | None:
    """The page's text layer as an engine's output at any score (the layer_or_ocr rules
    decided it is wanted), boxes clipped and layout applied; None without one."""
    try:
        layer = _recognize(TextLayerEngine(min_score=0.0), page, 0)
    except FolioError:
        return None
    layer.blocks, layer.geometry = fit_blocks(layer.blocks, page.width_pt, page.height_pt)
    apply_layout(layer, "text-layer", page, services.config.layout.min_cover)
    find_pictures(layer, "text-layer", page, services.config.layout.min_cover,
                  services.config.figures)
    return layer


def _layer_last_resort(page: PagePrep, services: Services) -> EngineOutput | None:
    """The layer's output for a page every engine failed on, when the layer holds text."""
    if not layer_holds_text(page.text_layer):
        return None
    return _layer_output(page, services)


def _recognize(engine: OcrEngine, page: PagePrep, attempt: int) -> EngineOutput:
    try:
        return engine.recognize(page, attempt)
    except FolioError:
        raise
    except Exception as err:  # an engine bug reads as bad output for this page
        raise BadOutputError(f"{engine.name} failed: {type(err).__name__}: {err}") from err


def apply_layout(output: EngineOutput, engine: str, page: PagePrep, min_cover: float) -> None:
    """Relabel a CPU engine's blocks from the page's layout regions (found in the page
    worker), tables given their grids from the engine's word boxes, captions moved next
    to their table or figure (:mod:`folio.page.caption_order`), and rebuild its markdown;
    other engines' blocks and pages without regions are left as they are, and so are
    pages the engine found turned on their side: the model saw the render as it lies,
    where a sideways page of text reads as one big figure."""
    if page.layout is None or engine not in BLOCK_MARKDOWN_ENGINES or output.attempt.rotated:
        return
    blocks, changed = label_blocks(output.blocks, page.layout, min_cover, output.words,
                                   output.rulings, page.height_pt)
    blocks, moved = captions_beside(blocks)
    restored = keep_page_text(blocks)  # a page's only text is no running head
    # nor is a sentence of its prose that the layout model placed in the head band
    restored = keep_content_lines(blocks, page.height_pt) or restored
    if changed or moved or restored:
        output.blocks = blocks
        output.markdown = blocks_to_markdown(blocks)


def page_problem(
    output: EngineOutput, page: PagePrep, checks: ValidationSettings, *, generative: bool
) -> str | None:
    """The per-page checks the validation suite makes, applied while the page image still
    exists, so a failure can be retried or fall back instead of being quarantined."""
    text = output.markdown.strip()
    if not text and not page.blank and not output.no_text:
        return "empty: no text on a non-blank page"
    ratio = repeat_ratio(text) if generative else 0.0
    if ratio > checks.max_repeat_ratio:
        return f"repetition: {ratio:.0%} of the text is one repeated n-gram"
    confidence = mean_confidence(output.blocks)
    if confidence is not None and confidence < checks.min_ocr_confidence:
        return (f"unreadable: mean word confidence {confidence:.0%} (handwriting, a blurred "
                "or damaged scan, or a script the engine's languages do not cover)")
    return None
