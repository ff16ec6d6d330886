"""Generated blocks of Markdown pages: the text between `<!-- KIND:NAME -->` and
`<!-- /KIND:NAME -->` is written by a dpbench command from the committed results, never by hand
(claims tables and counts: `dpbench claims --readme/--summary/--selection`, `dpbench report
--counts`); the docs tests regenerate every block and fail when one differs from its source."""

from __future__ import annotations

import re

#: a generated block of a page, its markers each at the start of a line (a marker quoted inside a
#: sentence is not one): (kind, name, body)
BLOCK = re.compile(r"^<!-- ([\w-]+):([\w-]+) -->\n?(.*?)^<!-- /\1:\2 -->", re.S | re.M)


def markers(kind: str, name: str) -> tuple[str, str]:
    """The opening and closing markers of block `kind:name`."""
    return f"<!-- {kind}:{name} -->", f"<!-- /{kind}:{name} -->"


def fill(text: str, kind: str, name: str, body: str) -> str:
    """`text` with block `kind:name` holding `body`; ValueError when the text has no such block."""
    start, end = markers(kind, name)
    found = re.search(rf"^{re.escape(start)}$.*?^{re.escape(end)}$", text, re.S | re.M)
    if found is None:
        raise ValueError(f"no {start} ... {end} block in it (each marker on a line of its own)")
    return text[:found.start()] + start + "\n" + body.rstrip("\n") + "\n" + end + text[found.end():]


def blocks(text: str) -> list[tuple[str, str, str]]:
    """Every generated block of `text`: (kind, name, body without its surrounding newlines)."""
    return [(m.group(1), m.group(2), m.group(3).strip("\n")) for m in BLOCK.finditer(text)]
