"""The OpenAI chat-completions wire format as folio's engine speaks it: a page's image as
a data URL, the request body encoded with its images spliced in, replies read from JSON
or server-sent events, and the fixed token counts of ``ignore_eos`` benchmarks. Pure,
apart from reading the image file; the engine (:mod:`folio.engines.openai_engine`) does
the sending, retrying and judging.
"""

from __future__ import annotations

import base64
import io
import json
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["IMAGE_SLOT", "JSON_HEADERS", "Reply", "Retryable", "encode_body", "encode_image",
           "fixed_length", "read_json", "read_stream"]


class Retryable(Exception):
    """A failure worth retrying: transport error, 5xx/429, a stream cut short."""

    def __init__(self, message: str, *, connection: bool = False, timeout: bool = False) -> None:
        super().__init__(message)
        self.connection = connection  # the server may be gone (restart?)
        self.timeout = timeout


@dataclass
class Reply:
    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


JSON_HEADERS = {"Content-Type": "application/json"}


def encode_body(body: dict[str, Any]) -> bytes:
    """A request body as httpx's ``json=`` would send it (compact, no NaN), its base64
    images spliced in as bytes rather than run through the JSON encoder.

    Why: a page's image is a data URL of about 0.3 MB (more for scans), and ``json.dumps``
    scans every character of it for escapes, holding the GIL: encoding the request bodies
    was a tenth of the flow process's GIL samples on the H200 at 7 pages/s. Base64 needs
    no escaping, so the bytes are the same, at a thirteenth of the time
    (bench/results/request_body.json: 0.93 against 0.07 ms a body on 100 corpus pages);
    other URLs (and anything unexpected) go through the encoder."""
    images: list[str] = []
    original = body

    def swap(part: Any) -> Any:
        image = part.get("image_url") if isinstance(part, dict) else None
        if not isinstance(image, dict):
            return part
        url = image.get("url")
        if (isinstance(url, str) and url.startswith("data:") and ";base64," in url[:64]
                and url.isascii() and '"' not in url and "\\" not in url):
            images.append(url)
            return {**part, "image_url": {**image, "url": IMAGE_SLOT}}
        return part

    messages = body.get("messages")
    if isinstance(messages, list):
        body = {**body, "messages": [
            {**m, "content": [swap(c) for c in m["content"]]}
            if isinstance(m, dict) and isinstance(m.get("content"), list) else m
            for m in messages]}
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    if not images:
        return text
    pieces = text.split(IMAGE_SLOT.encode())
    if len(pieces) != len(images) + 1:  # the slot's text elsewhere in the body: no splice
        return json.dumps(original, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False).encode()
    out = [pieces[0]]
    for url, piece in zip(images, pieces[1:], strict=True):
        out += [url.encode("ascii"), piece]
    return b"".join(out)


#: where :func:`encode_body` puts a page's image while the rest of the body is JSON-encoded
IMAGE_SLOT = "folio-image-slot-7f3c9e1d5b2a4c60"


def read_json(payload: dict[str, Any]) -> Reply:
    if "error" in payload and "choices" not in payload:
        raise ValueError(f"error payload: {payload['error']}")
    choice = payload["choices"][0]
    usage = payload.get("usage") or {}
    return Reply(
        text=(choice.get("message") or {}).get("content") or "",
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
    )


def read_stream(lines: Iterator[str]) -> Reply:
    """Server-sent events until ``data: [DONE]``; a stream that ends before it, or an
    error event, is a retryable failure (the answer may be incomplete)."""
    parts: list[str] = []
    finish: str | None = None
    usage: dict[str, Any] = {}
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return Reply("".join(parts), finish, usage.get("prompt_tokens"), usage.get("completion_tokens"))
        event = json.loads(data)
        if "error" in event:
            raise Retryable(f"stream error: {event['error']}")
        for choice in event.get("choices") or []:
            parts.append((choice.get("delta") or {}).get("content") or "")
            finish = choice.get("finish_reason") or finish
        usage = event.get("usage") or usage
    raise Retryable("stream ended before [DONE]", connection=True)


def fixed_length(data_url: str, lengths: Sequence[int], default: int) -> int:
    """A page's token count in an ``ignore_eos`` benchmark: one of ``lengths`` chosen by a
    hash of its image, so the pipeline, the raw engine and the offline engine give a page
    the same count (``default`` without lengths)."""
    if not lengths:
        return default
    return int(lengths[zlib.crc32(data_url.encode("ascii", "replace")) % len(lengths)])


def encode_image(path: Path, max_pixels: int, *, turn: int = 0) -> tuple[str, tuple[int, int]]:
    """(data URL, (width, height)). PNG and JPEG go as they are; other formats, images
    over ``max_pixels`` (5% slack) and images to turn (``turn`` degrees counter-clockwise,
    PIL's transpose, as olmOCR turns a page) are re-encoded as PNG, downscaled to fit."""
    from PIL import Image

    raw = path.read_bytes()
    with Image.open(io.BytesIO(raw)) as image:
        size = image.size
        fmt = (image.format or "").upper()
        too_big = size[0] * size[1] > max_pixels * 1.05
        turn %= 360
        if fmt in ("PNG", "JPEG") and not too_big and not turn:
            mime = "png" if fmt == "PNG" else "jpeg"
            return f"data:image/{mime};base64,{base64.b64encode(raw).decode()}", size
        rgb = image.convert("RGB")
        if turn:
            rgb = rgb.transpose(_turns()[turn])
            size = rgb.size
        if too_big:
            scale = (max_pixels / (size[0] * size[1])) ** 0.5
            size = (max(1, int(size[0] * scale)), max(1, int(size[1] * scale)))
            rgb = rgb.resize(size, Image.Resampling.LANCZOS)
        buffer = io.BytesIO()
        rgb.save(buffer, format="PNG")
    return f"data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}", size


def _turns() -> dict[int, Any]:
    """PIL's transposes by angle (PIL is imported where an image is handled, not with
    this module)."""
    from PIL import Image

    return {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180,
            270: Image.Transpose.ROTATE_270}
