"""A small HTML -> markdown converter for model output (stdlib only, never raises).

Models emit a narrow, mostly well-formed subset of HTML (Chandra's allowed tags), but a
generation cut at the token budget leaves tags open, and a sampling glitch can emit any
tag at all. A tolerant tree builder over :mod:`html.parser` handles both: unknown tags
render as their text, unclosed ones are closed at the end. Tables stay HTML (the data
contract's table format), rebuilt from the tree so only structural tags and
``colspan``/``rowspan`` survive.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOID = frozenset({"br", "img", "input", "hr", "meta", "link", "col", "wbr"})
_BLOCK = frozenset(
    {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "pre", "table",
     "blockquote", "section", "article", "header", "footer", "figure", "figcaption", "hr"}
)
_TABLE_TAGS = frozenset({"table", "thead", "tbody", "tfoot", "tr", "td", "th", "caption"})
_TABLE_ATTRS = ("colspan", "rowspan")
_SPACES = re.compile(r"[ \t\r\n\f\v]+")
_MANY_NEWLINES = re.compile(r"\n{3,}")


@dataclass
class Node:
    tag: str  # "" for a text node
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    text: str = ""

    def get(self, name: str, default: str = "") -> str:
        return self.attrs.get(name, default)

    def elements(self) -> list[Node]:
        return [c for c in self.children if c.tag]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node(tag="#root")
        self.stack: list[Node] = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag=tag, attrs={k: (v if v is not None else "") for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(
            Node(tag=tag, attrs={k: (v if v is not None else "") for k, v in attrs})
        )

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return
        # a stray end tag: ignore it

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(Node(tag="", text=data))


def parse_html(text: str) -> Node:
    """The document tree of ``text``; unclosed tags are closed at the end."""
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    return builder.root


def to_markdown(node: Node) -> str:
    """Markdown for a node's children: paragraphs, headings, lists, math, HTML tables."""
    out = _render_children(node, _Ctx())
    lines = [line.rstrip() for line in out.split("\n")]
    return _MANY_NEWLINES.sub("\n\n", "\n".join(lines)).strip()


def html_to_markdown(text: str) -> str:
    return to_markdown(parse_html(text))


def plain_text(node: Node) -> str:
    """All text below ``node``, whitespace collapsed."""
    parts: list[str] = []

    def walk(n: Node) -> None:
        if not n.tag:
            parts.append(n.text)
        elif n.tag == "br":
            parts.append(" ")
        for child in n.children:
            walk(child)

    walk(node)
    return _SPACES.sub(" ", "".join(parts)).strip()


@dataclass
class _Ctx:
    pre: bool = False
    list_depth: int = 0


def _render_children(node: Node, ctx: _Ctx) -> str:
    return "".join(_render(child, ctx) for child in node.children)


def _block(text: str) -> str:
    text = text.strip()
    return f"\n\n{text}\n\n" if text else ""


