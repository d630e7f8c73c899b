"""Write the reference pages of docs/ from the code, so that they cannot drift from it.

    python scripts/reference_docs.py          # rewrite docs/configuration.md, cli.md, outputs.md
    python scripts/reference_docs.py --check  # exit 1 when a committed page is stale

- ``docs/configuration.md``: every setting of :class:`folio.settings.config.PipelineConfig`
  as its dotted name, type, default, ``FOLIO_*`` variable and description.
- ``docs/cli.md``: every subcommand and option of the ``folio`` command, read from its own
  argparse parser (:func:`folio.cli._parser`), and the exit codes (``EXIT_*`` in
  ``folio/cli.py`` with their comments).
- ``docs/outputs.md``: what a run writes: document.json and its models (from
  :mod:`folio.models`, each field's comment as its description), a pages.jsonl line and
  the report (the keys the writing functions give for a sample document), and the vector
  tables (LanceDB's Arrow schema, pgvector's ``CREATE TABLE``).

Deterministic: nothing depends on the environment (defaults are read from the fields, not
from a loaded configuration; help is formatted at a fixed width), so the pages change
only when the code does. ``tests/test_reference_docs.py`` fails when they differ.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import sys
import tokenize
import types
import typing
from collections.abc import Callable, Iterator
from enum import Enum
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
HEADER = ("<!-- made by scripts/reference_docs.py from the code; do not edit: run "
          "`python scripts/reference_docs.py` -->")

os.environ["COLUMNS"] = "100"  # argparse formats usage lines at the terminal's width
sys.path.insert(0, str(REPO))  # this checkout's folio, whichever one the venv installed

from pydantic import BaseModel  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402


def cell(text: object) -> str:
    """A markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def type_name(tp: Any) -> str:
    """An annotation as a reader writes it: ``int | None``, ``"png" | "jpeg"``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a.value if isinstance(a, Enum) else a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    if tp is type(None):
        return "None"
    if isinstance(tp, type) and issubclass(tp, Enum):
        return " | ".join(json.dumps(member.value) for member in tp)
    if tp is Ellipsis:
        return "..."
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


def default_of(field: FieldInfo) -> str:
    """The field's default as JSON (what ``--set`` takes); ``required`` when none."""
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "(object)"
    if isinstance(value, Enum):
        value = value.value
    return json.dumps(value, default=str)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _doc_of(cls: type) -> str:
    return " ".join((cls.__doc__ or "").split("\n\n")[0].split())


# --- configuration.md ------------------------------------------------------------------

def settings_rows(model: type[BaseModel], prefix: tuple[str, ...] = ()
                  ) -> Iterator[tuple[tuple[str, ...], FieldInfo | None, type[BaseModel]]]:
    """(dotted path, field, the model holding it) of every setting, sections first seen
    as (path, None, section model)."""
    for name, field in model.model_fields.items():
        path = (*prefix, name)
        if _is_model(field.annotation):
            section = typing.cast(type[BaseModel], field.annotation)
            yield path, None, section
            yield from settings_rows(section, path)
        else:
            yield path, field, model


def configuration() -> str:
    from folio.settings.config import PipelineConfig

    env = PipelineConfig.model_config
    prefix = str(env.get("env_prefix") or "")
    delim = str(env.get("env_nested_delimiter") or "__")
    lines = [HEADER, "", "# Configuration", "",
             f"Every setting of `PipelineConfig` (folio/settings/config.py). Give one as "
             f"`--set section.key=value` (the value parsed as JSON) to `folio ingest` or "
             f"`folio trigger`, or as the environment variable `{prefix}SECTION{delim}KEY`. "
             "A key that is not a setting, or a value it cannot take, stops the run with "
             "exit code 2 before any work.", ""]
    top = [(p, f) for p, f, _ in settings_rows(PipelineConfig) if len(p) == 1 and f]
    sections = [(p, m) for p, f, m in settings_rows(PipelineConfig) if f is None]
    table_head = ["| setting | type | default | environment | description |",
                  "|---|---|---|---|---|"]

    def row(path: tuple[str, ...], field: FieldInfo) -> str:
        variable = prefix + delim.join(path).upper()
        return (f"| `{'.'.join(path)}` | {cell(type_name(field.annotation))} | "
                f"`{cell(default_of(field))}` | `{variable}` | {cell(field.description or '')} |")

    count = 0
    for path, section in sections:
        lines += [f"## `{'.'.join(path)}`", ""]
        if doc := _doc_of(section):
            lines += [doc, ""]
        lines += table_head
        for p, field, _ in settings_rows(section, path):
            if field is not None and len(p) == len(path) + 1:
                lines.append(row(p, field))
                count += 1
        lines.append("")
    lines += ["## Top level", ""] + table_head + [row(p, f) for p, f in top] + [""]
    count += len(top)
    lines.insert(6, f"{count} settings in {len(sections)} sections and the top level.")
    lines.insert(7, "")
    return "\n".join(lines)


