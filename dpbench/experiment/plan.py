"""The confirmatory plan of an experiment: its analysis frozen, with a hash, before the first
confirmatory seed is drawn (`dpbench decide SPEC --freeze`, then `--confirm`).

A claim written while looking at the seeds it is tested on has no error guarantee: the claims of
the committed experiments were written, and some re-encoded, with their seeds in view, so their
verdicts are **exploratory**. A confirmatory verdict needs the analysis fixed first and data that
did not shape it. The plan (`results/<experiment>/plan.json`, committed) holds:

- the analysis (`analysis`): every claims block entry as written, the margin rule, the `decide:`
  design, the test (sign test of the median, alpha, the spending function, capped Holm) and the
  grid the claims read (data sets, models, algorithms, epsilons, delta, metrics, selection);
- the confirmatory seed stream (`seed`): an experiment seed that no earlier run used (the spec's
  `seed:` when the plan was frozen is in `seeds_seen`), so every split, subsample and noise draw
  of the confirmatory cells is new;
- `hash`: the SHA-256 of the analysis and the seed (the first 12 hex digits name the plan).

`check` refuses a spec whose analysis no longer hashes to the plan's (a claim, margin, design or
grid changed after freezing). A verdict is **confirmatory (plan <hash>)** exactly when the spec's
analysis matches a frozen plan and its `seed:` is the plan's confirmatory seed
(`status`); every other verdict is exploratory. Freezing keeps the exploratory verdicts
(claims-exploratory.csv) so the pages can show both.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from dpbench.core.errors import SpecError
from dpbench.core.keys import canonical_json, seed_from
from dpbench.core.store import atomic_write_text
from dpbench.experiment.layout import output_folder
from dpbench.spec.experiment import Experiment

PLAN_FILE = "plan.json"
#: the claims table as it stood when the plan was frozen (the exploratory verdicts)
EXPLORATORY_FILE = "claims-exploratory.csv"
#: the spec sections the claims read: a change to any of them after freezing is a change of the analysis
GRID_KEYS = ("datasets", "models", "algorithms", "epsilons", "delta", "metrics", "selection", "select_per", "optimum")
#: how the claims are tested (dpbench.analysis.claims): part of the frozen analysis
TEST = {"test": "sign test of the median per-seed statistic (exact, any shape)", "alpha": 0.05,
        "spending": "ln(1 + (e - 1) t) over the looks (Pocock type)", "family": "Holm per experiment, capped",
        "screens": "remove support, never evidence against"}
EXPLORATORY = "exploratory"
#: digits of the hash that name a plan
SHORT = 12


@dataclass(frozen=True)
class Plan:
    """A frozen plan (module docstring)."""

    experiment: str
    analysis: dict
    seed: int
    seeds_seen: tuple[int, ...]
    hash: str
    frozen: str

    @property
    def name(self) -> str:
        return self.hash[:SHORT]

    @property
    def status(self) -> str:
        """The status of a verdict tested under this plan."""
        return f"confirmatory (plan {self.name})"

    def to_json(self) -> str:
        return json.dumps({"experiment": self.experiment, "hash": self.hash, "frozen": self.frozen,
                           "seed": self.seed, "seeds_seen": list(self.seeds_seen), "analysis": self.analysis},
                          indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def analysis(exp: Experiment) -> dict:
    """The analysis of an experiment as the plan freezes it (module docstring): JSON-able, from
    the spec as resolved (its default profile) and the margin rule in force."""
    if not exp.claims:
        raise SpecError(f"{exp.name}: no claims to plan")
    if not exp.decide_looks:
        raise SpecError(f"{exp.name}: no `decide:` block: a confirmatory plan needs its looks fixed")
    resolved = json.loads(canonical_json(exp.resolved))
    return {"claims": resolved.get("claims"), "margins": dict(exp.margins),
            "decide": {"looks": list(exp.decide_looks), "scale": dict(exp.decide_scale)},
            "grid": {k: resolved.get(k) for k in GRID_KEYS if k in resolved}, "test": TEST}


def _hash(analysis_: dict, seed: int) -> str:
    return hashlib.sha256(canonical_json({"analysis": analysis_, "seed": seed}).encode()).hexdigest()


def plan_path(exp: Experiment, results: str | Path) -> Path:
    return output_folder(exp, results) / PLAN_FILE


def load(exp: Experiment, results: str | Path) -> Plan | None:
    """The experiment's frozen plan, or None; SpecError for a file that is not one (or was edited:
    its hash must be that of its own contents)."""
    path = plan_path(exp, results)
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        plan = Plan(raw["experiment"], raw["analysis"], int(raw["seed"]), tuple(int(s) for s in raw["seeds_seen"]),
                    str(raw["hash"]), str(raw.get("frozen", "")))
    except (ValueError, KeyError, TypeError) as exc:
        raise SpecError(f"{path}: not a plan file ({exc})") from None
    if _hash(plan.analysis, plan.seed) != plan.hash:
        raise SpecError(f"{path}: its hash is not that of its contents: the plan was edited after it was frozen")
    return plan


def confirmatory_seed(analysis_: dict, seen: set[int]) -> int:
    """An experiment seed for the confirmatory cells: derived from the analysis (so the same plan
    draws the same seeds), never one in `seen`."""
    k = 0
    while True:
        seed = seed_from("confirmatory", analysis_, k) % 2 ** 31
        if seed not in seen:
            return seed
        k += 1


def freeze(exp: Experiment, results: str | Path) -> Plan:
    """Write the plan of `exp` (the spec as it is now) into its output folder and keep its current
    claims table as the exploratory one. An existing plan with the same analysis is returned as it
    is; one with another analysis is an error (its confirmatory results would be orphaned)."""
    frozen_analysis = analysis(exp)
    existing = load(exp, results)
    if existing is not None:
        if existing.analysis == json.loads(canonical_json(frozen_analysis)):
            return existing
        raise SpecError(f"{exp.name}: a plan is already frozen ({existing.name}) and the spec's analysis differs "
                        f"from it; delete {plan_path(exp, results)} to freeze a new plan (its verdicts then need "
                        f"fresh seeds again)")
    frozen_analysis = json.loads(canonical_json(frozen_analysis))
    seen = {exp.seed}
    seed = confirmatory_seed(frozen_analysis, seen)
    plan = Plan(exp.name, frozen_analysis, seed, tuple(sorted(seen)), _hash(frozen_analysis, seed),
                datetime.now(timezone.utc).isoformat(timespec="seconds"))
    folder = output_folder(exp, results)
    folder.mkdir(parents=True, exist_ok=True)
    table = folder / "claims.csv"
    if table.is_file():
        shutil.copyfile(table, folder / EXPLORATORY_FILE)
    atomic_write_text(plan_path(exp, results), plan.to_json())
    return plan


def check(exp: Experiment, plan: Plan) -> None:
    """SpecError unless the spec's analysis is the plan's (nothing the claims read changed since
    it was frozen)."""
    now = json.loads(canonical_json(analysis(exp)))
    if now != plan.analysis:
        changed = sorted(k for k in set(now) | set(plan.analysis) if now.get(k) != plan.analysis.get(k))
        raise SpecError(f"{exp.name}: the spec's {', '.join(changed)} changed after plan {plan.name} was frozen; "
                        f"its verdicts cannot be confirmatory (restore the spec, or freeze a new plan and draw "
                        f"fresh seeds)")


def committed(path: str | Path) -> bool | None:
    """Whether the file is committed in git as it is (tracked, no change against HEAD); None
    outside a git work tree (or without git)."""
    path = Path(path).resolve()
    try:
        inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=path.parent, capture_output=True,
                                text=True, timeout=10)
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=path.parent,
                                 capture_output=True, timeout=10)
        same = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", path.name], cwd=path.parent,
                              capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return tracked.returncode == 0 and same.returncode == 0


def status(exp: Experiment, results: str | Path) -> str:
    """"confirmatory (plan <hash>)" when the spec's analysis is that of its frozen plan and its seed
    the plan's confirmatory seed; else "exploratory"."""
    try:
        plan = load(exp, results)
        if plan is None or exp.seed != plan.seed or not exp.claims or not exp.decide_looks:
            return EXPLORATORY
        check(exp, plan)
    except SpecError:
        return EXPLORATORY
    return plan.status


__all__ = ["EXPLORATORY", "EXPLORATORY_FILE", "GRID_KEYS", "PLAN_FILE", "Plan", "analysis", "check", "committed",
           "confirmatory_seed", "freeze", "load", "plan_path", "status"]
