"""What a person sees: the Prefect UI (headless Chromium, driven by selenium) opens the
document deployment, fills its run form, starts a run on a process worker, and the run
completes with its artifacts: OCR progress, the run summary, the quarantined pages and a
link to the Great Expectations Data Docs.

Needs Debian's chromium and chromium-driver (scripts/setup.sh installs them) and selenium;
skips, saying so, without them. Set FOLIO_UI_SCREENSHOT=docs/ui-run.png to refresh the
screenshot in the docs (otherwise it goes to the test's temporary folder).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from folio.samples import report_pages, write_scanned_pdf, write_text_pdf
from tests.prefect_stack import DOCUMENT_DEPLOYMENT, REPO, PrefectStack

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: flags that keep Chromium off the network and independent of any profile (DESIGN.md)
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-quic", "--no-first-run", "--window-size=1280,1200")

needs_chromium = pytest.mark.skipif(
    not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()),
    reason="chromium/chromedriver absent: apt-get install chromium chromium-driver "
           "(scripts/setup.sh does)")

@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium absent: uv pip install selenium")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(20)
    try:
        yield driver
    finally:
        driver.quit()


def mixed_pdf(folder: Path) -> Path:
    """Two born-digital pages and a scanned one: with route text-layer (never OCR) the
    scan has no text to read, so it is quarantined and the run shows why."""
    import pypdfium2 as pdfium

    text = write_text_pdf(folder / "text.pdf", report_pages(seed=21, n=2))
    scan = write_scanned_pdf(folder / "scan.pdf", write_text_pdf(
        folder / "to-scan.pdf", report_pages(seed=22, n=1)), dpi=100)
    merged = pdfium.PdfDocument.new()
    for part in (text, scan):
        src = pdfium.PdfDocument(str(part))
        merged.import_pages(src)
        src.close()
    out = folder / "mixed.pdf"
    merged.save(str(out))
    merged.close()
    return out


def _field(driver: Any, label: str, tag: str = "textarea") -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.XPATH, f"//label[normalize-space()='{label}']/following::{tag}[1]")


def _type(element: Any, text: str) -> None:
    from selenium.webdriver.common.keys import Keys

    element.send_keys(Keys.CONTROL, "a")  # replace the default, as a person would
    element.send_keys(text)


def _wait_final(name: str, timeout: float) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            runs = client.read_flow_runs(
                flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name])))
            if runs and runs[0].state is not None and runs[0].state.is_final():
                return runs[0]
            time.sleep(1)
    return None


def _artifacts(flow_run_id: uuid.UUID) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return client.read_artifacts(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))


#: the width of a normal window: the run summary's table fits it, nothing cut off
NORMAL_WIDTH = 1400


def _assert_fits(browser: Any, url: str) -> None:
    """The page at ``url`` (an artifact) shows its table whole in a window
    :data:`NORMAL_WIDTH` wide: the table ends inside the window and no box around it
    scrolls sideways (the summary had eleven columns and whole URIs, cut off on the
    right; issue 49)."""
    from selenium.webdriver.common.by import By

    size = browser.get_window_size()
    browser.set_window_size(NORMAL_WIDTH, 1000)
    try:
        browser.get(url)
        table = browser.find_element(By.CSS_SELECTOR, "table")
        time.sleep(0.5)  # layout settles after the markdown renders
        overflow = browser.execute_script(
            "const t = arguments[0]; const out = [];"
            "if (t.getBoundingClientRect().right > document.documentElement.clientWidth)"
            "  out.push('table ends at ' + t.getBoundingClientRect().right);"
            "for (let e = t; e; e = e.parentElement)"
            "  if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')"
            "    out.push(e.tagName + '.' + e.className + ' scrolls ' + e.scrollWidth + '>' + e.clientWidth);"
            "return out;", table)
        cells = browser.execute_script(
            "return Array.from(arguments[0].querySelectorAll('th,td')).slice(0, 14).map("
            "c => c.tagName + ' ' + Math.round(c.getBoundingClientRect().width) + ' ' +"
            " getComputedStyle(c).whiteSpace + ' ' + c.textContent.slice(0, 40));", table)
        assert not overflow, (overflow, cells)
    finally:
        browser.set_window_size(size["width"], size["height"])


def _save_small_png(png: bytes, path: Path) -> None:
    """A palette PNG: the dark UI has few colours, so it stays a few dozen KB."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    path.parent.mkdir(parents=True, exist_ok=True)
    image.quantize(colors=64).save(path, optimize=True)