# --- cli.md ----------------------------------------------------------------------------

def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": prog}
    return text


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | takes | default | help |", "|---|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        name = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
        if action.nargs == 0:
            takes = "flag"
        elif action.choices is not None:
            takes = " \\| ".join(f"`{c}`" for c in action.choices)
        else:
            takes = f"`{action.metavar or action.dest.upper()}`"
            if isinstance(action, argparse._AppendAction):
                takes += ", repeatable"
            if action.nargs in ("+", "*"):
                takes += " ..." if action.nargs == "*" else ", one or more"
        if action.type not in (None, str) and action.nargs != 0:
            takes += f" ({getattr(action.type, '__name__', action.type)})"
        required = action.required or not action.option_strings
        default = "required" if required else (
            "-" if action.default in (None, False, [], argparse.SUPPRESS)
            else f"`{action.default}`")
        rows.append(f"| {name} | {takes} | {default} | {cell(_help(action, parser.prog))} |")
    return rows


def exit_codes() -> list[tuple[int, str]]:
    """The ``EXIT_*`` constants of folio/cli.py with their comments, and the codes the
    module returns as literals (kept here, as its code says them)."""
    source = (REPO / "folio" / "cli.py").read_text(encoding="utf-8")
    comments = {tok.start[0]: tok.string.lstrip("# ").strip()
                for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    found = [(0, "every document under the sources is done (entries skipped by format do "
                 "not count)"),
             (130, "Ctrl-C, after the run closed what it opened"),
             (143, "SIGTERM (`docker stop`, an evicted pod), after the run closed what it "
                   "opened, or 10 s after the signal when closing takes longer (the "
                   "`--report` is written first)")]
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.startswith("EXIT_")
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, int)):
            found.append((int(node.value.value), comments.get(node.lineno, "")))
    return sorted(found)


def cli_doc() -> str:
    from folio import cli

    parser = cli._parser()
    lines = [HEADER, "", "# The `folio` command", "", cell(parser.description or ""), "",
             "```", parser.format_usage().strip(), "```", ""]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in subparsers._choices_actions}
    for name, sub in subparsers.choices.items():
        lines += [f"## `folio {name}`", "", cell(helps.get(name) or ""), ""]
        if sub.description:
            lines += [cell(sub.description), ""]
        lines += ["```", sub.format_usage().strip(), "```", ""]
        lines += _option_rows(sub) + [""]
    lines += ["## Exit codes", "", "| code | meaning |", "|---|---|"]
    lines += [f"| {code} | {cell(meaning)} |" for code, meaning in exit_codes()]
    lines.append("")
    return "\n".join(lines)


# --- outputs.md ------------------------------------------------------------------------

def field_comments(path: Path) -> dict[tuple[str, str], str]:
    """(class, field) -> the comment on the field's line, or the ``#:`` lines above it."""
    source = path.read_text(encoding="utf-8")
    own_line: dict[int, str] = {}
    trailing: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            alone = tok.line.strip().startswith("#")
            (own_line if alone else trailing)[tok.start[0]] = tok.string.lstrip("#:").strip()
    found: dict[tuple[str, str], str] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                above: list[str] = []
                line = item.lineno - 1
                while line in own_line:
                    above.insert(0, own_line[line])
                    line -= 1
                text = trailing.get(item.end_lineno or item.lineno) or " ".join(above)
                found[(node.name, item.target.id)] = text
    return found