def _render(node: Node, ctx: _Ctx) -> str:
    tag = node.tag
    if not tag:
        return node.text if ctx.pre else _SPACES.sub(" ", node.text)
    if tag in ("script", "style", "head", "title"):
        return ""
    if tag == "br":
        return "\n"
    if tag == "hr":
        return "\n\n---\n\n"
    if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
        inner = _render_children(node, ctx).strip().replace("\n", " ")
        return _block(f"{'#' * int(tag[1])} {inner}") if inner else ""
    if tag in ("b", "strong"):
        return _wrap(_render_children(node, ctx), "**")
    if tag in ("i", "em"):
        return _wrap(_render_children(node, ctx), "*")
    if tag == "del":
        return _wrap(_render_children(node, ctx), "~~")
    if tag in ("sup", "sub"):
        inner = _render_children(node, ctx).strip()
        return f"<{tag}>{inner}</{tag}>" if inner else ""
    if tag == "math":
        tex = plain_text(node) if not ctx.pre else "".join(c.text for c in node.children)
        if node.get("display") == "block":
            return _block(f"$$\n{tex.strip()}\n$$")
        return f"${tex.strip()}$" if tex.strip() else ""
    if tag == "a":
        inner = _render_children(node, ctx).strip()
        href = node.get("href")
        return f"[{inner}]({href})" if href and inner else inner
    if tag == "img":
        alt = _SPACES.sub(" ", node.get("alt")).strip()
        return f"![{alt}]({node.get('src')})"
    if tag == "input":
        if node.get("type") in ("checkbox", "radio"):
            return "[x]" if "checked" in node.attrs else "[ ]"
        return node.get("value")
    if tag == "code" and not ctx.pre:
        inner = plain_text(node)
        return f"`{inner}`" if inner else ""
    if tag == "pre":
        raw = _render_children(node, _Ctx(pre=True, list_depth=ctx.list_depth))
        return _block(f"```\n{raw.strip(chr(10))}\n```")
    if tag in ("ul", "ol"):
        return _render_list(node, ctx)
    if tag == "li":  # an item outside a list
        return _block("- " + _render_children(node, ctx).strip())
    if tag == "table":
        return _block(table_html(node))
    if tag in _BLOCK or tag in ("p", "div", "caption"):
        return _block(_render_children(node, ctx))
    return _render_children(node, ctx)


def _wrap(inner: str, mark: str) -> str:
    stripped = inner.strip()
    if not stripped:
        return inner
    lead = " " if inner[:1].isspace() else ""
    trail = " " if inner[-1:].isspace() else ""
    return f"{lead}{mark}{stripped}{mark}{trail}"


def _render_list(node: Node, ctx: _Ctx) -> str:
    ordered = node.tag == "ol"
    indent = "  " * ctx.list_depth
    inner_ctx = _Ctx(pre=ctx.pre, list_depth=ctx.list_depth + 1)
    lines: list[str] = []
    number = 1
    for child in node.children:
        if child.tag != "li":
            text = _render(child, inner_ctx).strip()
            if text:
                lines.append(indent + text)
            continue
        marker = f"{number}. " if ordered else "- "
        number += 1
        body = _render_children(child, inner_ctx).strip()
        body = _MANY_NEWLINES.sub("\n", body.replace("\n\n", "\n"))
        first, _, rest = body.partition("\n")
        lines.append(f"{indent}{marker}{first}")
        lines.extend(line if line.startswith(indent + "  ") else f"{indent}  {line.strip()}"
                     for line in rest.split("\n") if line.strip())
    text = "\n".join(lines)
    return f"\n{text}\n" if ctx.list_depth else _block(text)


def table_html(node: Node) -> str:
    """The table rebuilt from the tree: structural tags, colspan/rowspan, escaped text."""

    def cell_text(n: Node) -> str:
        text = _render_children(n, _Ctx()).strip()
        return _SPACES.sub(" ", text.replace("\n", " <br> ")).replace(" <br> ", "<br>")

    def build(n: Node) -> str:
        if n.tag in ("td", "th"):
            attrs = "".join(
                f' {a}="{html.escape(n.attrs[a])}"' for a in _TABLE_ATTRS
                if n.attrs.get(a, "").strip().isdigit()
            )
            return f"<{n.tag}{attrs}>{_escape_cell(cell_text(n))}</{n.tag}>"
        if n.tag == "caption":
            return f"<caption>{html.escape(plain_text(n), quote=False)}</caption>"
        inner = "".join(build(c) for c in n.children if c.tag in _TABLE_TAGS)
        return f"<{n.tag}>{inner}</{n.tag}>" if n.tag in _TABLE_TAGS else inner

    return build(node)


_KEEP_TAG = re.compile(r"(<br>|</?su[bp]>)")


def _escape_cell(text: str) -> str:
    """Escape cell text for HTML, keeping the line breaks and sub/superscripts we made."""
    parts = _KEEP_TAG.split(text)
    return "".join(p if _KEEP_TAG.fullmatch(p) else html.escape(p, quote=False) for p in parts)
