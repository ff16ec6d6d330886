"""Claims that quote the project's own docs quote text those docs contain, in the section named.

A claim's `source` is "path, section" (or "path; another source") where path is a file of this
project (README.md, docs/...); claims sourced from a paper quote the paper, which is not part of
this project and is not read here. A quote may join fragments with "…"; each fragment must appear, in order, inside
the named section, ignoring markdown emphasis and code marks, line breaks and a fragment's final
full stop (the docs may go on with a parenthesis where the quote ends the sentence).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "experiments").glob("*.yaml")) + sorted((ROOT / "examples").glob("*/experiment.yaml"))


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[*_`]", "", text)).strip()


def _section(markdown: str, title: str) -> str | None:
    """The text under the heading `title` up to the next heading of the same or a higher level."""
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(#+)\s+(.*)", line)
        if m and _plain(m.group(2)) == _plain(title):
            level = len(m.group(1))
            end = next((j for j in range(i + 1, len(lines))
                        if (h := re.match(r"(#+)\s", lines[j])) and len(h.group(1)) <= level), len(lines))
            return "\n".join(lines[i + 1:end])
    return None


def _project_claims() -> list[tuple[str, str, str, str]]:
    out = []
    for spec in SPECS:
        for claim in yaml.safe_load(spec.read_text()).get("claims") or []:
            first = str(claim.get("source", "")).split(";")[0]  # "docs page; a paper": the page is checked
            path, _, section = first.partition(",")
            if path.strip().endswith(".md") and (ROOT / path.strip()).is_file():
                out.append((claim["id"], path.strip(), section.strip(), claim.get("quote") or ""))
    return out


CLAIMS = _project_claims()


def test_the_docs_sourced_claims_are_found():
    assert len(CLAIMS) >= 60  # the README/docs claims of the paper experiments and the audit


def _missing(quote: str, markdown: str, section: str) -> str | None:
    """What of `quote` the section (or, with no section, the whole file) lacks; None when all is there."""
    text = markdown
    if section:
        body = _section(markdown, section)
        if body is None:
            return f"the section {section!r}"
        text = body
    plain = _plain(text)
    fragments = [f for f in (_plain(f).rstrip(".") for f in quote.split("…")) if f]
    if not fragments:
        return "any text (the quote is empty)"
    at = 0
    for fragment in fragments:
        found = plain.find(fragment, at)
        if found < 0:
            return repr(fragment)
        at = found + len(fragment)
    return None


@pytest.mark.parametrize(("claim_id", "path", "section", "quote"), CLAIMS, ids=[c[0] for c in CLAIMS])
def test_quote_is_in_the_named_section(claim_id, path, section, quote):
    missing = _missing(quote, (ROOT / path).read_text(), section)
    assert missing is None, f"{claim_id}: {path} ({section}) lacks {missing}"


def test_a_changed_sentence_is_caught():
    doc = "# T\n\n## What it says\n\nThe method is **better** at\nsmall epsilon (see below).\n\n## Other\n\nElse.\n"
    assert _missing("The method is better at small epsilon.", doc, "What it says") is None
    assert _missing("The method is … small epsilon", doc, "What it says") is None
    assert _missing("The method is worse at small epsilon.", doc, "What it says") == "'The method is worse at small epsilon'"
    assert _missing("small epsilon … The method is", doc, "What it says") is not None  # fragments in order
    assert _missing("Else.", doc, "What it says") is not None  # another section
    assert _missing("Else.", doc, "") is None
    assert _missing("The method", doc, "Missing") == "the section 'Missing'"