def _models_under(root: type[BaseModel]) -> list[type[BaseModel]]:
    """``root`` and every model its fields hold, at any depth, in the order first met."""
    seen: list[type[BaseModel]] = []

    def walk(tp: Any) -> None:
        if _is_model(tp):
            if tp in seen:
                return
            seen.append(tp)
            for field in tp.model_fields.values():
                walk(field.annotation)
        for arg in typing.get_args(tp):
            walk(arg)
    walk(root)
    return seen


#: JSON's name for a Python value's type, bool before int (a bool is an int)
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
    (list, "array"), (dict, "object"))


def _json_type(value: Any) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "null")


#: the report's keys a reader could take two ways
REPORT_DOCUMENT = {
    "outcome": "ok, partial, quarantined or skipped; a cached document keeps the outcome "
               "the run that processed it gave",
    "seconds": "wall-clock seconds from the start of the document's preparation (download, "
               "format check) to its outputs and vectors written, waits in the run's queues "
               "(for the OCR engine, the embedder, the store) included: documents of one run "
               "overlap, so these do not add up to `totals.seconds`",
    "cached": "an earlier run's result, served without processing (done, or quarantined "
              "for good: a cached quarantine still counts in `quarantined` and exit code 3)",
}
REPORT_TOTALS = {
    "seconds": "the run's wall-clock seconds",
    "pages_per_s": "pages this run processed (cached documents left out) per second",
    "cached": "documents served from earlier runs (of any outcome)",
    "quarantined": "documents quarantined, cached ones included",
}


def _keys_table(record: dict[str, Any], notes: dict[str, str]) -> list[str]:
    rows = ["| key | JSON type | meaning |", "|---|---|---|"]
    rows += [f"| `{k}` | {_json_type(v)} | {cell(notes.get(k, ''))} |" for k, v in record.items()]
    return rows


def _sample_document() -> Any:
    from folio.models import Attempt, BBox, Block, DocumentResult, PageOutcome, PageResult

    page = PageResult(index=0, width_pt=612.0, height_pt=792.0, outcome=PageOutcome.OK,
                      attempts=[Attempt(engine="tesseract")],
                      blocks=[Block(label="text", bbox=BBox(x0=0, y0=0, x1=1, y1=1),
                                    content="x", order=0)])
    return DocumentResult(source="a.pdf", page_count=1, pages=[page])


