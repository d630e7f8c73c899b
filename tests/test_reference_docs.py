"""The reference pages in docs/ (configuration.md, cli.md, outputs.md) are the ones
scripts/reference_docs.py makes from the code now: a setting, an option or an output
field added, renamed or redescribed without regenerating them fails here."""

from __future__ import annotations

import argparse
from types import ModuleType

import pytest
from pydantic import BaseModel, Field

from tests.script_module import load_script

REGENERATE = "python scripts/reference_docs.py"


def _script() -> ModuleType:
    return load_script("reference_docs")


@pytest.mark.parametrize("page", ["configuration.md", "cli.md", "outputs.md"])
def test_the_committed_page_is_the_one_the_code_gives(page: str) -> None:
    docs = _script()
    committed = (docs.DOCS / page).read_text(encoding="utf-8")
    assert committed == docs.PAGES[page](), f"docs/{page} is stale: run {REGENERATE}"


def test_every_setting_is_a_row_with_its_variable() -> None:
    from folio.settings.config import PipelineConfig

    docs = _script()
    page = docs.configuration()
    leaves = [path for path, field, _ in docs.settings_rows(PipelineConfig) if field]
    assert len(leaves) > 100
    for path in leaves:
        assert f"| `{'.'.join(path)}` |" in page
        assert f"`FOLIO_{'__'.join(path).upper()}`" in page


def test_a_nested_section_gives_dotted_names_and_json_defaults() -> None:
    class Inner(BaseModel):
        """Inner things."""

        limit: int | None = Field(None, description="a | b")
        names: list[str] = Field(default_factory=lambda: ["x"])

    class Outer(BaseModel):
        inner: Inner = Field(default_factory=Inner)
        on: bool = True

    docs = _script()
    rows = [(".".join(p), docs.default_of(f) if f else None)
            for p, f, _ in docs.settings_rows(Outer)]
    assert rows == [("inner", None), ("inner.limit", "null"), ("inner.names", '["x"]'),
                    ("on", "true")]
    assert docs.type_name(Inner.model_fields["limit"].annotation) == "int | None"
    assert docs.cell("a | b\nc") == "a \\| b c"


def test_every_subcommand_and_option_of_the_parser_is_listed() -> None:
    from folio import cli

    docs = _script()
    page = docs.cli_doc()
    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        assert f"## `folio {name}`" in page
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}`" in page, (name, option)
    assert "| 6 | S3, the vector store or an OCR server" in page
