"""The top-level sections of a spec that are single values or short lists: name and texts, the
seed and the seeds, epsilons, delta, metrics, selection and the L* optimiser's budget, each
checked against its declared constraints (dpbench.core.validation)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dpbench.core.errors import SpecError
from dpbench.core.keys import compile_delta, evaluate_delta
from dpbench.core.validation import Integral, Interval, Mapping, Pair, Real, Sequence, StrOptions, Text, entries, \
    missing, unknown_key, validate
from dpbench.privacy.checks import DELTA, POSITIVE
from dpbench.run.metrics import EQUIVALENCE_MARGINS, LEDGER_QUANTITIES, METRICS, SELECTION_METRICS
from dpbench.spec.components import Component

TOP_KEYS = ("name", "description", "paper", "seed", "seeds", "datasets", "models", "algorithms", "epsilons",
            "delta", "metrics", "selection", "select_per", "figures", "optimum", "audits", "claims", "margins",
            "decide", "extra_seeds", "profiles")
#: `select_per`: hyperparameters selected on each seed's own validation split, or on the mean over seeds
SELECT_PER = ("seed", "pooled")
DECIDE_KEYS = ("looks", "scale")
EXTRA_SEEDS_KEYS = ("datasets", "algorithms", "models", "epsilons", "seeds")
OPTIMUM_DEFAULTS = {"maxiter": 500, "restarts": 2}
#: an experiment's name is the folder of its results
NAME = Text(pattern=r"[^./\\][^/\\]*", what="a folder name: letters, digits, - and _")
EPSILONS = Sequence(POSITIVE, unique=True, what="a non-empty list of distinct numbers > 0")
SEED_COUNT = Interval(Integral, 1, None, closed="left")
SEED_LIST = Sequence(Interval(Integral, 0, None, closed="left"), unique=True,
                     what="a non-empty list of distinct integers >= 0")
SEED_MAPPING = Mapping("a mapping such as {default: 5, Iris: 50}")
DELTA_EXPRESSION = Text(what="an expression of n such as 1/n")


def text(spec: dict, key: str, default: str = "") -> str:
    """A free-text key (`description`, `paper`, ...); `default` when absent or null."""
    value = validate(key, spec.get(key), [Text(empty=True), None])
    return default if value is None else value


def integer(value: Any, path: str, minimum: int | None = None) -> int:
    """An integer (a YAML int, not 2.0) >= minimum."""
    return validate(path, value, Interval(Integral, minimum, None, closed="left"))


def seeds(value: Any, path: str = "seeds") -> tuple[int, ...]:
    """A count N (repetitions 0..N-1) or a list of distinct seeds >= 0."""
    out = validate(path, value, [SEED_COUNT, SEED_LIST] + ([SEED_MAPPING] if path == "seeds" else []))
    return tuple(range(out)) if isinstance(out, int) else out


def seed_plan(value: Any, datasets: tuple[Component, ...]
              ) -> tuple[tuple[int, ...], tuple[tuple[str, tuple[int, ...]], ...]]:
    """`seeds:` -> (default repetitions, (dataset label, repetitions) where they differ).

    A mapping names datasets by label, by sweep panel (every entry of a `sweep:`) or by dataset
    name, the most specific first (label, then panel, then name); `default` covers the others.
    The entries of one sweep keep one count: their points are paired by seed along n or d.
    """
    if not isinstance(value, dict):
        return seeds(value), ()
    if "default" not in value:
        raise SpecError("seeds: a mapping needs 'default' (the seeds of every dataset it does not name), "
                        "e.g. {default: 5, Iris: 50}")
    panels = list(dict.fromkeys(c.panel or c.label for c in datasets))
    known = set(panels) | {c.label for c in datasets} | {c.name for c in datasets}
    names = [n for n in dict.fromkeys(c.name for c in datasets) if n not in panels]
    choices = ", ".join(panels) + (f"; names: {', '.join(names)}" if names else "") if datasets else "none"
    parsed: dict[Any, tuple[int, ...]] = {}
    for key, count in value.items():
        if key != "default" and key not in known:
            raise SpecError(f"seeds: unknown dataset {key!r} (datasets: {choices})")
        parsed[key] = seeds(count, f"seeds.{key}")
    default = parsed["default"]
    reps = {c.label: next((parsed[k] for k in (c.label, c.panel, c.name) if k in parsed), default)
            for c in datasets}
    for c in datasets:
        if c.panel and c.panel != c.label and reps[c.label] != reps[next(
                d.label for d in datasets if d.panel == c.panel)]:
            key = next(d.label for d in datasets if d.panel == c.panel and d.label in parsed)
            raise SpecError(f"seeds.{key}: the entries of the sweep {c.panel!r} need the same seeds (their points "
                            f"are paired by seed); give the count to {c.panel!r}")
    return default, tuple((label, r) for label, r in reps.items() if r != default)


def epsilons(value: Any, required: bool, path: str = "epsilons") -> tuple[float, ...]:
    """The privacy budgets, sorted; () when absent and not `required`."""
    if value is None:
        if required:
            raise missing(path, "list the privacy budgets, e.g. [0.1, 0.5, 1, 2]")
        return ()
    return tuple(sorted(validate(path, value, EPSILONS)))


def delta(value: Any) -> str | float:
    """A number in (0, 1) (`dpbench.privacy.checks.DELTA`), or an expression of n made only of
    what core.keys.compile_delta accepts.

    An expression's value depends on the training size n of each dataset, known once the data
    are loaded: pipeline.preflight checks it there, before any cell runs (a value probed at some
    other n here would refuse expressions such as 1/(n-400) that are fine at the real n). A
    constant expression is checked here."""
    value = validate("delta", value, [DELTA, DELTA_EXPRESSION])
    if isinstance(value, str):
        try:
            if not compile_delta(value).uses_n:
                validate("delta", evaluate_delta(value, 0), DELTA)
        except SpecError:
            raise
        except ValueError as exc:
            raise SpecError(f"delta: {exc}") from None
    return value


def selection(value: Any, metrics: tuple[str, ...]) -> str | dict | None:
    """None (each metric by its natural validation score), one score for all, or metric -> score."""
    score = StrOptions(SELECTION_METRICS)
    value = validate("selection", value, [score, Mapping("a mapping metric -> one of them"), None])
    if not isinstance(value, dict):
        return value
    for metric, by in value.items():
        if metric not in metrics:
            raise SpecError(f"selection.{metric}: not among this experiment's metrics ({', '.join(metrics)})")
        validate(f"selection.{metric}", by, score)
    return dict(value)


def select_per(value: Any) -> str:
    """`select_per: seed` (default: each seed selects its own hyperparameters) or `pooled`."""
    return validate("select_per", "seed" if value is None else value, StrOptions(SELECT_PER),
                    note="where hyperparameters are selected")


def decide(value: Any, datasets: tuple[Component, ...], strict: bool = True
           ) -> tuple[tuple[int, ...], tuple[tuple[str, int], ...]]:
    """`decide: {looks: [5, 10, 20, 40], scale: {Iris: 10}}`: the seed counts at which `dpbench
    decide` tests the claims (strictly increasing, the first >= 2; the last is the most it runs)
    and, per data set label, a factor on them (a data set run with 10x the seeds of the others).
    Returns ((), ()) without the section. `strict`: a scale for a data set the experiment does not
    have is an error (a profile that drops data sets passes strict=False: those entries are unused)."""
    value = validate("decide", value, [Mapping("a mapping with keys looks, scale"), None])
    if value is None:
        return (), ()
    for key in value:
        if key not in DECIDE_KEYS:
            raise unknown_key("decide", key, DECIDE_KEYS)
    if value.get("looks") is None:
        raise missing("decide.looks", "the seed counts at which claims are tested, e.g. [5, 10, 20, 40]")
    looks = validate("decide.looks", value["looks"], Sequence(Interval(Integral, 2, None, closed="left"),
                                                              what="a list of seed counts >= 2"))
    if any(b <= a for a, b in zip(looks, looks[1:])):
        raise SpecError(f"decide.looks: must be strictly increasing, got {list(looks)}")
    scale = validate("decide.scale", value.get("scale"), [Mapping("a mapping data set label -> factor"), None]) or {}
    labels = {ds.label for ds in datasets} | {ds.panel for ds in datasets if ds.panel}
    for label, factor in scale.items():
        if strict and label not in labels:
            raise SpecError(f"decide.scale.{label}: not a data set label of this experiment "
                            f"({', '.join(sorted(labels))})")
        integer(factor, f"decide.scale.{label}", minimum=1)
    return tuple(int(n) for n in looks), tuple(sorted((str(k), int(v)) for k, v in scale.items()))


def margins(value: Any) -> tuple[tuple[str, float], ...]:
    """`margins: {estimation_error: 0.05}`: the experiment's margin rule, per metric the smallest
    difference that counts as meaningful (> 0, metric units), over dpbench's defaults
    (run.metrics.EQUIVALENCE_MARGINS); every directional claim on the metric carries it as its "no
    difference beyond m" margin (dpbench.analysis.claims). A ledger quantity a claim reads
    (run.metrics.LEDGER_QUANTITIES) has no default and takes its margin here."""
    value = validate("margins", value, [Mapping("a mapping metric -> margin, e.g. {accuracy: 0.01}"), None]) or {}
    for metric, margin in value.items():
        if metric not in METRICS and metric not in LEDGER_QUANTITIES:
            raise unknown_key("margins", metric, tuple(METRICS) + tuple(LEDGER_QUANTITIES))
        validate(f"margins.{metric}", margin, POSITIVE)
    return tuple(sorted({**EQUIVALENCE_MARGINS, **{k: float(v) for k, v in value.items()}}.items()))


@dataclass(frozen=True)
class ExtraSeeds:
    """One entry of `extra_seeds:`: the curves (algorithm labels on these data sets and models, at
    epsilons in a range) that run `seeds` repetitions however many their data sets have (the
    cells `dpbench decide` adds for the claims still undecided, and only for them)."""

    datasets: tuple[str, ...]
    algorithms: tuple[str, ...]
    models: tuple[str, ...] = ()  # () = every model
    epsilons: tuple[float, float] | None = None  # None = every epsilon
    seeds: int = 0

    def covers(self, algorithm: str, dataset: Component, model: str, epsilon: float | None) -> bool:
        """Whether the cell of this algorithm label, data set entry, model label and epsilon (None:
        non-private) is one of the entry's curves."""
        if algorithm not in self.algorithms:
            return False
        if not {dataset.label, dataset.panel or dataset.label} & set(self.datasets):
            return False
        if self.models and model not in self.models:
            return False
        if epsilon is None or self.epsilons is None:
            return True
        low, high = self.epsilons
        return low * (1 - 1e-9) <= epsilon <= high * (1 + 1e-9)

    def to_yaml(self) -> str:
        """The entry as a one-line YAML flow mapping (what `dpbench decide --write` writes)."""
        def labels(values: tuple[str, ...]) -> str:
            return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in values) + "]"

        parts = [f"datasets: {labels(self.datasets)}", f"algorithms: {labels(self.algorithms)}"]
        if self.models:
            parts.append(f"models: {labels(self.models)}")
        if self.epsilons is not None:
            parts.append(f"epsilons: [{self.epsilons[0]:g}, {self.epsilons[1]:g}]")
        return "{" + ", ".join(parts + [f"seeds: {self.seeds}"]) + "}"


