"""The test server's GPU-like behaviours that the benchmarks rely on."""

from __future__ import annotations

import threading
import time

import httpx

from tests.openai_fake import FakeServer


def test_lockstep_answers_leave_together() -> None:
    """Requests sent apart are answered in the same step, as a batch engine ends
    requests of one output length together (the end of a GPU run)."""
    ended: list[float] = []
    with FakeServer(lockstep_s=1.5) as fake:  # the server in this process
        def ask() -> None:
            body = {"model": "fake-ocr", "messages": [{"role": "user", "content": "page"}]}
            httpx.post(f"{fake.url}/chat/completions", json=body, timeout=10).raise_for_status()
            ended.append(time.monotonic())

        step = 1.5
        time.sleep(step - time.monotonic() % step + 0.05)  # just after a step (one clock)
        first = threading.Thread(target=ask)
        first.start()
        time.sleep(0.4)
        ask()
        first.join()
    assert len(ended) == 2 and abs(ended[0] - ended[1]) < 0.3
    assert min(ended) % 1.5 < 0.3  # both left at the next step, not as they came


def test_answers_by_image_pick_the_nearest_page() -> None:
    """Two pages, two answers: each request gets its own page's answer, whatever size or
    format its image was encoded at, and /stats says which answer and what sampling."""
    import base64
    import io

    from PIL import Image, ImageDraw

    from tests.openai_fake import ImageAnswer

    def page(size: tuple[int, int], dark_top: bool) -> Image.Image:
        image = Image.new("RGB", size, "white")
        w, h = size
        box = (0, 0, w, h // 3) if dark_top else (0, 2 * h // 3, w, h)
        ImageDraw.Draw(image).rectangle(box, fill="black")
        return image

    def data_url(image: Image.Image, fmt: str) -> str:
        buffer = io.BytesIO()
        image.save(buffer, format=fmt)
        return f"data:image/{fmt.lower()};base64,{base64.b64encode(buffer.getvalue()).decode()}"

    answers = [ImageAnswer.of("top", page((100, 130), True), "TOP PAGE"),
               ImageAnswer.of("bottom", page((100, 130), False), "BOTTOM PAGE")]
    got = []
    with FakeServer(by_image=answers) as fake:
        for image, fmt in [(page((990, 1288), False), "PNG"), (page((612, 792), True), "JPEG")]:
            content = [{"type": "text", "text": "ocr"},
                       {"type": "image_url", "image_url": {"url": data_url(image, fmt)}}]
            body = {"model": "fake-ocr", "messages": [{"role": "user", "content": content}],
                    "max_tokens": 100, "temperature": 0.1, "top_p": 0.9}
            reply = httpx.post(f"{fake.url}/chat/completions", json=body, timeout=10)
            got.append(reply.json()["choices"][0]["message"]["content"])
        log = httpx.get(f"http://127.0.0.1:{fake.port}/stats", timeout=10).json()["log"]
    assert got == ["BOTTOM PAGE", "TOP PAGE"]
    assert [e["answer"] for e in log] == ["bottom", "top"]
    assert log[0]["max_tokens"] == 100 and log[0]["temperature"] == 0.1 and log[0]["top_p"] == 0.9
