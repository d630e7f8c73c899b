"""folio.io.keys: names from untrusted input."""

from __future__ import annotations

import unicodedata

import pytest

from folio.io.keys import MAX_KEY_BYTES, check_relpath, doc_slug, safe_key


@pytest.mark.parametrize(
    "name",
    ["../../etc/passwd", "..", ".", "/abs/path.pdf", "a/../../b", "..\\..\\win.ini", "~/x"],
)
def test_no_traversal_or_absolute_paths(name: str) -> None:
    key = safe_key(name)
    assert "/" not in key and "\\" not in key
    assert key not in ("", ".", "..")
    assert not key.startswith((".", "-", "~"))


def test_examples() -> None:
    assert safe_key("../../etc/passwd") == "etc_passwd"
    assert safe_key("report 2024 (final).pdf") == "report_2024_final_.pdf"
    assert safe_key("-rf") == "rf"
    assert safe_key(".hidden.pdf") == "hidden.pdf"


@pytest.mark.parametrize("name", ["a\x00b.pdf", "a\nb\rc\td", "a\x1b[31mred", "x\u202eexe.pdf"])
def test_control_and_format_characters_removed(name: str) -> None:
    key = safe_key(name)
    assert all(unicodedata.category(ch)[0] != "C" for ch in key)


def test_reserved_characters_replaced() -> None:
    key = safe_key('a<b>c:d"e|f?g*h%i#j{k}l^m[n]o`p~q\\r')
    assert set(key) <= set("abcdefghijklmnopqr_")


def test_unicode_is_kept_and_nfc_normalised() -> None:
    decomposed = "Re\u0301sume\u0301 日本語 Ελληνικά.pdf"
    key = safe_key(decomposed)
    assert key == unicodedata.normalize("NFC", "Résumé_日本語_Ελληνικά.pdf")
    assert safe_key(unicodedata.normalize("NFC", decomposed)) == key


def test_never_empty_and_distinct_for_different_junk() -> None:
    a, b = safe_key("???"), safe_key("!!!")
    assert a.startswith("unnamed-") and b.startswith("unnamed-") and a != b
    assert safe_key("").startswith("unnamed-")


def test_windows_device_names() -> None:
    assert safe_key("CON").lower() != "con"
    assert safe_key("nul.pdf").lower() != "nul.pdf"


def test_long_names_capped_keep_extension_and_stay_distinct() -> None:
    base = "x" * 300
    a, b = safe_key(base + "a.pdf"), safe_key(base + "b.pdf")
    assert a != b
    assert len(a.encode()) <= MAX_KEY_BYTES and a.endswith(".pdf")


def test_truncation_respects_multibyte_characters() -> None:
    key = safe_key("日" * 200)
    assert len(key.encode()) <= MAX_KEY_BYTES
    key.encode("utf-8").decode("utf-8")  # no broken sequences
    assert key.startswith("日")


def test_idempotent() -> None:
    for name in ["../a b/c?.pdf", "x" * 400, "Ünïcödé.PDF", "???"]:
        once = safe_key(name)
        assert safe_key(once) == once or once.startswith("unnamed-")


def test_doc_slug() -> None:
    doc_id = "0123456789abcdef" * 2
    assert doc_slug("s3://b/in/Annual Report.PDF", doc_id) == "Annual_Report-0123456789ab"
    assert doc_slug("/data/../x/weird?.pdf", doc_id) == "weird-0123456789ab"
    # same name, different content: different folders
    assert doc_slug("a/r.pdf", "a" * 32) != doc_slug("b/r.pdf", "b" * 32)
    long = doc_slug("s3://b/" + "n" * 500 + ".pdf", doc_id)
    assert len(long.encode()) <= 80 and long.endswith("-0123456789ab")
    with pytest.raises(ValueError):
        doc_slug("a.pdf", "")


@pytest.mark.parametrize("bad", ["", "/etc/x", "a/../b", "a//b", "./a", "a\\b", "a/\x00", "a/"])
def test_check_relpath_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        check_relpath(bad)


def test_check_relpath_accepts() -> None:
    assert check_relpath("slug-1/document.md") == "slug-1/document.md"
    assert check_relpath("_index/abc-def.json") == "_index/abc-def.json"
