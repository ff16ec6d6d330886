"""Seeds until decided: `dpbench decide` adds seeds in rounds to the curves that still-undecided
claims read, until every claim is decided, the design's last look, --max-seeds or the budget.

The spec's own cells run first (its seeds are the first look). Round k tests the claims on what
is stored (experiment.verdicts, with the spec's `decide:` design: the claims' sequential p-values
stay valid however the rounds stop, dpbench.analysis.claims.sequential). Each undecided claim's
curves (`claim_curves`: A and B, every curve for a `specific` claim, on its data sets and models,
at the epsilons of its scope, with all their hyperparameter combinations) then get the next
look's seed count (looks[k] x the data set's `scale`) as an `extra_seeds:` entry; only those
cells run, through the same runner as `dpbench run` (joblib locally, dask for a cluster), each
stored the moment it finishes, so an interrupted round resumes. A claim whose curves reached the
last look, or would pass --max-seeds, stays "undecided at N seeds"; --budget stops before a
round whose estimated CPU time (the stored cells' mean time per cell of each data set, times the
cells to run) would exceed what is left. The entries reached are returned (and, with `write`,
written into the spec's `extra_seeds:`), so `dpbench run` on the spec reproduces the decided
results. With `confirm` the rounds run on a frozen plan's confirmatory seed stream
(experiment.plan).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from dpbench.core.errors import SpecError
from dpbench.core.store import atomic_write_text
from dpbench.experiment import pipeline
from dpbench.experiment import plan as plan_mod
from dpbench.experiment.inventory import inventory
from dpbench.experiment.verdicts import claim_verdicts
from dpbench.spec import experiment as spec_mod
from dpbench.spec.experiment import Experiment
from dpbench.spec.sections import ExtraSeeds


@dataclass
class Round:
    """One round: the look reached, the data sets it extended and the cells it ran."""

    look: int
    seeds: dict[str, int]  # the curves extended (an `extra_seeds:` entry as YAML) -> seeds after the round
    cells: int
    cpu_seconds_estimate: float
    undecided_before: int


@dataclass
class Decision:
    """What `decide` did: its rounds, the seeds each data set ended with, why it stopped, and the
    final verdicts (dpbench.analysis.claims.Verdict)."""

    rounds: list[Round] = field(default_factory=list)
    seeds: dict[str, int] = field(default_factory=dict)
    stopped: str = ""
    verdicts: list = field(default_factory=list)
    seed: int = 0  # the experiment seed the rounds ran on (a confirmatory plan's own stream)
    extra: tuple = ()  # the `extra_seeds:` entries reached (spec.sections.ExtraSeeds)
    failed: list[str] = field(default_factory=list)  # a line per look whose run had failed cells (`_failures`)


def seed_keys(exp: Experiment) -> dict[str, str]:
    """Data set label -> the key its seeds go under in `seeds:` (the sweep panel for a sweep's
    entries, which share one count, else the label)."""
    return {ds.label: ds.panel or ds.label for ds in exp.datasets}


def current_seeds(exp: Experiment) -> dict[str, int]:
    """Seeds per `seeds:` key (label or sweep panel) in the spec as loaded."""
    keys = seed_keys(exp)
    return {keys[ds.label]: exp.seeds_for(ds) for ds in exp.datasets}


def with_seeds(exp: Experiment, seeds: dict[str, int], seed: int | None = None,
               extra: tuple[ExtraSeeds, ...] | None = None) -> Experiment:
    """The experiment with these seed counts (a `seeds:` mapping; `default` keeps the spec's), with
    `seed` that experiment seed, and with `extra` those `extra_seeds:` entries (() none)."""
    raw = dict(exp.resolved)
    raw["seeds"] = {"default": len(exp.seeds), **{k: int(v) for k, v in seeds.items()}}
    if seed is not None:
        raw["seed"] = int(seed)
    if extra is not None:
        raw.pop("extra_seeds", None)
        if extra:
            raw["extra_seeds"] = [yaml.safe_load(e.to_yaml()) for e in extra]
    raw.pop("profiles", None)
    return spec_mod.from_dict(raw, name=exp.name, profile=exp.profile, source=exp.source)


def claim_curves(exp: Experiment, verdict) -> ExtraSeeds | None:
    """The curves an undecided claim reads, as an `extra_seeds:` entry without its count: its data
    sets (`claim_datasets`), its curves A and B (and, for a `specific` claim, every other curve of
    the experiment, which its screen compares), its models and its epsilon range; None when it
    reads no curve of the grid."""
    claim = verdict.claim
    datasets = tuple(sorted(claim_datasets(exp, verdict)))
    labels = {claim.a, getattr(claim, "b", None)} - {None}
    if getattr(claim, "specific", False):
        labels |= {a.label for a in exp.algorithms if a.tuning is None}
    algorithms = tuple(sorted({a.label for a in exp.algorithms if a.label in labels and a.tuning is None}))
    if not datasets or not algorithms:
        return None
    return ExtraSeeds(datasets, algorithms, tuple(claim.models), claim.epsilons, 0)


def curve_seeds(exp: Experiment, entry: ExtraSeeds) -> int:
    """The fewest repetitions any cell of the entry's curves has now (`Experiment.reps_of`)."""
    counts = [len(exp.reps_of(algo, ds, model, eps))
              for algo in exp.algorithms for ds in exp.datasets for model in exp.models
              if algo.applies_to(ds, model)
              for eps in (exp.budgets(algo) if algo.private else (None,)) if entry.covers(algo.label, ds, model.label, eps)]
    return min(counts, default=0)


def claim_datasets(exp: Experiment, verdict) -> set[str]:
    """The data set labels a claim reads: those of the data sets its curves run on, within its
    scope (data sets named by label or sweep panel)."""
    claim = verdict.claim
    labels = {claim.a, getattr(claim, "b", None)} - {None}
    out = set()
    for algo in exp.algorithms:
        if algo.label not in labels:
            continue
        for ds in exp.datasets:
            if claim.datasets and ds.label not in claim.datasets and (ds.panel or ds.label) not in claim.datasets:
                continue
            if any(algo.applies_to(ds, model) for model in exp.models
                   if not claim.models or model.label in claim.models):
                out.add(ds.label)
    return out


def cell_seconds(exp: Experiment, results: str | Path) -> dict[str, float]:
    """Mean stored wall seconds per cell of each data set label (the budget's estimate)."""
    totals: dict[str, list[float]] = {}
    for record in inventory(exp, results).records:
        seconds = record.get("wall_seconds")
        if seconds is not None:
            totals.setdefault(record.get("dataset_label") or record.get("dataset"), []).append(float(seconds))
    return {label: sum(v) / len(v) for label, v in totals.items() if v}


def confirmatory(exp: Experiment, results: str | Path) -> Experiment:
    """The experiment on its frozen plan's confirmatory seed stream (`plan.Plan.seed`), starting at
    the design's first look (looks[0] x the data set's scale seeds each); SpecError without a
    plan, when the spec's analysis changed after it was frozen (`plan.check`), or in a git work
    tree where the plan file is not committed as it is."""
    frozen = plan_mod.load(exp, results)
    if frozen is None:
        raise SpecError(f"{exp.name}: no frozen plan ({plan_mod.plan_path(exp, results)}): run `dpbench decide SPEC "
                        f"--freeze` before drawing confirmatory seeds")
    plan_mod.check(exp, frozen)
    if plan_mod.committed(plan_mod.plan_path(exp, results)) is False:
        raise SpecError(f"{exp.name}: commit {plan_mod.plan_path(exp, results)} before drawing confirmatory seeds "
                        f"(the commit records that the plan came first)")
    scale = dict(exp.decide_scale)
    keys = seed_keys(exp)
    first = {keys[ds.label]: exp.decide_looks[0] * scale.get(ds.label, scale.get(keys[ds.label], 1))
             for ds in exp.datasets}
    if exp.seed == frozen.seed:  # already on the plan's stream: keep the seeds reached
        return exp
    return with_seeds(exp, first, seed=frozen.seed, extra=())


def decide(exp: Experiment, *, results: str | Path = "results", data_dir: str | None = None,
           budget_hours: float | None = None, max_seeds: int | None = None, jobs: int = 1, backend: str = "loky",
           scheduler: str | None = None, progress: bool = True, notify=None, confirm: bool = False) -> Decision:
    """Run rounds (module docstring) and return what was done; the experiment's cells already
    stored are reused. `confirm`: on the frozen plan's confirmatory seeds (`confirmatory`)."""
    from dpbench.analysis.claims import Design

    if confirm:
        exp = confirmatory(exp, results)
    if not exp.claims:
        raise SpecError(f"{exp.name}: no claims to decide")
    if not exp.decide_looks:
        raise SpecError(f"{exp.name}: no `decide:` block (e.g. decide: {{looks: [5, 10, 20, 40]}}): the looks "
                        f"must be fixed before seeds are added, for the error control to hold")
    notify = notify or (lambda message: None)
    design = Design(exp.decide_looks)
    scale = dict(exp.decide_scale)
    keys = seed_keys(exp)
    seeds = current_seeds(exp)
    spent = 0.0
    decision = Decision()
    current = exp
    first = pipeline.run_experiment(current, results=results, data_dir=data_dir, jobs=jobs, backend=backend,
                                    scheduler=scheduler, progress=progress)  # the first look: the spec's own seeds
    _failures(decision, first, "the first look", notify)
    while True:
        verdicts = claim_verdicts(current, results, data_dir)
        undecided = [v for v in verdicts if v.verdict == "undecided"]
        decision.verdicts = verdicts
        if not undecided:
            decision.stopped = "every claim decided"
            break
        wanted: dict[ExtraSeeds, int] = {}
        for v in undecided:
            entry = claim_curves(current, v)
            if entry is None:
                continue
            factor = max(scale.get(label, scale.get(keys.get(label, label), 1)) for label in entry.datasets)
            have = curve_seeds(current, entry)
            nxt = next((n * factor for n in design.looks if n * factor > have), None)
            if nxt is None or (max_seeds is not None and nxt > max_seeds * factor):
                continue
            wanted[entry] = max(wanted.get(entry, 0), nxt)
        if not wanted:
            decision.stopped = "the undecided claims' curves are at the last look" + \
                               (f" or --max-seeds {max_seeds}" if max_seeds is not None else "")
            break
        extra = merge_extra(current.extra_seeds, [dataclasses.replace(e, seeds=n) for e, n in wanted.items()])
        target = with_seeds(current, seeds, extra=extra)
        done = {c.key for c in current.cells()}
        todo = [c for c in target.cells() if c.key not in done]
        per_cell = cell_seconds(current, results)
        fallback = sum(per_cell.values()) / len(per_cell) if per_cell else 1.0
        estimate = sum(per_cell.get(c.dataset_label, fallback) for c in todo)
        if budget_hours is not None and spent + estimate > budget_hours * 3600:
            decision.stopped = (f"budget: the next round needs ~{estimate / 3600:.2f} CPU-hours, "
                                f"{max(budget_hours * 3600 - spent, 0) / 3600:.2f} left")
            break
        notify(f"round {len(decision.rounds) + 1}: {len(undecided)} undecided claims; "
               + "; ".join(f"{', '.join(e.algorithms)} on {', '.join(e.datasets)}"
                           + (f" ({', '.join(e.models)})" if e.models else "")
                           + (f", ε {e.epsilons[0]:g}-{e.epsilons[1]:g}" if e.epsilons else "")
                           + f" -> {n} seeds" for e, n in wanted.items())
               + f" ({len(todo):,} cells, ~{estimate / 3600:.2f} CPU-hours)")
        summary = pipeline.run_experiment(target, results=results, data_dir=data_dir, jobs=jobs, backend=backend,
                                          scheduler=scheduler, progress=progress)
        _failures(decision, summary, f"round {len(decision.rounds) + 1}", notify)
        spent += estimate
        decision.rounds.append(Round(look=max(wanted.values()), seeds={e.to_yaml(): n for e, n in wanted.items()},
                                     cells=len(todo), cpu_seconds_estimate=estimate,
                                     undecided_before=len(undecided)))
        current = target
    decision.seeds = seeds
    decision.seed = current.seed
    decision.extra = tuple(current.extra_seeds)
    return decision


def _failures(decision: Decision, summary, where: str, notify) -> None:
    """Record and say that cells of a look failed (an algorithm that cannot run there, e.g. a
    library whose accountant cannot reach the target ε): they have no result, the looks go on, and
    the claims are tested on the cells that ran, as `dpbench claims` and `run --partial` see them."""
    if not summary.failed:
        return
    first = summary.failed[0]
    cell = first.get("cell") or {}
    line = (f"{len(summary.failed)} cells failed in {where} (e.g. {cell.get('algorithm')} at ε = "
            f"{cell.get('epsilon')}: {str(first.get('error') or '')[:200]}); they have no result, so "
            f"the claims are tested on the cells that ran (`dpbench run SPEC --partial` draws them)")
    decision.failed.append(line)
    notify(line)


def merge_extra(old: tuple[ExtraSeeds, ...], new: list[ExtraSeeds]) -> tuple[ExtraSeeds, ...]:
    """`extra_seeds:` entries with the new ones added; an entry for the same curves keeps the
    larger count."""
    merged: dict[tuple, ExtraSeeds] = {}
    for e in list(old) + list(new):
        key = (e.datasets, e.algorithms, e.models, e.epsilons)
        if key not in merged or e.seeds > merged[key].seeds:
            merged[key] = e
    return tuple(merged.values())


def write_seeds(path: str | Path, exp: Experiment, seeds: dict[str, int], seed: int | None = None,
                extra: tuple[ExtraSeeds, ...] | None = None) -> None:
    """Rewrite the top-level `seeds:` line of the spec file with these counts (a one-line mapping;
    `default` keeps the spec's count; one number when every data set has the same), with `seed`
    its `seed:` line, and with `extra` its `extra_seeds:` line (one flow list, after `seeds:` when
    the spec has none), leaving every other line as it is."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if extra is not None:
        line = "extra_seeds: [" + ", ".join(e.to_yaml() for e in extra) + "]   # the curves `dpbench decide` extended"
        text, count = re.subn(r"(?m)^extra_seeds:.*$", line if extra else "", text, count=1)
        if count == 0 and extra:
            text, count = re.subn(r"(?m)^(seeds:.*)$", lambda m: m.group(1) + "\n" + line, text, count=1)
    if seed is not None and seed != exp.seed:
        text, count = re.subn(r"(?m)^seed:.*$", f"seed: {int(seed)}   # the confirmatory seed stream of "
                                                 f"results/{exp.name}/plan.json", text, count=1)
        if count != 1:
            raise SpecError(f"{path}: no top-level `seed:` line to rewrite")
    default = len(exp.seeds)
    every = {**current_seeds(exp), **seeds}
    if len(set(every.values())) == 1:
        default = next(iter(every.values()))
    extra = {k: v for k, v in sorted(seeds.items()) if v != default}
    value = str(default) if not extra else \
        "{" + ", ".join([f"default: {default}"] + [f"{_key(k)}: {v}" for k, v in extra.items()]) + "}"
    new, count = re.subn(r"(?m)^seeds:.*$", f"seeds: {value}", text, count=1)
    if count != 1:
        raise SpecError(f"{path}: no top-level `seeds:` line to rewrite")
    spec_mod.from_dict(yaml.safe_load(new), name=exp.name, profile=exp.profile, source=str(path))  # still valid
    atomic_write_text(path, new)


def _key(label: str) -> str:
    return label if re.fullmatch(r"[A-Za-z][A-Za-z0-9 _-]*", label) else '"' + label.replace('"', '\\"') + '"'


__all__ = ["Decision", "Round", "claim_curves", "claim_datasets", "confirmatory", "curve_seeds", "current_seeds", "decide",
           "merge_extra", "seed_keys", "with_seeds", "write_seeds"]
