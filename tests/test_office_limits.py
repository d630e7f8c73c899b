"""Office files that must end typed and bounded (issue 54): a zip bomb, a package over
the unpacked cap, a sheet of a million rows, a corrupt, an encrypted and a macro-enabled
document, through the real pipeline; and the pure pieces the readers rest on (list
markers from numbering.xml, long tables cut by rows)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from lxml import etree

from folio.formats.docx_numbering import Numbering
from folio.models import DocumentOutcome
from folio.tables.table_split import split_table
from tests.office_files import make_docx
from tests.test_office_native import blocks, markdown, run_pipeline

FAST = {"validation": {"enabled": False}}


def test_a_zip_bomb_is_refused_before_any_part_is_parsed(tmp_path: Path) -> None:
    bomb = make_docx(tmp_path / "bomb.docx")
    with zipfile.ZipFile(bomb, "a", zipfile.ZIP_DEFLATED) as archive, \
            archive.open("word/media/zeros.bin", "w", force_zip64=True) as member:
        for _ in range(64):
            member.write(bytes(1 << 20))  # 64 MB of zeros, packed to about 64 KB
    doc = run_pipeline([bomb], tmp_path, **FAST)["bomb.docx"]
    assert doc.outcome is DocumentOutcome.QUARANTINED and not doc.retryable
    assert doc.reason.startswith("zip-bomb: ") and "office.max_ratio" in doc.reason


def test_a_package_over_the_unpacked_cap_is_too_large(tmp_path: Path) -> None:
    docx = make_docx(tmp_path / "big.docx")
    with zipfile.ZipFile(docx, "a", zipfile.ZIP_STORED) as archive:
        archive.writestr("word/media/noise.bin", bytes(range(256)) * 8192)  # 2 MB
    doc = run_pipeline([docx], tmp_path, office={"max_unpacked_mb": 1}, **FAST)["big.docx"]
    assert doc.outcome is DocumentOutcome.QUARANTINED
    assert doc.reason.startswith("too-large: ") and "office.max_unpacked_mb" in doc.reason


def _million_row_workbook(path: Path, rows: int) -> Path:
    """A workbook written by hand, streamed: one sheet of ``rows`` numbered rows."""
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", (
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.'
            'openxmlformats.org/package/2006/content-types"><Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/><Override PartName='
            '"/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.'
            'spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.'
            'worksheet+xml"/></Types>'))
        archive.writestr("_rels/.rels", (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
            'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" '
            f'Type="{rel}/officeDocument" Target="xl/workbook.xml"/></Relationships>'))
        archive.writestr("xl/workbook.xml", (
            f'<?xml version="1.0" encoding="UTF-8"?><workbook {ns} xmlns:r="{rel}">'
            '<sheets><sheet name="Log" sheetId="1" r:id="rId1"/></sheets></workbook>'))
        archive.writestr("xl/_rels/workbook.xml.rels", (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.'
            'openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" '
            f'Type="{rel}/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'))
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            sheet.write(f'<?xml version="1.0" encoding="UTF-8"?><worksheet {ns}>'
                        f'<dimension ref="A1:B{rows}"/><sheetData>'.encode())
            batch = []
            for r in range(1, rows + 1):
                batch.append(f'<row r="{r}"><c r="A{r}" t="inlineStr"><is><t>entry</t></is>'
                             f'</c><c r="B{r}"><v>{r}</v></c></row>')
                if len(batch) == 10_000:
                    sheet.write("".join(batch).encode())
                    batch = []
            sheet.write(("".join(batch) + "</sheetData></worksheet>").encode())
    return path


def test_a_million_row_sheet_is_read_to_the_row_cap_and_says_so(tmp_path: Path) -> None:
    book = _million_row_workbook(tmp_path / "log.xlsx", 1_000_000)
    doc = run_pipeline([book], tmp_path, office={"max_rows": 2000}, **FAST)["log.xlsx"]
    assert doc.outcome is DocumentOutcome.OK, doc.reason
    (page,) = doc.pages
    assert page.notes == ["sheet Log: rows from 2001 on not read (over office.max_rows; "
                          "the sheet declares 1000000 rows)"]
    assert f"*{page.notes[0]}*" in page.markdown  # said where a reader looks, too
    (table,) = [b for b in page.blocks if b.label == "Table"]
    assert table.location == "Log!A1:B2000"
    assert "<td>entry</td><td>2000</td>" in table.content and ">2001<" not in table.content


def test_a_corrupt_document_is_typed(tmp_path: Path) -> None:
    make_docx(tmp_path / "whole.docx")
    broken = tmp_path / "broken.docx"
    with zipfile.ZipFile(broken, "w") as archive:  # a package whose main part is no XML
        with zipfile.ZipFile(tmp_path / "whole.docx") as source:
            for item in source.infolist():
                data = source.read(item.filename)
                archive.writestr(item, data[: len(data) // 2] if
                                 item.filename == "word/document.xml" else data)
    doc = run_pipeline([broken], tmp_path, **FAST)["broken.docx"]
    assert doc.outcome is DocumentOutcome.QUARANTINED and not doc.retryable
    # LibreOffice was given its chance at the package too; the reader's reason stands
    assert doc.reason.startswith("office-conversion: ") and "document.xml" in doc.reason


def test_an_encrypted_docx_is_encrypted(tmp_path: Path) -> None:
    from msoffcrypto.format.ooxml import OOXMLFile

    plain = make_docx(tmp_path / "plain.docx")
    sealed = tmp_path / "sealed.docx"
    with plain.open("rb") as source, sealed.open("wb") as out:
        OOXMLFile(source).encrypt("s3cret", out)
    doc = run_pipeline([sealed], tmp_path, **FAST)["sealed.docx"]
    assert doc.outcome is DocumentOutcome.QUARANTINED and not doc.retryable
    assert doc.reason.startswith("encrypted: ")


def test_a_macro_enabled_document_is_read_and_its_macros_never_run(tmp_path: Path) -> None:
    """A DOCM with a VBA project: its XML is read, the project is never opened."""
    source = make_docx(tmp_path / "plain.docx")
    docm = tmp_path / "macros.docm"
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(docm, "w") as new:
        for item in old.infolist():
            data = old.read(item.filename)
            if item.filename == "[Content_Types].xml":
                data = data.replace(b"wordprocessingml.document.main+xml",
                                    b"ms-word.document.macroEnabled.main+xml")
            new.writestr(item, data)
        new.writestr("word/vbaProject.bin", b"Attribute VB_Name = AutoOpen\x00" * 64)
    doc = run_pipeline([docm], tmp_path, **FAST)["macros.docm"]
    assert doc.outcome is DocumentOutcome.OK, doc.reason
    assert "Annual Kestrel Report" in markdown(doc)
    assert blocks(doc, "List-Item")


W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def _numbering(*levels: tuple[int, str, str, int]) -> Numbering:
    lvls = "".join(f'<w:lvl w:ilvl="{i}"><w:start w:val="{start}"/><w:numFmt w:val="{fmt}"/>'
                   f'<w:lvlText w:val="{text}"/></w:lvl>' for i, fmt, text, start in levels)
    xml = (f'<w:numbering xmlns:w="{W}"><w:abstractNum w:abstractNumId="0">{lvls}'
           '</w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>'
           '<w:num w:numId="2"><w:abstractNumId w:val="0"/><w:lvlOverride w:ilvl="0">'
           '<w:startOverride w:val="5"/></w:lvlOverride></w:num></w:numbering>')
    return Numbering.parse(etree.fromstring(xml.encode()))


def test_list_markers_follow_numbering_xml() -> None:
    numbering = _numbering((0, "decimal", "%1.", 1), (1, "lowerLetter", "%2)", 1),
                           (2, "upperRoman", "(%3)", 1), (3, "bullet", "\uf0b7", 1),
                           (4, "decimal", "%1.%5.", 1))
    got = [numbering.marker("1", level) for level in (0, 1, 1, 2, 2, 3, 0, 1, 4)]
    assert got == ["1.", "a)", "b)", "(I)", "(II)", "-", "2.", "a)", "2.1."]
    assert numbering.marker("2", 0) == "5."  # another list, its start overridden
    assert numbering.marker("9", 0) is None  # no such list


def test_a_long_table_is_cut_by_rows_with_its_header_repeated() -> None:
    head = "<tr><th>Name</th><th>Units</th></tr>"
    rows = [f"<tr><td>item {i}</td><td>{i}</td></tr>" for i in range(200)]
    table = "\n".join(["<table>", head, *rows, "</table>"])
    pieces = split_table(table, 400)
    assert len(pieces) > 10
    assert all(p.splitlines()[:2] == ["<table>", head] and p.endswith("</table>")
               for p in pieces)
    assert all(len(p) <= 400 for p in pieces)
    assert [r for p in pieces for r in p.splitlines()[2:-1]] == rows
    assert split_table(table, 5000) == [table]  # up to four chunks long: whole
    one_line = "<table>" + head + "".join(rows) + "</table>"
    assert split_table(one_line, 100) == [one_line]  # markup folio did not write: whole


def test_an_xml_part_over_the_part_cap_is_too_large(tmp_path: Path) -> None:
    docx = make_docx(tmp_path / "part.docx")
    with zipfile.ZipFile(docx, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/glossary.xml", b"<a>" + b"x" * (2 << 20) + b"</a>")
    doc = run_pipeline([docx], tmp_path, office={"max_part_mb": 1}, **FAST)["part.docx"]
    assert doc.outcome is DocumentOutcome.QUARANTINED
    assert doc.reason.startswith("too-large: ") and "office.max_part_mb" in doc.reason


def test_office_documents_are_skipped_with_a_reason_when_turned_off(tmp_path: Path) -> None:
    docx = make_docx(tmp_path / "off.docx")
    doc = run_pipeline([docx], tmp_path, office={"enabled": False}, **FAST)["off.docx"]
    assert doc.outcome is DocumentOutcome.SKIPPED
    assert doc.reason.startswith("Office document not read: office.enabled is off")


def test_a_package_of_more_members_than_a_document_holds_is_refused_from_its_end_record(
        tmp_path: Path) -> None:
    """A DOCX with 20,001 members (a document holds dozens): too-large, from the count
    its end record declares, through the bounded reader detection uses (the directory
    itself is not read into memory: folio.formats.zip_directory)."""
    import pytest

    from folio.errors import BadInputError
    from folio.formats.office_zip import MAX_MEMBERS, check_package

    path = make_docx(tmp_path / "many.docx")
    with zipfile.ZipFile(path, "a") as archive:
        for n in range(MAX_MEMBERS + 1 - len(archive.infolist())):
            archive.writestr(f"padding/part{n}.xml", "")
    with pytest.raises(BadInputError, match="over the 20000 members") as caught:
        check_package(path, max_unpacked_mb=1024, max_ratio=200, max_part_mb=256)
    assert caught.value.code == "too-large"