def extra_seeds(value: Any, datasets: tuple[Component, ...], algorithms: tuple, models: tuple[Component, ...],
                strict: bool = True) -> tuple[ExtraSeeds, ...]:
    """`extra_seeds: [{datasets: [Adult], algorithms: [DP-SGD, PIDP-SGD (r = 1)], epsilons: [1, 3],
    seeds: 40}]`: curves that run more repetitions than their data sets' `seeds:` (each a list of
    labels; models and epsilons optional: every one). An algorithm with private selection
    (`tuning:`) cannot take extra seeds (its searches are per data set). `strict`: a label the
    experiment does not have is an error (a profile that drops some passes strict=False)."""
    known = {"datasets": {c.label for c in datasets} | {c.panel for c in datasets if c.panel},
             "algorithms": {a.label for a in algorithms}, "models": {m.label for m in models}}
    tuned = {a.label for a in algorithms if getattr(a, "tuning", None) is not None}
    out = []
    for where, entry in entries("extra_seeds", value, EXTRA_SEEDS_KEYS, "a list of {datasets, algorithms, seeds}"):
        lists = {}
        for key in ("datasets", "algorithms", "models"):
            given = entry.get(key)
            if given is None:
                if key != "models":
                    raise missing(f"{where}.{key}", "a list of labels")
                lists[key] = ()
                continue
            labels = tuple(validate(f"{where}.{key}", given, Sequence(Text(), what="a non-empty list of labels")))
            unknown = [x for x in labels if x not in known[key]]
            if strict and unknown:
                raise SpecError(f"{where}.{key}: unknown {unknown[0]!r} (the experiment's: "
                                f"{', '.join(sorted(known[key]))})")
            lists[key] = labels
        if set(lists["algorithms"]) & tuned:
            raise SpecError(f"{where}.algorithms: {sorted(set(lists['algorithms']) & tuned)[0]!r} selects privately "
                            f"(tuning:); its searches run per data set, so it takes its data set's seeds")
        if entry.get("seeds") is None:
            raise missing(f"{where}.seeds", "the repetitions these curves run")
        count = integer(entry["seeds"], f"{where}.seeds", minimum=2)
        eps = entry.get("epsilons")
        out.append(ExtraSeeds(lists["datasets"], lists["algorithms"], lists["models"],
                              None if eps is None else tuple(validate(f"{where}.epsilons", eps,
                                                                      Pair(Interval(Real)))), count))
    return tuple(out)


