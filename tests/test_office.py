"""LibreOffice's conversions and their isolation (folio.formats.office), into PDF as the
conversion benchmark uses them; the pipeline converts the legacy formats into OOXML the
same way and reads them natively (tests/test_office_native.py).

The sources are made here: ODF documents written by hand (a ZIP of a few XML members),
DOCX, XLSX, PPTX and DOC made from them by LibreOffice itself, RTF by hand, a DOCX sealed
with a password by msoffcrypto-tool. The conversions everyone reads run once, side by
side, at module scope. LibreOffice must be installed (scripts/setup.sh does): a host
without it fails here rather than skips, so a setup that lost it shows.
"""

from __future__ import annotations

import http.server
import io
import os
import shutil
import struct
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from folio.errors import (
    BadInputError,
    ConfigError,
    EncryptedDocumentError,
    OfficeConversionError,
    OfficeTimeoutError,
    TransientError,
)
from folio.formats.office import convert_to_pdf, find_soffice, require_libreoffice
from folio.formats.office_kind import cfb_encryption, sniff_office

TIMEOUT_S = 120.0
MEMORY_MB = 2048

_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
       'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
       'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
       'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
       'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"')

#: the words each source holds, none shared with another source
MARKERS = {
    "odt": ["Writer", "marker", "alpha"],
    "docx": ["Writer", "marker", "alpha"],
    "doc": ["Writer", "marker", "alpha"],
    "rtf": ["Rich", "text", "epsilon"],
    "xlsx": ["Calc", "beta", "Second", "gamma"],
    "pptx": ["Impress", "delta"],
}


def write_odf(path: Path, kind: str, body: str, *, manifest_extra: str = "") -> Path:
    """A minimal ODF package: the stored ``mimetype`` first, a manifest, content.xml."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), f"application/vnd.oasis.opendocument.{kind}")
        archive.writestr("META-INF/manifest.xml", (
            '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
            '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
            '<manifest:file-entry manifest:full-path="/" manifest:media-type='
            f'"application/vnd.oasis.opendocument.{kind}"/><manifest:file-entry '
            'manifest:full-path="content.xml" manifest:media-type="text/xml">'
            f'{manifest_extra}</manifest:file-entry></manifest:manifest>'))
        archive.writestr("content.xml", (
            f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_NS} '
            f'office:version="1.2"><office:body>{body}</office:body></office:document-content>'))
    return path


def _cell(text: str) -> str:
    return f"<table:table-row><table:table-cell><text:p>{text}</text:p></table:table-cell></table:table-row>"


def make_sources(folder: Path) -> dict[str, Path]:
    """Hand-written ODT, ODS, ODP and RTF; DOCX, DOC, XLSX and PPTX from LibreOffice."""
    odt = write_odf(folder / "w.odt", "text",
                    "<office:text><text:p>Writer marker alpha</text:p></office:text>")
    ods = write_odf(folder / "c.ods", "spreadsheet", (
        f'<office:spreadsheet><table:table table:name="One">{_cell("Calc marker beta")}'
        f'</table:table><table:table table:name="Two">{_cell("Second sheet gamma")}'
        "</table:table></office:spreadsheet>"))
    odp = write_odf(folder / "i.odp", "presentation", (
        '<office:presentation><draw:page draw:name="p1"><draw:frame svg:x="2cm" svg:y="2cm" '
        'svg:width="20cm" svg:height="4cm"><draw:text-box><text:p>Impress marker delta'
        "</text:p></draw:text-box></draw:frame></draw:page></office:presentation>"))
    rtf = folder / "r.rtf"
    rtf.write_bytes(rb"{\rtf1\ansi\deff0{\fonttbl{\f0 Times New Roman;}}\f0 Rich text epsilon\par}")
    jobs = [(odt, "docx"), (odt, "doc"), (ods, "xlsx"), (odp, "pptx")]
    with ThreadPoolExecutor(len(jobs)) as pool:
        made = list(pool.map(lambda job: lo_export(*job), jobs))
    return {"odt": odt, "rtf": rtf, "docx": made[0], "doc": made[1], "xlsx": made[2],
            "pptx": made[3]}


def lo_export(src: Path, extension: str) -> Path:
    """LibreOffice's own export of ``src`` to ``extension``, in a profile of its own."""
    out = src.parent / extension
    profile = src.parent / f"profile-{extension}"
    subprocess.run([find_soffice() or "soffice", f"-env:UserInstallation={profile.as_uri()}",
                    "--headless", "--norestore", "--convert-to", extension, "--outdir",
                    str(out), str(src)], check=True, capture_output=True, timeout=TIMEOUT_S,
                   stdin=subprocess.DEVNULL)
    made = out / f"{src.stem}.{extension}"
    assert made.is_file(), f"LibreOffice made no {extension}"
    return made


