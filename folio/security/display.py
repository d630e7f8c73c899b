"""Names from untrusted sources made safe to show.

Why: a file name or an S3 key is chosen by whoever made the file. Printed raw, an escape
sequence in it reaches the user's terminal (it can move the cursor, retitle the window,
hide lines), a newline starts a fake line in a log, and ``|`` or a newline breaks the
markdown summary table (the CLI's and the Prefect artifact's). The name itself is kept
everywhere it is data (reports' JSON, outputs); only what is shown goes through here.

Example:
    >>> printable("a\\x1b[2Jb\\nc.pdf")
    'a\\\\x1b[2Jb\\\\nc.pdf'
    >>> table_cell("x | y\\nz")
    'x \\\\| y\\\\nz'
"""

from __future__ import annotations

import unicodedata

__all__ = ["printable", "table_cell"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """``text`` with control characters (C0, DEL, C1), bidirectional overrides and other
    format characters written as visible escapes (``\\x1b``, ``\\u202e``)."""
    out = []
    for ch in text:
        if ch in _NAMED:
            out.append(_NAMED[ch])
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def table_cell(text: str) -> str:
    """:func:`printable`, and ``|`` escaped, for a cell of a markdown table."""
    return printable(text).replace("|", "\\|")
