"""Numbers in README.md and docs/ that cannot go stale unnoticed.

Three kinds of number appear in the pages, and each is kept true a different way:

- **generated blocks** (`<!-- KIND:NAME -->` ... `<!-- /KIND:NAME -->`, dpbench.core.blocks): written
  by a command from the committed results; every block of every page is of a known kind and equals
  what its command writes now (the counts here, the claims tables in tests/analysis);
- **counts of the committed results** in running text ("25,284 cells", "212 audits"): equal to the
  committed files, unless the paragraph is a dated measurement of an earlier run;
- **timings, sizes and test counts**: measurements, so the paragraph that states one (or the lead-in
  paragraph right above its table) says when and where: "measured YYYY-MM-DD on <machine>".
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pandas as pd
import pytest

from dpbench.analysis import claims
from dpbench.core import blocks
from dpbench.experiment import counts
from dpbench.spec.experiment import load

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SPECS = [*sorted((ROOT / "experiments").glob("*.yaml")), ROOT / "examples" / "my_algorithm" / "experiment.yaml"]
#: a timing, a size or a count of tests: "48 s", "3 min 43 s", "16.5 MB", "590 µs", "1,650 tests"
NUMBER = r"\d(?:[\d,]*\d)?(?:\.\d+)?"
MEASURE = re.compile(rf"(?<![\w.]){NUMBER}(?:\s|\u202f)(?:s|ms|µs|min|h)\b(?![-/])"
                     rf"|(?<![\w.]){NUMBER}\s?(?:kB|KB|MB|GB|MiB|GiB)\b"
                     rf"|\b{NUMBER} (?:tests|passed)\b")
#: the stamp of a measurement: its date and the machine
STAMP = re.compile(r"measured\s+20\d\d-\d\d-\d\d\s+on\s[^.;]*?\b(?:cores?|GPU|machine|VM)\b")
CODE = re.compile(r"```.*?```", re.S)


def _paragraphs(page: Path) -> list[str]:
    """The page's paragraphs (blank-line separated; a table or a list is one), without fenced code
    and generated blocks."""
    text = CODE.sub("", blocks.BLOCK.sub("", page.read_text(encoding="utf-8")))
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


def _unstamped(paragraphs: list[str]) -> list[tuple[list[str], str]]:
    out = []
    for i, para in enumerate(paragraphs):
        found = MEASURE.findall(para)
        lead = paragraphs[i - 1] if i else ""
        if found and not STAMP.search(para) and not (para.lstrip().startswith("|") and STAMP.search(lead)):
            out.append((found, para))
    return out


def test_the_measure_pattern_finds_timings_sizes_and_test_counts_and_not_formulas():
    text = "took 48 s, then 3 min 43 s; pages of 16.5 MB; 1,650 tests; 590 µs a step"
    assert MEASURE.findall(text) == ["48 s", "3 min", "43 s", "16.5 MB", "1,650 tests", "590 µs"]
    assert not MEASURE.findall("Φ(Δ/(2s) − εs/Δ), sha256sums, 1, s, 10 seeds, ε = 1 s-smooth")
    stamped = "`make report` took 48 s (measured 2026-11-28 on a 2-core VM)."
    assert STAMP.search(stamped) and not STAMP.search("`make report` took 48 s on 2026-11-28.")
    assert _unstamped(["took 48 s"]) and not _unstamped([stamped])
    assert _unstamped(["Measured 2026-11-28: no", "| a | 3 s |"])  # the stamp needs 'measured <date> on'
    assert not _unstamped([stamped, "| a | 3 s |"])  # a table under a stamped lead-in


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_timing_and_size_says_when_and_where_it_was_measured(page):
    bad = _unstamped(_paragraphs(page))
    assert not bad, (f"{page.relative_to(ROOT)}: {len(bad)} paragraph(s) state a timing, size or test count "
                     "without 'measured YYYY-MM-DD on <machine>' (or move the number into a generated block):\n"
                     + "\n".join(f"  {found[:4]} in: {para.strip()[:120]!r}" for found, para in bad))


@functools.cache
def _committed_counts() -> dict[str, dict]:
    return {row["experiment"]: row for row in (counts.counts(load(s), ROOT / "results") for s in SPECS)}


def test_every_generated_block_is_known_and_up_to_date():
    found = _committed_counts()
    names = {load(s).name for s in SPECS}
    seen = []
    for page in PAGES:
        for kind, name, body in blocks.blocks(page.read_text(encoding="utf-8")):
            where = f"{page.relative_to(ROOT)}: <!-- {kind}:{name} -->"
            seen.append((kind, name))
            if (kind, name) == counts.COUNTS_BLOCK:  # the page picks the rows and their order
                shown = [line.split("|")[1].strip() for line in body.splitlines()[2:]]
                assert shown and set(shown) <= set(found), f"{where}: rows {shown}"
                table = counts.counts_markdown([found[n] for n in shown]).strip()
                assert body == table, (f"{where} disagrees with the committed results: `dpbench report "
                                       f"experiments/*.yaml examples/my_algorithm/experiment.yaml --counts "
                                       f"{page.relative_to(ROOT)}` regenerates it")
            else:  # guarded where they are written: a paper's table by tests/analysis/test_claims.py
                # (equal to results/<name>/claims.md), the summary by test_claims_summary.py, the
                # selection table by tests/experiment/test_selection_flips.py
                assert kind == "claims" and name in {*names, claims.SUMMARY_BLOCK, claims.SELECTION_BLOCK}, \
                    f"{where}: no command writes a block of this kind"
    assert seen.count(counts.COUNTS_BLOCK) >= 2 and ("claims", claims.SUMMARY_BLOCK) in seen


def test_counts_in_running_text_equal_the_committed_results():
    """'N cells' on an experiment's page and 'N audits' anywhere are the committed counts, except in
    a dated measurement of an earlier run."""
    found = _committed_counts()
    audits = found["audit"]["audits"]
    checked = 0
    for page in PAGES:
        name = page.stem if page.parent.name == "papers" else None
        for para in _paragraphs(page):
            if STAMP.search(para):
                continue
            for number in re.findall(r"\b(\d[\d,]*) audits\b", para):
                checked += 1
                assert int(number.replace(",", "")) in (audits, found["my_algorithm"]["audits"]), \
                    f"{page.relative_to(ROOT)}: '{number} audits', the committed results hold {audits}: {para[:100]!r}"
            if name in found:
                for number in re.findall(r"\b(\d[\d,]*) cells\b", para):
                    checked += 1
                    assert int(number.replace(",", "")) == found[name]["cells"], \
                        f"{page.relative_to(ROOT)}: '{number} cells', runs.csv.gz holds {found[name]['cells']}"
    assert checked >= 3


def test_counts_read_the_files():
    row = _committed_counts()["quickstart"]
    runs = pd.read_csv(ROOT / "results" / "quickstart" / "runs.csv.gz", usecols=["rep"])
    assert row["cells"] == len(runs) and row["seeds per point"] == str(runs["rep"].nunique())
    assert row["claims"] == len(pd.read_csv(ROOT / "results" / "quickstart" / "claims.csv"))
    assert _committed_counts()["audit"]["cells"] == 0 and _committed_counts()["audit"]["audits"] > 0


def test_one_verdict_vocabulary():
    """A page that lists the claims' verdicts lists the CLI's, all of them, in its words."""
    words = [v for v in claims.VERDICT_ORDER if v != "no data"]
    listing = re.compile(r"\*\*reproduced\*\*.{0,200}")
    pages = 0
    for page in PAGES:
        for match in listing.finditer(" ".join(page.read_text(encoding="utf-8").split())):
            if "**contradicted**" in match.group(0):
                pages += 1
                missing = [w for w in words if f"**{w}**" not in match.group(0)]
                assert not missing, f"{page.relative_to(ROOT)} lists verdicts without {missing}: {match.group(0)!r}"
    assert pages >= 1
    text = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    for stale in ("three verdicts", "four verdicts", "inconclusive", "not reproduced"):
        assert stale not in text, f"a page says {stale!r}: the CLI's verdicts are {words}"


def _selection_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "claims.md").read_text(encoding="utf-8")
    body = next(b for k, n, b in blocks.blocks(text) if (k, n) == ("claims", claims.SELECTION_BLOCK))
    return [[c.strip().strip("`") for c in line.split("|")[1:-1]] for line in body.splitlines()[2:]]


def test_the_selection_table_agrees_with_the_committed_verdicts():
    """docs/claims.md's table of verdicts that depend on the selection: its per-seed column is the
    committed verdict of each claim (the spec's selection is per seed); the pooled column needs every
    claim re-tested, which the slow test below does."""
    rows = _selection_rows()
    assert rows
    for experiment, claim, per_seed, pooled in rows:
        frame = pd.read_csv(ROOT / "results" / experiment / "claims.csv").set_index("id")
        assert claim in frame.index, f"docs/claims.md names {claim}, not a claim of {experiment}"
        verdict = frame.loc[claim, "verdict"].replace("beyond m", "beyond")
        assert per_seed.startswith(verdict) and not pooled.startswith(verdict), (experiment, claim, verdict)


@pytest.mark.slow
def test_the_selection_table_is_what_the_command_writes(tmp_path):
    from click.testing import CliRunner

    from dpbench.cli.main import main

    page = tmp_path / "claims.md"
    page.write_text((ROOT / "docs" / "claims.md").read_text(encoding="utf-8"), encoding="utf-8")
    specs = [str(ROOT / "experiments" / f"{n}.yaml") for n in ("pidp", "inputpert", "heavytailed", "dpsco")]
    results = tmp_path / "results"
    for name in ("pidp", "inputpert", "heavytailed", "dpsco"):  # the committed tables, no cells: as a fresh clone
        (results / name).mkdir(parents=True)
        for f in (ROOT / "results" / name).iterdir():
            if f.is_file():
                (results / name / f.name).symlink_to(f)
    out = CliRunner().invoke(main, ["claims", *specs, "--results", str(results), "--selection", str(page),
                                    "--no-progress"])
    assert out.exit_code == 0, out.output

    def block(text: str) -> str:
        return next(b for k, n, b in blocks.blocks(text) if (k, n) == ("claims", claims.SELECTION_BLOCK))

    assert block(page.read_text(encoding="utf-8")) == block((ROOT / "docs" / "claims.md").read_text(encoding="utf-8"))


def test_the_readme_opens_with_a_committed_figure():
    """The README's first image is a figure of the committed results, recorded in its figures.json
    (so it is redrawn with the figures, never a stale copy)."""
    import json

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"!\[[^\]]+\]\(([^)]+)\)", text)
    assert first, "the README shows no figure"
    path = ROOT / first.group(1)
    assert path.is_file() and path.parent.parent == ROOT / "results", path
    recorded = json.loads((path.parent / "figures.json").read_text(encoding="utf-8"))
    assert any(path.name in entry["files"] for entry in recorded.values()), path
    assert text.index(first.group(0)) < text.index("## A one-screen tour")
