"""bench/gpu_raw_engine.send_raw, the GPU benchmarks' raw engine: the pages reach every
server of an endpoint with the API key that server requires (a server folio starts
answers /v1 only with its folder's key), each asking for its benchmark token count."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest
from PIL import Image

from bench.gpu_raw_engine import send_raw
from folio.gpu.vllm_server import EndpointGroup
from tests.openai_fake import FakeServer


@dataclass
class _Server:
    """A started server as folio's runner gives it: where it is and the key it requires."""

    base_url: str
    api_key: str | None
    served_model_name: str | None = "fake-ocr"
    in_flight: int = 2

    def wait_ready(self, timeout_s: float) -> bool:
        return True


def _pages(folder: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        path = folder / f"p{i}.png"
        Image.new("RGB", (40 + i, 50), "white").save(path)
        paths.append(path)
    return paths


def _send(endpoint: _Server | EndpointGroup, pages: list[Path]) -> dict[str, object]:
    return asyncio.run(send_raw(endpoint, "fake-ocr", pages, prompt="page", image_first=True,
                                max_tokens=768, in_flight=2, max_pixels=1_000_000,
                                lengths=[7]))


def test_each_server_gets_its_own_key_and_the_pages_are_spread(tmp_path: Path) -> None:
    pages = _pages(tmp_path, 6)
    with FakeServer(api_key="key-one") as one, FakeServer(api_key="key-two") as two:
        result = _send(EndpointGroup([_Server(one.url, "key-one"),
                                      _Server(two.url, "key-two")]), pages)
        served = (one.state.requests, two.state.requests)
    assert result["pages"] == 6
    assert result["completion_tokens_per_page"] == 7  # the lengths' count, not max_tokens
    assert sum(served) == 6 and min(served) > 0


def test_a_server_without_its_key_refuses_the_pages(tmp_path: Path) -> None:
    """What the raw phase met before it sent the key: the server's 401."""
    with FakeServer(api_key="key-one") as one, pytest.raises(openai.AuthenticationError):
        _send(_Server(one.url, "another-key"), _pages(tmp_path, 1))