def test_progress_artifact_follows_pages_and_is_throttled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every page-done event of the document counts, other documents' do not, and the API
    sees a bounded number of updates (every 5% or 2 s), the last one 100%."""
    import prefect.artifacts

    import folio_prefect.tasks.progress
    from folio import progress
    from folio_prefect.tasks.progress import PageProgress

    calls: list[tuple[uuid.UUID, float, str]] = []
    created: dict[str, uuid.UUID] = {}

    def create(value: float, description: str) -> uuid.UUID:
        artifact = created[description.split()[2].rstrip(":")] = uuid.uuid4()
        calls.append((artifact, value, description))
        return artifact

    class Client:  # the one client every bar of the process shares
        def __init__(self, url: str = "", stale: Any = None) -> None:
            pass

        def update_artifact(self, artifact_id: uuid.UUID, artifact: Any) -> None:
            calls.append((artifact_id, artifact.data, artifact.description))

    monkeypatch.setattr(prefect.artifacts, "create_progress_artifact", create)
    monkeypatch.setattr(folio_prefect.tasks.progress, "_client", Client)
    with PageProgress("s3://b/doc.pdf", 200) as bar, PageProgress("s3://b/two.pdf", 50) as two:
        for n in range(200):
            progress.emit(progress.ProgressEvent(kind="page-done", source="s3://b/doc.pdf", pages=1))
            progress.emit(progress.ProgressEvent(kind="page-done", source="s3://b/other.pdf", pages=1))
            if n % 4 == 0:
                progress.emit(progress.ProgressEvent(kind="page-done", source="s3://b/two.pdf",
                                                     pages=1))
            time.sleep(0.002)
    assert bar.done == 200 and two.done == 50
    for name, pages in (("doc.pdf", 200), ("two.pdf", 50)):
        mine = [(v, d) for a, v, d in calls if a == created[name]]
        values = [v for v, _ in mine]
        assert values[0] == 0.0 and values[-1] == 100.0 and values == sorted(values)
        assert 2 <= len(mine) <= 25, mine
        assert mine[-1][1] == f"OCR of {name}: {pages} of {pages} pages, finished"
    progress.emit(progress.ProgressEvent(kind="page-done", source="s3://b/doc.pdf", pages=1))
    assert bar.done == 200  # the listener is gone


def test_a_progress_bar_outlives_a_closed_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's cached Prefect client closed under a ticking bar (a run's teardown
    closing Prefect's clients): the update goes out once more on a new client, and the
    closed one is not handed to the next bar."""
    import folio_prefect.tasks.progress
    from folio_prefect.tasks.progress import PageProgress, _send

    sent: list[str] = []

    class Closed:
        def update_artifact(self, artifact_id: uuid.UUID, artifact: Any) -> None:
            raise RuntimeError("Cannot send a request, as the client has been closed.")

    class Fresh:
        def update_artifact(self, artifact_id: uuid.UUID, artifact: Any) -> None:
            sent.append(artifact.description)

    url = "http://api.example/api"
    made = iter([Closed(), Fresh()])
    monkeypatch.setattr("prefect.client.orchestration.get_client",
                        lambda sync_client=True: next(made))
    monkeypatch.setitem(folio_prefect.tasks.progress._clients, url, None)
    del folio_prefect.tasks.progress._clients[url]
    bar = PageProgress("s3://b/doc.pdf", 4)  # not entered: no ticker races this test
    bar.artifact, bar.api_url = uuid.uuid4(), url
    bar.client = folio_prefect.tasks.progress._client(url)
    bar.done = 2
    _send(bar)
    assert sent == ["OCR of doc.pdf: 2 of 4 pages"] and bar.shown == 2
    assert isinstance(folio_prefect.tasks.progress._clients[url], Fresh)


@pytest.mark.slow
@needs_chromium
def test_run_started_from_the_ui_form_completes_with_artifacts(
    prefect_stack: PrefectStack, browser: Any, tmp_path: Path
) -> None:
    from prefect.client.orchestration import get_client
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    pdf, out = mixed_pdf(tmp_path), tmp_path / "out"
    run_name = f"ui-{uuid.uuid4().hex[:8]}"
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name(DOCUMENT_DEPLOYMENT)

    browser.get(f"{prefect_stack.ui_url}/deployments/deployment/{deployment.id}")
    browser.find_element(By.XPATH, "//button[normalize-space()='Run']").click()
    browser.find_element(By.XPATH, "//a[normalize-space()='Custom run']").click()
    _type(_field(browser, "Run Name", "input"), run_name)
    _field(browser, "source").send_keys(str(pdf))
    _type(_field(browser, "out (Optional)"), str(out))
    Select(_field(browser, "route (Optional)", "select")).select_by_visible_text("text-layer")
    browser.find_element(By.XPATH, "//button[normalize-space()='Submit']").click()

    run = _wait_final(run_name, timeout=240)
    assert run is not None, f"run {run_name} not final\n{prefect_stack.log_tail()}"
    assert run.state.type.value == "COMPLETED", f"{run.state}\n{prefect_stack.log_tail()}"
    assert run.parameters["source"] == str(pdf) and run.parameters["route"] == "text-layer"

    artifacts = _artifacts(run.id)
    by_key = {a.key: a for a in artifacts if a.key}
    progress = [a for a in artifacts if a.type == "progress"]
    assert progress and progress[0].data == 100.0, progress
    assert "3 of 3 pages" in (progress[0].description or "")
    summary = str(by_key["folio-run-summary"].data)
    assert "partial" in summary and "pages/s" in summary and "](file://" in summary
    rows = json.loads(by_key["folio-quarantine"].data)
    assert [(r["page"], r["document"]) for r in rows] == [(3, str(pdf))], rows
    assert rows[0]["reason"]
    docs_link = str(by_key["folio-data-docs"].data)
    index = Path(docs_link[docs_link.index("file://") + 7:docs_link.rindex(")")])
    assert index.name == "index.html" and index.is_file() and out in index.parents

    _assert_fits(browser, f"{prefect_stack.ui_url}/artifacts/artifact/"
                          f"{by_key['folio-run-summary'].id}")

    browser.get(f"{prefect_stack.ui_url}/runs/flow-run/{run.id}")
    browser.find_element(By.CSS_SELECTOR, "li.p-tab#artifacts").click()
    browser.find_element(By.XPATH, "//*[normalize-space()='folio-quarantine']")
    time.sleep(1)  # let the cards finish rendering before the picture
    target = Path(os.environ.get("FOLIO_UI_SCREENSHOT") or tmp_path / "ui-run.png")
    _save_small_png(browser.get_screenshot_as_png(),
                    target if target.is_absolute() else REPO / target)
