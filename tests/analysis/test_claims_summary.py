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


@pytest.mark.parametrize("page", [INVENTORY, ROOT / "README.md"], ids=["inventory", "readme"])
def test_the_committed_pages_count_the_committed_verdicts(page):
    """Every page that counts verdicts (the README's results, the claims inventory) carries the
    generated block, equal to the counts and status of the committed claims.csv tables."""
    start, end = claims.readme_block(claims.SUMMARY_BLOCK)
    text = page.read_text()
    block = text[text.index(start) + len(start):text.index(end)]
    names = re.findall(r"^\| (\w+) \| \d+ \|", block, flags=re.M)
    assert names, f"{page.name} has no generated summary rows"
    counts, status = {}, {}
    for name in names:
        table = ROOT / "results" / name / "claims.csv"
        if not table.exists():
            pytest.skip(f"{table} is not committed")
        frame = pd.read_csv(table)
        counts[name] = frame["verdict"].value_counts().to_dict()
        status[name] = claims.status_text(frame["status"].tolist())
    assert block.strip() == claims.summary_markdown(counts, status).strip(), (
        f"{page.relative_to(ROOT)} is out of date: `dpbench claims SPEC... --summary {page.relative_to(ROOT)}` "
        "regenerates it")


def test_status_text_says_what_the_verdicts_are():
    assert claims.status_text(["exploratory"] * 3) == "exploratory"
    assert claims.status_text(["confirmatory (plan ab12)", "exploratory", "exploratory"]) == \
        "1 confirmatory (plan ab12), 2 exploratory"
    text = claims.summary_markdown({"a": {"reproduced": 1}}, {"a": "exploratory"})
    assert text.splitlines()[0].endswith("| vacuous | status |") and text.splitlines()[2].endswith("| exploratory |")


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
    frame = pd.read_csv(results / "quickstart" / "claims.csv")
    row = claims.summary_markdown({"quickstart": frame["verdict"].value_counts().to_dict()},
                                  {"quickstart": "exploratory"}).splitlines()[2]
    assert row in page.read_text() and "stale" not in page.read_text()


def test_cli_simulate_prints_both_tests_on_the_specs_own_shapes(tmp_path):
    """`dpbench claims SPEC --simulate N`: the procedure on N experiments resampled from the spec's
    sub-tests, a row per test and scenario with its family-wise error."""
    import shutil

    from click.testing import CliRunner

    from dpbench.cli.main import main

    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "quickstart", results / "quickstart")
    out = CliRunner().invoke(main, ["claims", str(ROOT / "experiments" / "quickstart.yaml"), "--results",
                                    str(results), "--simulate", "100"])
    assert out.exit_code == 0, out.output
    assert "100 experiments resampled from" in out.output and "3 claims" in out.output
    rows = [line.split() for line in out.output.splitlines() if line.strip().startswith(("sign ", "t "))]
    assert {(r[0], r[1]) for r in rows} >= {("sign", "boundary"), ("t", "boundary"), ("sign", "shift")}
    boundary = next(r for r in rows if r[:2] == ["sign", "boundary"])
    assert float(boundary[2]) <= 0.05  # the sign test's family-wise error on the quickstart's shapes
    assert CliRunner().invoke(main, ["claims", str(ROOT / "experiments" / "quickstart.yaml"), "--results",
                                     str(results), "--simulate", "5"]).exit_code == 2  # at least 100