def pdf_text(path: Path) -> list[str]:
    document = pdfium.PdfDocument(path)
    try:
        return [page.get_textpage().get_text_range() for page in document]
    finally:
        document.close()


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_sources(tmp_path_factory.mktemp("office-sources"))


@pytest.fixture(scope="module")
def converted(sources: dict[str, Path],
              tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """Every source converted at once, into one shared work folder; the DOCX under a
    name made to look like options and shell (it must reach LibreOffice as a file)."""
    work = tmp_path_factory.mktemp("office-work")
    odd = sources["docx"].parent / "--outdir=x; rm -rf ~ $(id) --convert-to.docx"
    shutil.copyfile(sources["docx"], odd)
    names = list(MARKERS)
    inputs = [odd if name == "docx" else sources[name] for name in names]
    with ThreadPoolExecutor(len(names)) as pool:
        pdfs = list(pool.map(lambda src: convert_to_pdf(
            src, work, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB), inputs))
    assert not (Path.cwd() / "x").exists() and not (work / "x").exists()
    return work, dict(zip(names, pdfs, strict=True))


# --- conversions ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(MARKERS))
def test_each_format_converts_to_a_pdf_with_its_own_text(
        name: str, converted: tuple[Path, dict[str, Path]]) -> None:
    """Six conversions ran side by side in one work folder: each PDF holds its document's
    words and none of another's (no profile or output shared between them)."""
    text = " ".join(pdf_text(converted[1][name]))
    for word in MARKERS[name]:
        assert word in text
    assert [w for w in ("alpha", "beta", "gamma", "delta", "epsilon") if w in text] == [
        w for w in MARKERS[name] if w in ("alpha", "beta", "gamma", "delta", "epsilon")]


def test_every_sheet_of_a_workbook_becomes_pages(converted: tuple[Path, dict[str, Path]]) -> None:
    pages = pdf_text(converted[1]["xlsx"])
    assert len(pages) == 2
    assert "beta" in pages[0] and "gamma" in pages[1]


def test_the_work_folder_holds_only_the_pdfs(converted: tuple[Path, dict[str, Path]]) -> None:
    """Profiles, input copies and LibreOffice's temp files go with each conversion; the
    PDFs have names of their own."""
    work, pdfs = converted
    assert sorted(work.iterdir()) == sorted(pdfs.values())
    assert len(set(pdfs.values())) == len(pdfs)


def test_the_kind_comes_from_the_content_not_the_name(
        sources: dict[str, Path], tmp_path: Path) -> None:
    expected = {"odt": ("writer", "writer8"), "docx": ("writer", "MS Word 2007 XML"),
                "doc": ("writer", "MS Word 97"), "rtf": ("writer", "Rich Text Format"),
                "xlsx": ("calc", "Calc MS Excel 2007 XML"),
                "pptx": ("impress", "Impress MS PowerPoint 2007 XML")}
    for name, (app, infilter) in expected.items():
        misnamed = tmp_path / f"{name}.bin"
        shutil.copyfile(sources[name], misnamed)
        kind = sniff_office(misnamed)
        assert (kind.app, kind.infilter) == (app, infilter), name


# --- the input's fault ----------------------------------------------------------------------


def test_corrupt_containers_are_refused_with_a_reason(sources: dict[str, Path],
                                                     tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.docx"
    truncated.write_bytes(sources["docx"].read_bytes()[:600])
    noise = tmp_path / "noise.xlsx"
    noise.write_bytes(bytes(range(256)) * 8)
    not_office = tmp_path / "photos.pptx"
    with zipfile.ZipFile(not_office, "w") as archive:
        archive.writestr("a.txt", "hello")
    broken_cfb = tmp_path / "broken.doc"
    broken_cfb.write_bytes(sources["doc"].read_bytes()[:1024])
    cases = {truncated: "corrupt ZIP", noise: "not an Office document",
             not_office: "not an Office document", broken_cfb: "corrupt compound file"}
    for path, reason in cases.items():
        with pytest.raises(OfficeConversionError) as err:
            convert_to_pdf(path, tmp_path / "work", timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB)
        assert reason in str(err.value), path.name
        assert err.value.reason.startswith("office-conversion: ")
    assert not (tmp_path / "work").exists()  # refused before LibreOffice or a folder


def test_a_document_libreoffice_cannot_read_ends_in_its_message(tmp_path: Path) -> None:
    """A well-formed package whose document part is not XML goes to LibreOffice, which
    fails: the reason quotes it."""
    docx = tmp_path / "garbled.docx"
    with zipfile.ZipFile(docx, "w") as archive:
        archive.writestr("[Content_Types].xml", (
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/'
            '2006/content-types"><Override PartName="/word/document.xml" ContentType="'
            'application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"'
            "/></Types>"))
        archive.writestr("word/document.xml", "\x00\x01 not xml <<<")
    with pytest.raises(OfficeConversionError, match="LibreOffice could not convert this "
                       "DOCX document to PDF .filter MS Word 2007 XML.: .*could not be loaded"):
        convert_to_pdf(docx, tmp_path / "work", timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB)


def test_a_password_protected_docx_is_encrypted(sources: dict[str, Path],
                                               tmp_path: Path) -> None:
    """LibreOffice headless fails on it (no prompt: it finishes well inside the timeout)
    and the container says why."""
    from msoffcrypto.format.ooxml import OOXMLFile

    sealed = tmp_path / "sealed.docx"
    with sources["docx"].open("rb") as plain, sealed.open("wb") as out:
        OOXMLFile(plain).encrypt("s3cret", out)
    with pytest.raises(EncryptedDocumentError, match="encrypted OOXML") as err:
        convert_to_pdf(sealed, tmp_path / "work", timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB)
    assert err.value.reason.startswith("encrypted: ")
    assert isinstance(err.value, BadInputError)


def test_a_word_97_document_marked_encrypted_is_encrypted(sources: dict[str, Path],
                                                         tmp_path: Path) -> None:
    """The FIB's fEncrypted bit set on a real DOC: LibreOffice asks for a password it
    cannot get and fails; the reason says encrypted, not corrupt."""
    data = bytearray(sources["doc"].read_bytes())
    fib = next(offset for offset in range(512, len(data), 512)
               if data[offset: offset + 2] == b"\xec\xa5")  # wIdent, at a sector's start
    data[fib + 0x0B] |= 0x01  # flags at 0x0A, fEncrypted = 0x0100
    sealed = tmp_path / "sealed.doc"
    sealed.write_bytes(bytes(data))
    assert cfb_encryption(sources["doc"]) is None
    with pytest.raises(EncryptedDocumentError, match="fEncrypted"):
        convert_to_pdf(sealed, tmp_path / "work", timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB)


def test_an_encrypted_odf_document_is_refused_before_libreoffice_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sealed = write_odf(tmp_path / "sealed.odt", "text", "", manifest_extra=(
        '<manifest:encryption-data manifest:checksum-type="urn:oasis:names:tc:opendocument:'
        'xmlns:manifest:1.0#sha256-1k" manifest:checksum="AAAA"/>'))
    with pytest.raises(EncryptedDocumentError, match="encryption-data"):
        sniff_office(sealed)
    monkeypatch.setenv("PATH", str(fake_soffice(tmp_path / "bin", "exit 99")))
    with pytest.raises(EncryptedDocumentError):
        convert_to_pdf(sealed, tmp_path / "work", timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB)
    assert not (tmp_path / "bin" / "ran").exists()


def test_a_memory_limit_too_small_fails_the_document_with_its_reason(
        sources: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(OfficeConversionError, match=r"memory limit is 96 MB \(office.memory_mb\)"):
        convert_to_pdf(sources["rtf"], tmp_path / "work", timeout_s=TIMEOUT_S, memory_mb=96)


def test_a_document_cannot_make_libreoffice_fetch_a_remote_picture(tmp_path: Path) -> None:
    """A picture linked (not embedded) from a URL is a request the document makes from
    the converting host (to internal services too): the conversion's profile blocks it.
    LibreOffice with a default profile fetched it from this server."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/picture.png"
        linked = write_odf(tmp_path / "linked.odt", "text", (
            '<office:text><text:p>Linked picture <draw:frame svg:width="5cm" '
            'svg:height="5cm" text:anchor-type="as-char"><draw:image xmlns:xlink='
            f'"http://www.w3.org/1999/xlink" xlink:href="{url}" xlink:type="simple" '
            'xlink:show="embed" xlink:actuate="onLoad"/></draw:frame></text:p></office:text>'))
        pdf = convert_to_pdf(linked, tmp_path / "work", timeout_s=TIMEOUT_S,
                             memory_mb=MEMORY_MB)
    finally:
        server.shutdown()
        server.server_close()
    assert "Linked picture" in " ".join(pdf_text(pdf))
    assert hits == []


# --- the host's fault -------------------------------------------------------------------------


def test_missing_libreoffice_is_a_one_line_config_error(
        sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_soffice() is None
    for call in (require_libreoffice, lambda: convert_to_pdf(
            sources["rtf"], tmp_path / "work", timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB)):
        with pytest.raises(ConfigError) as err:
            call()
        assert "\n" not in str(err.value)
        assert "apt-get install" in str(err.value) and "libreoffice-writer-nogui" in str(err.value)


def test_a_missing_libreoffice_application_is_the_host_s_fault(
        sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian splits LibreOffice by application: on a host with Writer but no Calc, a
    spreadsheet that converts to nothing is a setup to fix, not a corrupt input."""
    program = tmp_path / "program"
    monkeypatch.setenv("PATH", fake_soffice(program, "exit 0"))
    (program / "libswlo.so").touch()
    with pytest.raises(ConfigError, match="Calc is not installed.*libreoffice-calc-nogui"):
        convert_to_pdf(sources["xlsx"], tmp_path / "work", timeout_s=TIMEOUT_S,
                       memory_mb=MEMORY_MB)
    with pytest.raises(OfficeConversionError, match="exit 0"):
        convert_to_pdf(sources["docx"], tmp_path / "work", timeout_s=TIMEOUT_S,
                       memory_mb=MEMORY_MB)


def fake_soffice(folder: Path, body: str) -> str:
    """A folder holding an executable ``soffice`` running ``body``, put first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "soffice"
    script.write_text(f'#!/bin/sh\nhere=$(dirname "$0")\ntouch "$here/ran"\n{body}\n')
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a zombie has stopped; only its parent has yet to reap it


def test_a_timeout_kills_the_whole_process_group(
        sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """soffice is a script that starts oosplash, which starts soffice.bin: a stand-in that
    starts a child and waits shows that both are gone when the timeout strikes."""
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", fake_soffice(bin_dir, (
        'sleep 600 &\necho $! > "$here/child.pid"\necho $$ > "$here/parent.pid"\nwait')))
    with pytest.raises(OfficeTimeoutError, match="longer than 1s") as err:
        convert_to_pdf(sources["rtf"], tmp_path / "work", timeout_s=1, memory_mb=MEMORY_MB)
    assert isinstance(err.value, TransientError)
    pids = [int((bin_dir / name).read_text()) for name in ("parent.pid", "child.pid")]
    assert not [pid for pid in pids if _alive(pid)]
    assert not list((tmp_path / "work").iterdir())


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if text.encode() in (proc / "cmdline").read_bytes() and _alive(int(proc.name)):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    work = tmp_path / "work"
    yield work
    for pid in _processes_mentioning(str(work)):  # only if the test failed
        os.kill(pid, 9)


def test_a_killed_libreoffice_leaves_no_process_and_no_profile_lock(
        sources: dict[str, Path], work_dir: Path) -> None:
    """The real LibreOffice stopped while it starts: nothing of it runs on, and its
    profile (with any lock in it) is gone with the rest of the conversion's folder."""
    with pytest.raises(OfficeTimeoutError):
        convert_to_pdf(sources["docx"], work_dir, timeout_s=0.3, memory_mb=MEMORY_MB)
    assert _processes_mentioning(str(work_dir)) == []
    assert not list(work_dir.iterdir())


def test_cfb_reader_tells_the_legacy_formats(sources: dict[str, Path]) -> None:
    from folio.formats.cfb import CompoundFile

    data = sources["doc"].read_bytes()
    cfb = CompoundFile(io.BytesIO(data), len(data))
    assert {"WordDocument", "1Table"} <= cfb.names()
    assert struct.unpack_from("<H", cfb.read_stream("WordDocument", 2))[0] == 0xA5EC


def test_a_looping_compound_file_is_refused_not_followed(tmp_path: Path) -> None:
    """A crafted DOC whose directory chain points back at itself: a typed error at once,
    not a loop."""
    header = bytearray(512)
    header[:8] = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
    struct.pack_into("<HHHHH", header, 0x18, 0x3E, 3, 0xFFFE, 9, 6)
    struct.pack_into("<IIIIIIII", header, 0x2C, 1, 0, 0, 4096, 0xFFFFFFFE, 0, 0xFFFFFFFE, 0)
    struct.pack_into("<109I", header, 0x4C, 1, *([0xFFFFFFFF] * 108))
    fat = struct.pack("<128I", 0, 0xFFFFFFFD, *([0xFFFFFFFF] * 126))  # sector 0 -> 0
    looping = tmp_path / "looping.doc"
    looping.write_bytes(bytes(header) + bytes(512) + fat)
    with pytest.raises(OfficeConversionError, match="corrupt compound file: .*loops"):
        sniff_office(looping)