def optimum(value: Any) -> tuple[tuple[str, int], ...]:
    """The L-BFGS budget of the L* estimate, OPTIMUM_DEFAULTS filled in."""
    value = validate("optimum", value, [Mapping("a mapping such as {restarts: 2, maxiter: 500}"), None]) or {}
    for key in value:
        if key not in OPTIMUM_DEFAULTS:
            raise unknown_key("optimum", key, OPTIMUM_DEFAULTS)
    merged = {**OPTIMUM_DEFAULTS, **value}
    return tuple(sorted((k, integer(v, f"optimum.{k}", minimum=1)) for k, v in merged.items()))


def metrics(value: Any) -> tuple[str, ...]:
    """The metrics an experiment tabulates (a name or a non-empty list of names)."""
    if isinstance(value, str):
        value = [value]
    return validate("metrics", value, Sequence(StrOptions(METRICS), what=f"a non-empty list of {', '.join(METRICS)}"))


__all__ = ["DECIDE_KEYS", "DELTA_EXPRESSION", "EPSILONS", "SELECT_PER", "decide", "select_per",
           "NAME", "OPTIMUM_DEFAULTS", "SEED_COUNT", "SEED_LIST", "TOP_KEYS", "delta",
           "epsilons", "ExtraSeeds", "EXTRA_SEEDS_KEYS", "extra_seeds", "integer", "margins", "metrics", "optimum",
           "seed_plan", "seeds", "selection", "text"]
