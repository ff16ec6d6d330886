"""The verdicts as tables: claims.csv (`table`), the Markdown table a paper's docs page leads with
(`markdown`, followed by why each claim is encoded as it is: `why`), and the block of a Markdown file that carries it (`readme_block`, `fill_readme`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpbench.analysis.claims.stats import PARAMETER, TEST
from dpbench.analysis.claims.verdicts import Verdict
from dpbench.core import blocks


def table(verdicts: list[Verdict], exploratory: dict[str, str] | None = None) -> pd.DataFrame:
    """claims.csv: one row per claim (`Verdict.row`); with `exploratory` (claim id -> the verdict
    it had before a plan was frozen) a column `exploratory_verdict` beside the confirmatory one."""
    frame = pd.DataFrame([v.row() for v in verdicts])
    if exploratory is not None and not frame.empty:
        frame.insert(frame.columns.get_loc("verdict") + 1, "exploratory_verdict", frame["id"].map(exploratory))
    return frame


def _fmt(value: float, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "∞" if isinstance(value, float) and value == float("inf") else "–"
    return f"{value:.{digits}g}"


def verdict_text(v: Verdict) -> str:
    """The verdict in words: "undecided at 5 seeds", "no difference beyond 0.02", "vacuous (reason)"."""
    if v.verdict == "undecided" and v.deciding is not None:
        return f"undecided at {v.deciding.n} seeds"
    if v.verdict == "no difference beyond m":
        return f"no difference beyond {getattr(v.claim, 'equivalence', 0.0):g}"
    return v.verdict


def markdown(verdicts: list[Verdict], exploratory: dict[str, str] | None = None) -> str:
    """claims.md: the verdict table a paper's docs page leads with, after a line saying what its
    verdicts are (`status_text`: exploratory unless tested under a frozen plan); with
    `exploratory` (claim id -> its verdict before the plan was frozen) a column with that verdict,
    marked where it differs."""
    status = status_text([v.status for v in verdicts]) if verdicts else ""
    before = " | exploratory" if exploratory is not None else ""
    lines = [f"Verdicts: **{status}**. Each sub-test is the {TEST} test of the {PARAMETER[TEST]} of the per-seed "
             f"statistic (effect: that {PARAMETER[TEST]}, with its 95 % interval)."
             + (" The exploratory verdicts were read with the claims written after their seeds were seen."
                if exploratory is not None else ""), "",
             f"| claim | source | relation tested | effect [95 % CI] (deciding panel) | p (Holm) | verdict{before} | seeds |",
             "|---|---|---|---|---|---|---|" + ("---|" if exploratory is not None else "")]
    for v in verdicts:
        r = v.row()
        quote = r["quote"] if len(r["quote"]) <= 90 else r["quote"][:87] + "…"
        if v.tests and v.verdict != "vacuous":
            effect = f"{_fmt(r['effect'])} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] ({r['where']})"
            adjusted = {"contradicted": v.p_opp_holm, "no difference beyond m": v.p_eq_holm}.get(v.verdict, v.p_holm)
            p = _fmt(adjusted, 2)
            seeds = f"{r['seeds']}" + (f" (needs ~{_fmt(v.seeds_needed, 3)})" if v.verdict == "undecided" else "")
        else:
            effect, p, seeds = r["where"], "–", "–"
        screened = f"<br>vacuous: {r['vacuous']}" if r["vacuous"] else ""
        earlier = ""
        if exploratory is not None:
            was = exploratory.get(v.claim.id, "–")
            earlier = f" | {was}{' (differs)' if was != v.verdict else ''}"
        lines.append(f"| `{v.claim.id}`: “{quote}” | {r['source']} | {r['claim']} | {effect}{screened} | {p} | "
                     f"**{verdict_text(v)}**{earlier} | {seeds} |")
    if verdicts:
        lines += ["", "Why each claim is encoded as it is (the spec's note; a claim without one reads its "
                      "sentence as stated):", ""] + [f"- `{v.claim.id}`: {why(v)}" for v in verdicts]
    return "\n".join(lines) + "\n"


def why(v: Verdict) -> str:
    """Why the claim's encoding reads its sentence that way: the spec's `note`, else the relation
    tested, said to be the sentence as stated, on the panels its quantifier names."""
    note = (v.claim.note or "").strip()
    if note:
        return note
    every = ", on every panel in its scope" if v.claim.quantifier == "all" else ""
    return f"as stated: {v.claim.statement}{every}."


#: every verdict a claim can get, in the order counts and summaries list them
VERDICT_ORDER = ("reproduced", "contradicted", "no difference beyond m", "undecided", "vacuous", "no data")
#: the block name of the summary table (`summary_markdown`) in a Markdown file
SUMMARY_BLOCK = "summary"


def summary_markdown(counts: dict[str, dict[str, int]], status: dict[str, str] | None = None) -> str:
    """The verdict counts of several experiments (name -> verdict -> claims), one row each in the
    given order, in the verdicts' own words (`VERDICT_ORDER`); verdicts no claim has are columns
    only while some experiment has them. `status` (name -> e.g. "exploratory") adds a column saying
    what the verdicts of each experiment are."""
    shown = [v for v in VERDICT_ORDER if v != "no data" or any(c.get(v) for c in counts.values())]
    extra = ["status"] if status is not None else []
    lines = ["| experiment | claims | " + " | ".join(shown + extra) + " |", "|---" * (2 + len(shown) + len(extra)) + "|"]
    for name, by_verdict in counts.items():
        cells = [str(by_verdict.get(v, 0)) for v in shown] + ([status.get(name, "")] if status is not None else [])
        lines.append(f"| {name} | {sum(by_verdict.values())} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def status_text(statuses: list[str]) -> str:
    """What a table's verdicts are, from their `status` values: "exploratory", "confirmatory (plan
    <hash>)", or "a confirmatory, b exploratory" when they differ."""
    found = sorted(set(statuses))
    if len(found) == 1:
        return found[0]
    return ", ".join(f"{statuses.count(s)} {s}" for s in found)