class _RecordingConnection:
    """Enough of a psycopg connection for :func:`create_tables` to say its statements."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def transaction(self) -> Any:
        import contextlib
        return contextlib.nullcontext()

    def execute(self, statement: Any, params: Any = None) -> None:
        self.statements.append(statement if isinstance(statement, str)
                               else statement.as_string(None))


#: what a page is for each Office format (folio.formats' native readers, docs/office.md)
OFFICE_PAGES = [
    "## Pages and places in Office files", "",
    "Office files are read from their own structure (docs/office.md), so a page and a",
    "block's `location` mean, per format (`page_start`/`page_end` of a chunk, `page` of a",
    "page, `<!-- page N -->` in document.md):", "",
    "| format | a page is | `location` of a block (and of a chunk: its first block's) |",
    "|---|---|---|",
    "| DOCX, DOC, RTF, ODT | the text between Word's last rendered page breaks where the "
    "file records them, else between the author's page breaks; one page without either "
    "| its heading path (`Report > Scope > Costs`) |",
    "| XLSX, XLS, ODS | a sheet, in the workbook's order, hidden sheets too | the sheet "
    "and cell range (`Shipments!A1:G51` for the table, `Shipments!B3` for a comment) |",
    "| PPTX, PPT, ODP | a slide | `slide 3`; `slide 3 notes` for its speaker notes |",
    "",
    "A native page has `engine: office`, `route: text-layer`, no boxes and no size "
    "(`width_pt`/`height_pt` 0). A chunk's `location` (its first block's) is a column of "
    "the vector tables below, and a field of every `folio search --json` hit.", "",
]


def outputs_doc() -> str:
    from folio import models
    from folio.models import DocumentResult
    from folio.output import outputs, report
    from folio.stores import lance_schema, pg_schema

    comments = field_comments(Path(models.__file__))
    doc = _sample_document()
    lines = [HEADER, "", "# What a run writes", "",
             "Under `--out` (a folder or an `s3://` prefix), one folder per document:",
             "`document.md` (the pages' markdown, `<!-- page N -->` before each page),",
             "`document.json` and `pages.jsonl`; the run report where `--report` says; the",
             "chunks and their vectors in the vector store. Pages are numbered from 1",
             "everywhere a person reads them.", "",
             *OFFICE_PAGES,
             "## document.json", "",
             "The `DocumentResult` (folio/models.py) as JSON; each page's 0-based `index` is "
             "written as `page`, counted from 1, first in its object. The models it holds:", ""]
    for model in _models_under(DocumentResult):
        lines += [f"### `{model.__name__}`", ""]
        if doc_text := _doc_of(model):
            lines += [doc_text, ""]
        lines += ["| field | type | default | meaning |", "|---|---|---|---|"]
        for name, field in model.model_fields.items():
            shown = "page" if (model.__name__, name) == ("PageResult", "index") else name
            lines.append(f"| `{shown}` | {cell(type_name(field.annotation))} | "
                         f"`{cell(default_of(field))}` | "
                         f"{cell(field.description or comments.get((model.__name__, name), ''))} |")
        lines.append("")
    page_line = json.loads(outputs.render_pages_jsonl(doc).splitlines()[0])
    lines += ["## pages.jsonl", "", "One JSON object per page, in page order:", ""]
    lines += _keys_table(page_line, {"page": "page number, from 1",
                                     "page_number": "the same, its name before `page`",
                                     "blocks": "the page's `Block`s, as in document.json"})
    built = report.build_report([doc], seconds=1.0, out="out")
    lines += ["", "## The run report (`--report`)", "",
              "`documents`: one object per document; `totals`: the run's sums; `config`: "
              "the run's settings without secrets (see configuration.md).", "",
              "### `documents[]`", ""] + _keys_table(built["documents"][0], REPORT_DOCUMENT)
    lines += ["", "### `totals`", ""] + _keys_table(built["totals"], REPORT_TOTALS)
    lines += ["", "## The vector table", "", "### LanceDB (Arrow schema, `dim`: the "
              "embedding's size)", "", "| column | Arrow type | nullable |", "|---|---|---|"]
    for f in lance_schema.chunk_schema(384):
        lines.append(f"| `{f.name}` | {cell(str(f.type).replace('384', 'dim'))} | "
                     f"{'yes' if f.nullable else 'no'} |")
    conn = _RecordingConnection()
    pg_schema.create_tables(conn, "chunks", "chunks_delta", 384)  # type: ignore[arg-type]
    lines += ["", "### pgvector (the statements folio runs for the default `store.table`, "
              "`chunks`; the `chunks_delta` table is its side table of recent writes)", "",
              "```sql"]
    lines += [s.replace("384", "dim") for s in conn.statements if "lock" not in s]
    lines += ["```", ""]
    return "\n".join(lines)


PAGES: dict[str, Callable[[], str]] = {
    "configuration.md": configuration, "cli.md": cli_doc, "outputs.md": outputs_doc}


def stale() -> list[str]:
    """The pages whose committed text differs from what the code gives now."""
    return [name for name, make in PAGES.items()
            if not (DOCS / name).is_file() or (DOCS / name).read_text(encoding="utf-8") != make()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a page is stale")
    args = ap.parse_args(argv)
    if args.check:
        if names := stale():
            print(f"stale: {', '.join(names)}: run python scripts/reference_docs.py",
                  file=sys.stderr)
            return 1
        return 0
    for name, make in PAGES.items():
        (DOCS / name).write_text(make(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
