"""The verdict counts of the claims inventory are generated (`dpbench claims ... --summary`), and
the committed page agrees with the committed claims tables."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from dpbench.analysis import claims

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "docs" / "reference" / "claims-inventory.md"


def test_summary_rows_in_the_given_order_and_no_data_only_when_present():
    text = claims.summary_markdown({"b": {"reproduced": 2, "undecided": 1}, "a": {"contradicted": 3}})
    assert text.splitlines() == ["| experiment | claims | reproduced | contradicted | no difference beyond m | "
                                 "undecided | vacuous |",
                                 "|---|---|---|---|---|---|---|",
                                 "| b | 3 | 2 | 0 | 0 | 1 | 0 |",
                                 "| a | 3 | 0 | 3 | 0 | 0 | 0 |"]
    with_missing = claims.summary_markdown({"a": {"reproduced": 1, "no data": 2}})
    assert with_missing.splitlines()[0].endswith("| no data |") and "| a | 3 | 1 | 0 | 0 | 0 | 0 | 2 |" in with_missing


def test_the_committed_inventory_counts_the_committed_verdicts():
    start, end = claims.readme_block(claims.SUMMARY_BLOCK)
    page = INVENTORY.read_text()
    block = page[page.index(start) + len(start):page.index(end)]
    names = re.findall(r"^\| (\w+) \| \d+ \|", block, flags=re.M)
    assert names, "the inventory has no generated summary rows"
    counts = {}
    for name in names:
        table = ROOT / "results" / name / "claims.csv"
        if not table.exists():
            pytest.skip(f"{table} is not committed")
        counts[name] = pd.read_csv(table)["verdict"].value_counts().to_dict()
    assert block.strip() == claims.summary_markdown(counts).strip(), (
        "docs/reference/claims-inventory.md is out of date: `dpbench claims SPEC... --summary "
        "docs/reference/claims-inventory.md` regenerates it")


def test_cli_summary_needs_the_markers(tmp_path):
    from click.testing import CliRunner

    from dpbench.cli.main import main

    import shutil

    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "quickstart", results / "quickstart")  # the command writes claims.csv there
    page = tmp_path / "page.md"
    page.write_text("# no markers here\n")
    args = ["claims", str(ROOT / "experiments" / "quickstart.yaml"), "--results", str(results), "--summary", str(page)]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 2 and "claims:summary" in out.output
    page.write_text("# counts\n\n<!-- claims:summary -->\nstale\n<!-- /claims:summary -->\n")
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    assert "| quickstart | 3 | 3 | 0 | 0 |" in page.read_text() and "stale" not in page.read_text()