#: the block name of the table of verdicts that depend on the selection (`selection_markdown`)
SELECTION_BLOCK = "selection"


def selection_markdown(flips: list[dict], experiments: list[str]) -> str:
    """The claims whose verdict depends on how hyperparameters are selected: one row per claim
    with its verdict under selection per seed and pooled over seeds (rows of
    `dpbench.experiment.verdicts.selection_flips`); `experiments` are those compared."""
    if not flips:
        return f"No verdict of {', '.join(experiments)} changes between selection per seed and pooled.\n"
    lines = ["| experiment | claim | selected per seed | pooled over seeds |", "|---|---|---|---|"]
    lines += [f"| {f['experiment']} | `{f['claim']}` | {f['seed']} | {f['pooled']} |" for f in flips]
    unchanged = [e for e in experiments if not any(f["experiment"] == e for f in flips)]
    if unchanged:
        lines += ["", f"No verdict of {', '.join(unchanged)} changes."]
    return "\n".join(lines) + "\n"


def readme_block(name: str) -> tuple[str, str]:
    """The markers between which a Markdown file carries experiment `name`'s generated claims table."""
    return blocks.markers("claims", name)


def fill_readme(text: str, name: str, table_markdown: str) -> str:
    """`text` with the block of experiment `name` (`readme_block`) holding `table_markdown`;
    ValueError when the text has no such block."""
    return blocks.fill(text, "claims", name, table_markdown)


__all__ = ["SELECTION_BLOCK", "SUMMARY_BLOCK", "VERDICT_ORDER", "fill_readme", "markdown", "readme_block",
           "selection_markdown", "status_text", "summary_markdown", "table", "verdict_text"]
