"""The raw engine: pages sent straight to a vLLM server (or several) with the async OpenAI
client, as folio's engine sends them but with none of the pipeline around them
(:func:`send_raw`), what the pipeline's configuration makes of each request
(:func:`raw_request`), and what a few answers look like to folio's checks
(:func:`answer_sample`).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from folio.gpu.vllm_server import Endpoint


async def send_raw(endpoint: Endpoint, model: str, images: list[Path], *, prompt: str,
                   image_first: bool, max_tokens: int, in_flight: int, max_pixels: int,
                   lengths: list[int] | None = None, temperature: float = 0.0,
                   top_p: float | None = None) -> dict[str, Any]:
    """The pages straight to the endpoint's server (or a group's servers: each page to the
    one with the fewest outstanding, ``in_flight`` each, as folio's dispatch does), timed,
    with the API key each server requires (folio's engine sends it too). Each page asks for
    the token count folio's engine gives it (``lengths``: folio's fixed_length) with the
    preset's first sampling, as folio's first attempt does."""
    from openai import AsyncOpenAI

    from folio.engines.openai_wire import encode_image, fixed_length
    from folio.gpu.vllm_server import endpoint_members

    servers = endpoint_members(endpoint)
    bases = [s.base_url for s in servers]
    # a server folio starts answers /v1 only with its key (VLLM_API_KEY); "x" for one without
    clients = [AsyncOpenAI(base_url=s.base_url, api_key=getattr(s, "api_key", None) or "x",
                           timeout=3600, max_retries=0) for s in servers]
    outstanding = [0] * len(bases)
    urls = [encode_image(p, max_pixels)[0] for p in images]
    sem = asyncio.Semaphore(in_flight * len(bases))
    tokens = {"prompt": 0, "completion": 0}
    answers: list[str] = []

    async def one(url: str) -> None:
        image = {"type": "image_url", "image_url": {"url": url}}
        text = {"type": "text", "text": prompt}
        messages: Any = [{"role": "user", "content": [image, text] if image_first else [text, image]}]
        sampling: dict[str, Any] = {"temperature": temperature}
        if top_p is not None:
            sampling["top_p"] = top_p
        async with sem:
            k = min(range(len(bases)), key=lambda i: outstanding[i])
            outstanding[k] += 1
            try:
                r = await clients[k].chat.completions.create(
                    model=model, max_tokens=fixed_length(url, lengths or [], max_tokens),
                    extra_body={"ignore_eos": True}, messages=messages, **sampling)
            finally:
                outstanding[k] -= 1
        if len(answers) < 8 and r.choices:
            answers.append(r.choices[0].message.content or "")
        if r.usage:
            tokens["prompt"] += r.usage.prompt_tokens
            tokens["completion"] += r.usage.completion_tokens

    started = time.perf_counter()
    await asyncio.gather(*[one(u) for u in urls])
    seconds = time.perf_counter() - started
    for client in clients:
        await client.close()
    return {"pages": len(urls), "seconds": round(seconds, 2),
            "pages_per_s": round(len(urls) / seconds, 3),
            "prompt_tokens_per_page": tokens["prompt"] // max(1, len(urls)),
            "completion_tokens_per_page": tokens["completion"] // max(1, len(urls)),
            "answers": answer_sample(answers)}


def answer_sample(answers: list[str]) -> dict[str, Any]:
    """What a few of the model's answers look like to folio's checks: their length, their
    repeat ratio (the loop check refuses a page above ``validation.max_repeat_ratio``) and
    the start of the first, so a phase says whether synthetic answers pass as text."""
    from folio.page.quality import repeat_ratio

    return {"n": len(answers), "chars": [len(a) for a in answers],
            "repeat_ratio": [round(repeat_ratio(a), 3) for a in answers],
            "head": answers[0][:300] if answers else ""}


def raw_request(config: Any) -> dict[str, Any]:
    """What the raw phase sends besides the pages: the preset's prompt and first sampling,
    the pipeline's token counts, in-flight budget and pixel cap."""
    from folio.settings.presets import get_preset

    preset = get_preset(config.ocr.preset)
    first = preset.sampling_for(0)
    return {"prompt": preset.prompt, "image_first": preset.image_first,
            "max_tokens": config.ocr.max_tokens, "lengths": config.ocr.ignore_eos_lengths,
            "temperature": first.temperature, "top_p": first.top_p,
            "in_flight": config.ocr.in_flight, "max_pixels": config.render.max_pixels}
