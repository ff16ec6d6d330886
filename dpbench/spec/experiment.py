"""Experiment YAML -> validated `Experiment` -> list of `Cell`s.

Schema (every key but datasets/models/algorithms/epsilons is optional; with `audits` those too):

    name: quickstart                 # default: the file's stem; results go to results/<name>/
    description: ...
    paper: ...                       # what the experiment reproduces
    seed: 0                          # experiment seed (all randomness derives from it)
    seeds: 3                         # repetitions: a count (0..N-1) or a list of ints, or per dataset
                                     #   {default: 5, Iris: 50, breast_cancer: 20} (keys: dataset labels,
                                     #   sweep panels or names; seed r is the same cells whatever the count)
    datasets:                        # a name, or {name, options, label}
      - breast_cancer
      - {name: adult, options: {n: 10000}, label: adult-10k}
      - {name: synthetic_population, label: pool, sweep: {n: [250, 1000, 4000]}}
                                     # sweep: one entry per value (labels "pool n=250", ...), drawn
                                     #   in one panel "pool" by figures with x: n
      - {name: credit_card, optional: true}   # user-supplied file: skipped with a notice when absent
    models: [logreg]                 # a name, or {name, options, label}
    algorithms:                      # {name, params, label}; a list value is a grid, selected
      - name: dpsgd                  #   per (algorithm, dataset, model, epsilon) on validation
        params: {lr: [0.1, 1.0], epochs: 2}
        models: [logreg]             # optional: only these model (or dataset) labels
        epsilons: [0.1, 1]           # optional: this entry's budgets instead of the experiment's
        tuning: {mean_runs: 10}      # optional: PRIVATE selection instead (Papernot-Steinke random
                                     #   stopping: K ~ truncated negative binomial runs, each a random
                                     #   combination with its own noise, the best by a noisy validation
                                     #   score); keys mean_runs (E[K]), eta (0), score (val_accuracy or
                                     #   val_loss), score_noise (10: the score's noise multiplier is
                                     #   score_noise/epsilon), loss_bound
                                     #   (1, per-row clip of a val_loss score). Its curve is drawn at
                                     #   the end-to-end epsilon of tuning + training.
    epsilons: [0.1, 1]               # targets for private algorithms (> 0)
    delta: 1/n                       # a number in (0,1) or an expression of n (training size)
    metrics: [accuracy, optimality_gap]
    selection: val_loss              # default: accuracy by val_accuracy, gaps and losses by val_loss;
                                     # or one score for all, or a mapping {metric: val_accuracy|val_loss}
    figures:                         # default: one metric-over-epsilon figure per metric
      - {name: accuracy, kind: metric_over_epsilon, metric: accuracy, title: ...}
      - {name: small, metric: accuracy, datasets: [iris]}   # only these dataset labels/panels
      - {name: dpsgd, metric: accuracy, algorithms: [DP-SGD], models: [logreg]}  # only these algorithm/model labels
      - {name: rate, kind: metric_over_n, metric: excess_population_risk, reference: dpsco_rate}
      - {name: over-d, kind: metric_over_d, metric: estimation_error}        # a dataset swept over d
      - {name: iters, kind: metric_over_iterations, metric: estimation_error}  # needs trace_every
    optimum: {restarts: 2, maxiter: 500}   # L-BFGS budget of the L* estimate for non-convex models
    audits:                          # distinguishing games (dpbench.audit.multi_run); with audits, the grid
      dataset: breast_cancer         #   keys above may be left out. Base data of the canary recipe
      rows: 400                      #   (this many training rows), model, trials per side, alpha
      model: logreg                  #   (1 - confidence), delta and epsilons are defaults an entry
      trials: 500                    #   may override (canary, model, trials, epsilons, threat, threshold)
      epsilons: [0.5, 1, 2, 4]
      threat: final_model            #   or all_updates: the adversary sees every noisy step
      one_run: {canaries: 1000}      #   + a one-run audit per entry and epsilon (entry: one_run: false)
      algorithms:
        - {name: dpsgd, label: DP-SGD, params: {epochs: 5}, canary: spare_feature}
        - {name: dpsgd, label: DP-SGD (all updates), canary: gradient_canary, threat: all_updates}
    claims:                          # paper claims as tested relations (dpbench.analysis.claims; `dpbench claims`)
      - {id: acc-above, source: "paper, §7", quote: "...", kind: comparison, metric: accuracy,
         a: PIDP-SGD, b: DP-SGD, relation: greater, epsilons: [0.1, 3], per: point}
    profiles:                        # named overrides of top-level keys (dicts merge, lists replace)
      ci: {seeds: 2, epsilons: [0.5, 2]}   # `seeds: 2` sets every dataset's count; a seeds mapping
                                     #   merges with the base's (an int or list there is its default)

YAML is read with the `yaml.safe_load` loader only, with a key repeated in one mapping refused. Every validation error is one line that starts with
the YAML path and says what to do (`algorithms[2].params.lr: must be > 0, got -1`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from dpbench.core.errors import DpbenchError, SpecError
from dpbench.core.keys import Cell, compile_delta, digest, evaluate_delta, seed_from
from dpbench.core.registry import resolve_paths
from dpbench.figures.kinds import FIGURES
from dpbench.run.metrics import METRICS, SELECTION_METRICS

TOP_KEYS = ("name", "description", "paper", "seed", "seeds", "datasets", "models", "algorithms", "epsilons",
            "delta", "metrics", "selection", "figures", "optimum", "audits", "claims", "profiles")
OPTIMUM_DEFAULTS = {"maxiter": 500, "restarts": 2}
SWEEP_KEYS = ("n", "d")  # dataset options a `sweep:` may vary
DEFAULT_PROFILE = "full"
#: A run of more cells than this needs `--allow-large`: the largest paper experiment has 4,590
#: cells (inputpert, full profile), so a grid beyond it is more often a typo (a long list where a
#: short one was meant) than a plan, and its L* phase and cells would run for hours.
MAX_CELLS = 50_000


@dataclass(frozen=True)
class Component:
    """A dataset or a model with its options and its label in tables and figures.

    `panel` groups the components one `sweep:` entry expands into (default: the label).
    """

    name: str
    options: tuple[tuple[str, Any], ...]
    label: str
    panel: str = ""
    optional: bool = False  # a user-supplied data file: skip (with a notice) when absent
    base: str = field(default="", compare=False)  # folder of the YAML: relative file paths in options start there
    files_digest: str | None = None  # content of the files its options name (the csv data set): part of the key


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    label: str
    grid: tuple[tuple[tuple[str, Any], ...], ...]  # every hyperparameter combination, defaults filled in
    private: bool
    models: tuple[str, ...] | None = None  # restrict to these model labels (None: all)
    datasets: tuple[str, ...] | None = None  # restrict to these dataset labels (None: all)
    tuning: tuple[tuple[str, Any], ...] | None = None  # private selection settings (`_tuning`), None: validation
    epsilons: tuple[float, ...] | None = None  # this entry's budgets (None: the experiment's `epsilons`)
    plugin: str | None = None  # where a plugin algorithm is loaded from (dpbench.run.plugins.resolve), None: built-in
    plugin_digest: str | None = None  # digest of the plugin's source (dpbench.run.plugins.fingerprint)

    def applies_to(self, dataset: Component, model: Component) -> bool:
        return (self.models is None or model.label in self.models) and \
            (self.datasets is None or dataset.label in self.datasets or dataset.panel in self.datasets)


@dataclass(frozen=True)
class FigureSpec:
    name: str
    kind: str
    metric: str
    title: str
    options: tuple[tuple[str, Any], ...] = ()  # the figure kind's own options (dpbench.figures.kinds), e.g. reference
    datasets: tuple[str, ...] | None = None  # only these dataset labels / panels (None: all)
    algorithms: tuple[str, ...] | None = None  # only these algorithm labels (None: all)
    models: tuple[str, ...] | None = None  # only these model labels (None: all)

    @property
    def reference(self) -> str | None:
        return dict(self.options).get("reference")


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    paper: str
    profile: str
    seed: int
    seeds: tuple[int, ...]  # the repetitions of every dataset without its own entry in `dataset_seeds`
    datasets: tuple[Component, ...]
    models: tuple[Component, ...]
    algorithms: tuple[AlgorithmSpec, ...]
    epsilons: tuple[float, ...]
    delta: str | float
    metrics: tuple[str, ...]
    selection: str | dict | None
    figures: tuple[FigureSpec, ...]
    optimum: tuple[tuple[str, int], ...]
    source: str
    resolved: dict  # the spec after the profile was applied (hashed into the manifest)
    audits: tuple = ()  # dpbench.audit.setup.AuditSetup per (audited algorithm, epsilon)
    claims: tuple = ()  # dpbench.analysis.claims.Claim per claim of the `claims:` block
    # (dataset label, its repetitions) for each dataset whose seeds differ from `seeds` (a `seeds:`
    # mapping); use `reps_for` / `seeds_for`
    dataset_seeds: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def spec_hash(self) -> str:
        return digest(self.resolved)

    def reps_for(self, dataset: Component | str) -> tuple[int, ...]:
        """The repetitions (cell `rep` values) of a dataset entry, or of a dataset label."""
        label = dataset.label if isinstance(dataset, Component) else dataset
        return dict(self.dataset_seeds).get(label, self.seeds)

    def seeds_for(self, dataset: Component | str) -> int:
        """The number of seeds of a dataset entry, or of a dataset label."""
        return len(self.reps_for(dataset))

    def seeds_summary(self) -> str:
        """The seeds in one line: `5`, or per dataset `{default: 5, Breast Cancer: 50, Iris: 50}`
        (lists of seed values where the spec gave lists)."""
        def one(reps: tuple[int, ...]) -> str:
            return str(len(reps)) if reps == tuple(range(len(reps))) else "[" + ", ".join(map(str, reps)) + "]"

        if not self.dataset_seeds:
            return one(self.seeds)
        return "{" + ", ".join([f"default: {one(self.seeds)}"] +
                               [f"{label}: {one(reps)}" for label, reps in self.dataset_seeds]) + "}"

    def budgets(self, algo: AlgorithmSpec) -> tuple[float, ...]:
        """The epsilons a private algorithm entry runs at: its own `epsilons`, else the experiment's."""
        return algo.epsilons if algo.epsilons is not None else self.epsilons

    def n_cells(self, skip_datasets: frozenset[str] = frozenset()) -> int:
        """len(self.cells(skip_datasets)), counted without building the grid (a random search's
        runs are counted by drawing them)."""
        total = 0
        for algo, ds, model in itertools.product(self.algorithms, self.datasets, self.models):
            if ds.label in skip_datasets or not algo.applies_to(ds, model):
                continue
            if algo.tuning is None:
                total += len(algo.grid) * (len(self.budgets(algo)) if algo.private else 1) * self.seeds_for(ds)
            else:
                total += sum(len(self.search_runs(algo, ds, model, eps)) for eps in self.budgets(algo))
        return total

    def search_runs(self, algo: AlgorithmSpec, ds: Component, model: Component, eps: float
                    ) -> list[tuple[int, int, int]]:
        """The runs of private selection for one (algorithm, dataset, model, epsilon) as (rep, draw,
        grid index): draw j = 1..K of each seed's random search (`tuning_draws`), then an accounting
        run (draw 0, first seed) of every combination no search drew, so that the selection's
        guarantee can cover the whole grid. Seeds are the dataset's (`reps_for`)."""
        reps = self.reps_for(ds)
        runs = [(rep, j, i) for rep in reps
                for j, i in enumerate(tuning_draws(algo, ds, model, eps, self.seed, rep), 1)]
        drawn = {i for _, _, i in runs}
        return runs + [(reps[0], 0, i) for i in range(len(algo.grid)) if i not in drawn]

    def cells(self, skip_datasets: frozenset[str] = frozenset()) -> list[Cell]:
        """The grid: algorithms x hyperparameter combinations x datasets x models x epsilons x seeds
        (the dataset's: `reps_for`).

        An algorithm with `tuning` (private selection) has the runs of its random searches instead
        (`search_runs`). `skip_datasets`: labels of optional datasets whose files are absent
        (pipeline.preflight).
        """
        out: list[Cell] = []
        for algo, ds, model in itertools.product(self.algorithms, self.datasets, self.models):
            if ds.label in skip_datasets or not algo.applies_to(ds, model):
                continue

            def cell(params, eps, rep, draw=None):
                return Cell(algorithm=algo.name, params=params, dataset=ds.name, dataset_options=ds.options,
                            model=model.name, model_options=model.options, epsilon=eps, delta=self.delta,
                            rep=rep, seed=self.seed, optimum=self.optimum, label=algo.label,
                            dataset_label=ds.label, model_label=model.label, dataset_panel=ds.panel or ds.label,
                            draw=draw, tuning=algo.tuning, plugin=algo.plugin, plugin_digest=algo.plugin_digest,
                            dataset_base=ds.base, dataset_files=ds.files_digest)

            if algo.tuning is None:
                out.extend(cell(params, eps, rep) for rep in self.reps_for(ds) for params in algo.grid
                           for eps in (self.budgets(algo) if algo.private else (None,)))
            else:
                out.extend(cell(algo.grid[i], eps, rep, draw=j) for eps in self.budgets(algo)
                           for rep, j, i in self.search_runs(algo, ds, model, eps))
        return out


# ---- loading ---------------------------------------------------------------------------------
#: the settings of an algorithm's `tuning:` mapping and their defaults (PS22 random stopping)
TUNING_DEFAULTS: dict[str, Any] = {"mean_runs": 10.0, "eta": 0.0, "score": "val_accuracy", "score_noise": 10.0,
                                   "loss_bound": 1.0}
TUNING_SCORES = ("val_accuracy", "val_loss")


def tuning_draws(algo: AlgorithmSpec, ds: Component, model: Component, eps: float, seed: int, rep: int) -> list[int]:
    """The grid indices of one random search of private selection, in run order: K ~ D_{eta,gamma}
    (dpbench.privacy.tuning) runs, each a combination drawn uniformly. Data-independent: a hash of
    (experiment seed, repetition, algorithm, grid, dataset, model, epsilon, settings)."""
    from dpbench.privacy.tuning import run_count_distribution

    settings = dict(algo.tuning or ())
    runs = run_count_distribution(settings["mean_runs"], settings["eta"])
    rng = np.random.default_rng(np.random.SeedSequence(seed_from(
        "tuning", seed, rep, algo.name, [dict(p) for p in algo.grid], ds.name, dict(ds.options), model.name,
        dict(model.options), eps, settings)))
    k = runs.sample(rng)
    return [int(i) for i in rng.integers(0, len(algo.grid), size=k)]


def _tuning(value: Any, path: str, private: bool, grid_size: int) -> tuple[tuple[str, Any], ...] | None:
    """An algorithm's `tuning:` mapping checked, defaults filled in, plus the grid size."""
    if value is None:
        return None
    if not private:
        raise SpecError(f"{path}: private selection needs a private algorithm; a non-private baseline is "
                        f"selected on validation data (remove `tuning`)")
    if not isinstance(value, dict):
        raise SpecError(f"{path}: must be a mapping such as {{mean_runs: 10, eta: 0, score: val_accuracy, "
                        f"score_noise: 10}}")
    unknown = sorted(set(value) - set(TUNING_DEFAULTS))
    if unknown:
        raise SpecError(f"{path}.{unknown[0]}: unknown key; allowed: {', '.join(TUNING_DEFAULTS)}")
    settings = {**TUNING_DEFAULTS, **value}
    for key in ("mean_runs", "eta", "score_noise", "loss_bound"):
        number = settings[key]
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            raise SpecError(f"{path}.{key}: must be a number, got {number!r}")
        settings[key] = float(number)
    if not settings["mean_runs"] > 1:
        raise SpecError(f"{path}.mean_runs: must be > 1 (the expected number of runs; K >= 1), got {settings['mean_runs']:g}")
    if settings["mean_runs"] > 1000:
        raise SpecError(f"{path}.mean_runs: must be <= 1000, got {settings['mean_runs']:g}")
    if not settings["eta"] >= 0:
        raise SpecError(f"{path}.eta: must be >= 0 (0: logarithmic, 1: geometric number of runs), got {settings['eta']:g}")
    for key in ("score_noise", "loss_bound"):
        if not settings[key] > 0:
            raise SpecError(f"{path}.{key}: must be > 0, got {settings[key]:g}")
    if settings["score"] not in TUNING_SCORES:
        raise SpecError(f"{path}.score: must be one of {', '.join(TUNING_SCORES)}, got {settings['score']!r}")
    return tuple(sorted({**settings, "grid_size": grid_size}.items()))


def check_size(exps: list[Experiment], allow_large: bool) -> int:
    """The number of cells of these experiments; SpecError above MAX_CELLS unless allow_large."""
    total = sum(exp.n_cells() for exp in exps)
    if total > MAX_CELLS and not allow_large:
        parts = ", ".join(f"{exp.name}[{exp.profile}] {exp.n_cells():,}" for exp in exps)
        raise SpecError(f"{total:,} cells ({parts}) is more than {MAX_CELLS:,}; check the grid (every list in "
                        f"params, epsilons, seeds and sweeps multiplies it), or pass --allow-large to run it")
    return total


def load(path: str | Path, profile: str = DEFAULT_PROFILE) -> Experiment:
    """Read, profile and validate an experiment file; raise SpecError (one line) on any problem."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: experiment file not found; give the path of a YAML file such as "
                        f"experiments/quickstart.yaml")
    try:
        raw = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # safe_load, duplicate keys refused
    except _DuplicateKey as exc:
        raise SpecError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{path}: not valid YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a text file; give an experiment YAML file") from None
    return from_dict(_yaml11_floats(raw), name=path.stem, profile=profile, source=str(path))


class _DuplicateKey(Exception):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load's loader, except that a key repeated in one mapping is an error (plain YAML
    keeps the last value silently, so a second `epsilons:` would replace the first)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # merge keys (<<) may be overridden by design; other keys are scalars in a spec
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in seen:
                    where = f"lines {seen[key]} and {line}" if seen[key] != line else f"line {line}"
                    raise _DuplicateKey(f"key {key!r} appears twice in one mapping ({where}); keep one")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


_EXPONENT_FLOAT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def _yaml11_floats(value: Any) -> Any:
    """safe_load follows YAML 1.1, where `1e-5` (no dot) is a string; read such strings as floats."""
    if isinstance(value, str) and _EXPONENT_FLOAT.match(value):
        return float(value)
    if isinstance(value, list):
        return [_yaml11_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: _yaml11_floats(v) for k, v in value.items()}
    return value


def apply_profile(raw: dict, profile: str) -> dict:
    profiles = raw.get("profiles") or {}
    if not isinstance(profiles, dict):
        raise SpecError("profiles: must be a mapping of profile name -> overrides")
    if profile not in profiles:
        if profile == DEFAULT_PROFILE:
            return raw
        known = ", ".join(sorted(set(profiles) | {DEFAULT_PROFILE}))
        raise SpecError(f"--profile: unknown profile {profile!r}; this experiment has {known}")
    overrides = profiles[profile]
    if overrides is None:
        return raw
    if not isinstance(overrides, dict):
        raise SpecError(f"profiles.{profile}: must be a mapping of top-level keys to new values")
    for key in overrides:
        if key not in TOP_KEYS or key == "profiles":
            raise SpecError(f"profiles.{profile}.{key}: not an overridable key; use one of "
                            f"{', '.join(k for k in TOP_KEYS if k != 'profiles')}")
    if isinstance(overrides.get("seeds"), dict) and not isinstance(raw.get("seeds"), dict):
        # a per-dataset seeds mapping merges with the base's seeds: a count or list there is its default
        raw = {**raw, "seeds": {"default": raw.get("seeds", 1)}}
    return _merge(raw, overrides)  # an int or list `seeds` replaces a base mapping: every dataset gets it


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base.get(k), v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def from_dict(raw: Any, *, name: str = "experiment", profile: str = DEFAULT_PROFILE, source: str = "<dict>") -> Experiment:
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: the top level must be a mapping with keys such as datasets, models, "
                        f"algorithms, epsilons")
    for key in raw:
        if key not in TOP_KEYS:
            raise SpecError(f"{key}: unknown key; allowed top-level keys are {', '.join(TOP_KEYS)}")
    spec = apply_profile(raw, profile)
    for key in ("datasets", "models", "algorithms"):
        if key not in spec and "audits" not in spec:  # an audit-only experiment has no grid
            raise SpecError(f"{key}: missing; list at least one")

    exp_name = _string(spec, "name", default=name)
    if not exp_name or any(c in exp_name for c in "/\\") or exp_name.startswith("."):
        raise SpecError(f"name: {exp_name!r} cannot be a folder name; use letters, digits, - and _")
    grid = all(key in spec for key in ("datasets", "models", "algorithms"))
    base = "" if source.startswith("<") else str(Path(source).resolve().parent)  # relative paths start there
    datasets = _components(spec["datasets"], "datasets", _dataset_check, sweepable=True, base=base) if grid else ()
    models = _components(spec["models"], "models", _model_check) if grid else ()
    algorithms = _algorithms(spec["algorithms"], datasets, models, base) if grid else ()
    any_private = any(a.private and a.epsilons is None for a in algorithms)
    epsilons = _epsilons(spec.get("epsilons"), required=any_private)
    delta = _delta(spec.get("delta", "1/n"))
    metrics = _metrics(spec.get("metrics", ["accuracy", "optimality_gap"]))
    selection = _selection(spec.get("selection"), metrics)
    figures = _figures(spec.get("figures"), metrics, datasets, algorithms, models)
    if grid:
        _check_producible(spec.get("metrics"), metrics, figures, datasets, models, algorithms)
    seed = _int(spec.get("seed", 0), "seed", minimum=0)
    seeds, dataset_seeds = _seed_plan(spec.get("seeds", 1), datasets)
    audits = _audits(spec.get("audits"), seed, base)
    return Experiment(
        name=exp_name, description=_string(spec, "description"), paper=_string(spec, "paper"), profile=profile,
        seed=seed, seeds=seeds, datasets=datasets, models=models, algorithms=algorithms, epsilons=epsilons,
        delta=delta, metrics=metrics, selection=selection, figures=figures, optimum=_optimum(spec.get("optimum")),
        source=source, audits=audits, claims=_claims(spec.get("claims")), dataset_seeds=dataset_seeds,
        resolved={k: v for k, v in spec.items() if k != "profiles"},
    )


# ---- pieces ----------------------------------------------------------------------------------
def _claims(value: Any) -> tuple:
    """`claims:` -> dpbench.analysis.claims.Claim per entry (the relations are checked against the curves
    when they are evaluated: `dpbench claims`)."""
    from dpbench.analysis.claims import parse_claims

    return parse_claims(value)


def _string(spec: dict, key: str, default: str = "") -> str:
    value = spec.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise SpecError(f"{key}: must be a string, got {value!r}")
    return value


def _int(value: Any, path: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{path}: must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise SpecError(f"{path}: must be >= {minimum}, got {value}")
    return value


def _seeds(value: Any, path: str = "seeds") -> tuple[int, ...]:
    """A count N (repetitions 0..N-1) or a list of distinct seeds >= 0."""
    if isinstance(value, list):
        if not value:
            raise SpecError(f"{path}: the list is empty; give a count such as 3 or a list of integers")
        seeds = tuple(_int(v, f"{path}[{i}]", minimum=0) for i, v in enumerate(value))
        if len(set(seeds)) != len(seeds):
            raise SpecError(f"{path}: repeated values; each repetition needs its own seed")
        return seeds
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        also = " (or a list of integers, or a mapping such as {default: 5, Iris: 50})" if path == "seeds" else ""
        raise SpecError(f"{path}: must be an integer >= 1{also}, got {value!r}")
    return tuple(range(value))


def _seed_plan(value: Any, datasets: tuple[Component, ...]
               ) -> tuple[tuple[int, ...], tuple[tuple[str, tuple[int, ...]], ...]]:
    """`seeds:` -> (default repetitions, (dataset label, repetitions) where they differ).

    A mapping names datasets by label, by sweep panel (every entry of a `sweep:`) or by dataset
    name, the most specific first (label, then panel, then name); `default` covers the others.
    The entries of one sweep keep one count: their points are paired by seed along n or d.
    """
    if not isinstance(value, dict):
        return _seeds(value), ()
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
        parsed[key] = _seeds(count, f"seeds.{key}")
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


def _entry(item: Any, path: str, allowed: tuple[str, ...]) -> dict:
    if isinstance(item, str):
        return {"name": item}
    if not isinstance(item, dict):
        raise SpecError(f"{path}: must be a name or a mapping with {', '.join(allowed)}, got {item!r}")
    for key in item:
        if key not in allowed:
            raise SpecError(f"{path}.{key}: unknown key; allowed: {', '.join(allowed)}")
    if not isinstance(item.get("name"), str) and not ("plugin" in allowed and "plugin" in item):
        raise SpecError(f"{path}.name: missing or not a string")
    return item


def _options(value: Any, path: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(f"{path}: must be a mapping of option -> value, got {value!r}")
    return value


def _declared(entry: Any, options: dict, path: str) -> None:
    """Check `options` against a registry entry's declared parameters (SpecError `path.options.key: ...`)."""
    try:
        entry.validate(options)
    except ValueError as exc:
        raise SpecError(f"{path}.options.{exc}") from None


def _lookup(registry: Any, name: str, path: str) -> Any:
    try:
        return registry.lookup(name)
    except ValueError as exc:
        raise SpecError(f"{path}.name: {exc}") from None


def _dataset_check(name: str, options: dict, path: str, base: str = "") -> str | None:
    """Check a data set entry; returns the digest of the files its options name (None: none, or
    a file that is absent: loading it will say so), so that an edited file reruns its cells."""
    from dpbench import data

    info = _lookup(data.DATASETS, name, path)
    _declared(info, options, path)
    named = {p.name for p in info.params if p.path}
    files = [Path(v) for k, v in sorted(resolve_paths(info.params, options, base).items()) if k in named and v]
    if not files or not all(f.is_file() for f in files):
        return None
    return digest([hashlib.sha256(f.read_bytes()).hexdigest() for f in files])


def _model_check(name: str, options: dict, path: str, base: str = "") -> None:
    from dpbench import models

    _declared(_lookup(models.MODELS, name, path), options, path)


def _sweep(value: Any, path: str) -> tuple[str, list] | None:
    """`sweep: {n: [..]}` -> ("n", values): one option varied over a list (SWEEP_KEYS)."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) != 1:
        raise SpecError(f"{path}: must be a mapping with one option and its list of values, e.g. {{n: [250, 1000]}}")
    (option, values), = value.items()
    if option not in SWEEP_KEYS:
        raise SpecError(f"{path}.{option}: only {', '.join(SWEEP_KEYS)} can be swept")
    if not isinstance(values, list) or len(values) < 2:
        raise SpecError(f"{path}.{option}: must be a list of at least two values")
    if len(set(map(repr, values))) != len(values):
        raise SpecError(f"{path}.{option}: repeated values")
    return option, values


def _frozen(options: dict) -> tuple[tuple[str, Any], ...]:
    """Options as sorted (name, value) pairs, list values as tuples (hashable; the same JSON in a key)."""
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in options.items()))


def _components(value: Any, key: str, check, sweepable: bool = False, base: str = "") -> tuple[Component, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError(f"{key}: must be a non-empty list")
    out: list[Component] = []
    allowed = ("name", "options", "label", "sweep", "optional") if sweepable else ("name", "options", "label")
    for i, item in enumerate(value):
        path = f"{key}[{i}]"
        entry = _entry(item, path, allowed)
        options = _options(entry.get("options"), f"{path}.options")
        sweep = _sweep(entry.get("sweep"), f"{path}.sweep")
        optional = entry.get("optional", False)
        if not isinstance(optional, bool):
            raise SpecError(f"{path}.optional: must be true or false, got {optional!r}")
        if sweep is not None and sweep[0] in options:
            raise SpecError(f"{path}.sweep.{sweep[0]}: also set in options; give it in one place")
        label = entry.get("label") or entry["name"] + (
            "" if not options else "[" + ",".join(f"{k}={v}" for k, v in sorted(options.items())) + "]")
        if sweep is None:
            files = check(entry["name"], options, path, base)
            out.append(Component(entry["name"], _frozen(options), str(label), str(label), optional, base, files))
            continue
        option, values = sweep
        for j, v in enumerate(values):
            point = {**options, option: v}
            files = check(entry["name"], point, f"{path}.sweep.{option}[{j}]", base)
            out.append(Component(entry["name"], _frozen(point), f"{label} {option}={v}", str(label), optional, base,
                                 files))
    labels = [c.label for c in out]
    if len(set(labels)) != len(labels):
        raise SpecError(f"{key}: two entries share the label {sorted(l for l in labels if labels.count(l) > 1)[0]!r}; "
                        f"give each a distinct label")
    return tuple(out)


def _restriction(value: Any, path: str, components: tuple[Component, ...]) -> tuple[str, ...] | None:
    if value is None:
        return None
    labels = list(dict.fromkeys([c.label for c in components] + [c.panel for c in components if c.panel]))
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise SpecError(f"{path}: must be a non-empty list of labels from {', '.join(labels)}")
    for i, label in enumerate(value):
        if label not in labels:
            raise SpecError(f"{path}[{i}]: {label!r} is not a label of this experiment; choose from {', '.join(labels)}")
    return tuple(value)


def _algorithm_of(entry: dict, path: str, base: str) -> tuple[Any, str | None, str | None]:
    """(AlgorithmInfo, plugin reference, plugin digest) of an algorithm entry: a registered `name`, or
    a `plugin:` reference (a file relative to the YAML's folder, or module:object) loaded now."""
    from dpbench import algorithms
    from dpbench.run import plugins

    reference = entry.get("plugin")
    if reference is None:
        return _lookup(algorithms.REGISTRY, entry["name"], path), None, None
    if not isinstance(reference, str):
        raise SpecError(f"{path}.plugin: must be a reference such as my_method.py:fit or my_package.module:fit, "
                        f"got {reference!r}")
    try:
        canonical = plugins.resolve(reference, base or None)
        info = plugins.load(canonical)
        fingerprint = plugins.fingerprint(canonical)
    except DpbenchError as exc:
        raise SpecError(f"{path}.plugin: {exc}") from None
    if not isinstance(info, algorithms.AlgorithmInfo):
        raise SpecError(f"{path}.plugin: {reference} declares a {type(info).__name__}, not an algorithm "
                        f"(decorate its fit with @dpbench.algorithms.algorithm(...))")
    if entry.get("name", info.name) != info.name:
        raise SpecError(f"{path}.name: the plugin declares the algorithm {info.name!r}; leave name out or write that")
    return info, canonical, fingerprint


ALGORITHM_KEYS = ("name", "plugin", "params", "label", "models", "datasets", "tuning", "epsilons")


def _algorithms(value: Any, datasets: tuple[Component, ...] = (), models: tuple[Component, ...] = (),
                base: str = "") -> tuple[AlgorithmSpec, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError("algorithms: must be a non-empty list")
    out: list[AlgorithmSpec] = []
    for i, item in enumerate(value):
        path = f"algorithms[{i}]"
        entry = _entry(item, path, ALGORITHM_KEYS)
        info, plugin, plugin_digest = _algorithm_of(entry, path, base)
        axes = _param_axes(info, _options(entry.get("params"), f"{path}.params"), f"{path}.params")
        grid = tuple(tuple(combo) for combo in itertools.product(*axes))
        out.append(AlgorithmSpec(name=info.name, label=str(entry.get("label") or info.name), grid=grid,
                                 private=info.private,
                                 models=_restriction(entry.get("models"), f"{path}.models", models),
                                 datasets=_restriction(entry.get("datasets"), f"{path}.datasets", datasets),
                                 tuning=_tuning(entry.get("tuning"), f"{path}.tuning", info.private, len(grid)),
                                 epsilons=_entry_epsilons(entry.get("epsilons"), f"{path}.epsilons", info.private),
                                 plugin=plugin, plugin_digest=plugin_digest))
    seen: dict[tuple[str, str, str], int] = {}
    for i, algo in enumerate(out):  # a label may repeat only where the entries cover disjoint panels
        for ds, model in itertools.product(datasets, models):
            if algo.applies_to(ds, model):
                key = (algo.label, ds.label, model.label)
                if key in seen:
                    raise SpecError(f"algorithms[{i}].label: {algo.label!r} is also the label of algorithms[{seen[key]}] "
                                    f"on {ds.label} x {model.label}; give each entry a distinct label there")
                seen[key] = i
    return tuple(out)


def _param_axes(info, params: dict, path: str) -> list[list[tuple[str, Any]]]:
    """Per hyperparameter of the algorithm, its checked values (a YAML list is a grid axis), in the
    order the algorithm declares them; defaults filled in."""
    for key in params:
        if all(hp.name != key for hp in info.params):
            raise SpecError(f"{path}.{key}: unknown hyperparameter of {info.name}; allowed: "
                            f"{', '.join(hp.name for hp in info.params)}")
    axes: list[list[tuple[str, Any]]] = []
    for hp in info.params:
        raw = params.get(hp.name, hp.default)
        values = raw if isinstance(raw, list) else [raw]
        if not values:
            raise SpecError(f"{path}.{hp.name}: empty list; give at least one value")
        checked = []
        for j, v in enumerate(values):
            where = f"{path}.{hp.name}" + (f"[{j}]" if isinstance(raw, list) else "")
            try:
                checked.append((hp.name, hp.check(v)))
            except ValueError as exc:
                raise SpecError(f"{where}: {exc}") from None
        axes.append(checked)
    return axes


AUDIT_KEYS = ("dataset", "rows", "model", "trials", "alpha", "delta", "epsilons", "canary", "threat", "threshold",
              "one_run", "algorithms")
AUDIT_ENTRY_KEYS = ("name", "plugin", "label", "params", "canary", "model", "trials", "epsilons", "threat", "threshold",
                    "one_run")
ONE_RUN_KEYS = ("canaries", "guesses")


def _one_run(value: Any, path: str) -> tuple[int, int | None] | None:
    """`one_run: {canaries: m, guesses: r}` -> (m, r); false or absent -> None (no one-run audit)."""
    if value is None or value is False:
        return None
    if not isinstance(value, dict):
        raise SpecError(f"{path}: must be a mapping {{canaries: m, guesses: r}} or false, got {value!r}")
    for key in value:
        if key not in ONE_RUN_KEYS:
            raise SpecError(f"{path}.{key}: unknown key; allowed: {', '.join(ONE_RUN_KEYS)}")
    if "canaries" not in value:
        raise SpecError(f"{path}.canaries: missing; how many canaries the one training holds, e.g. 1000")
    canaries = _int(value["canaries"], f"{path}.canaries", minimum=2)
    guesses = None if value.get("guesses") is None else _int(value["guesses"], f"{path}.guesses", minimum=1)
    return canaries, guesses


def _audits(value: Any, seed: int, base: str = "") -> tuple:
    """`audits:` -> one AuditSetup per (algorithm entry, epsilon): the distinguishing games of
    dpbench.audit.multi_run. Block-level keys are defaults an entry may override (canary, model, trials,
    epsilons); hyperparameters take single values (an audit tests one mechanism, no selection)."""
    if value is None:
        return ()
    from dpbench.audit.canaries import CANARIES
    from dpbench.audit.setup import AuditSetup, check_setup

    if not isinstance(value, dict):
        raise SpecError(f"audits: must be a mapping with {', '.join(AUDIT_KEYS)}")
    for key in value:
        if key not in AUDIT_KEYS:
            raise SpecError(f"audits.{key}: unknown key; allowed: {', '.join(AUDIT_KEYS)}")
    dataset = _components([value.get("dataset", "breast_cancer")], "audits.dataset", _dataset_check, base=base)[0]
    rows = None if value.get("rows") is None else _int(value["rows"], "audits.rows", minimum=2)  # None: the recipe's
    alpha = value.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise SpecError(f"audits.alpha: must be a number in (0, 1) (1 - confidence), got {alpha!r}")
    delta = value.get("delta", 1e-5)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise SpecError(f"audits.delta: must be a number in (0, 1), got {delta!r}")
    entries = value.get("algorithms")
    if not isinstance(entries, list) or not entries:
        raise SpecError("audits.algorithms: must be a non-empty list of {name, label, params, canary}")
    out = []
    for i, item in enumerate(entries):
        path = f"audits.algorithms[{i}]"
        entry = _entry(item, path, AUDIT_ENTRY_KEYS)
        info, plugin, plugin_digest = _algorithm_of(entry, path, base)
        name = info.name
        given = _options(entry.get("params"), f"{path}.params")
        axes = _param_axes(info, given, f"{path}.params")
        if any(len(axis) > 1 for axis in axes):
            raise SpecError(f"{path}.params: an audit tests one setting; give single values, not lists")
        # only the given hyperparameters: the canary recipe's recommended ones fill the rest
        params = tuple(sorted(axis[0] for axis in axes if axis[0][0] in given))
        canary = entry.get("canary", value.get("canary", "spare_feature"))
        try:
            recipe = CANARIES.lookup(canary)
        except ValueError as exc:
            raise SpecError(f"{path}.canary: {exc}") from None
        model = _components([entry.get("model", value.get("model", "logreg"))], f"{path}.model", _model_check)[0]
        trials = _int(entry.get("trials", value.get("trials", 500)), f"{path}.trials", minimum=20)
        threat = entry.get("threat", value.get("threat", "final_model"))
        threshold = entry.get("threshold", value.get("threshold"))
        one = _one_run(entry["one_run"], f"{path}.one_run") if "one_run" in entry else \
            _one_run(value.get("one_run"), "audits.one_run")
        epsilons = _epsilons(entry.get("epsilons", value.get("epsilons")), required=info.private)
        own_data = not recipe.needs_dataset  # e.g. pidp_constant builds its own rows
        for eps in epsilons if info.private else (None,):
            setup = AuditSetup(algorithm=name, params=params, dataset=None if own_data else dataset.name,
                               dataset_options=() if own_data else dataset.options, model=model.name,
                               model_options=model.options, epsilon=eps, delta=float(delta), trials=trials,
                               canary=canary, rows=None if own_data else rows, alpha=float(alpha), seed=seed,
                               label=str(entry.get("label") or name), plugin=plugin, plugin_digest=plugin_digest,
                               dataset_base="" if own_data else dataset.base,
                               dataset_files=None if own_data else dataset.files_digest, threat=threat,
                               threshold=threshold)
            variants = [setup] if one is None else \
                [setup, dataclasses.replace(setup, canaries=one[0], guesses=one[1])]  # + the one-run audit
            for variant in variants:
                try:
                    check_setup(variant)
                except DpbenchError as exc:
                    raise SpecError(f"{path}: {exc}") from None
                out.append(variant)
    return tuple(out)


def _epsilons(value: Any, required: bool, path: str = "epsilons") -> tuple[float, ...]:
    if value is None:
        if required:
            raise SpecError(f"{path}: missing; list the privacy budgets, e.g. [0.1, 0.5, 1, 2]")
        return ()
    if not isinstance(value, list) or not value:
        raise SpecError(f"{path}: must be a non-empty list of numbers > 0, got {value!r}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SpecError(f"{path}[{i}]: must be a number > 0, got {v!r}")
        if not v > 0 or v != v or v == float("inf"):
            raise SpecError(f"{path}[{i}]: must be > 0 and finite, got {v}")
        out.append(float(v))
    if len(set(out)) != len(out):
        raise SpecError(f"{path}: repeated values")
    return tuple(sorted(out))


def _entry_epsilons(value: Any, path: str, private: bool) -> tuple[float, ...] | None:
    """An algorithm entry's own `epsilons` (None: the experiment's)."""
    if value is None:
        return None
    if not private:
        raise SpecError(f"{path}: a non-private algorithm runs once, without epsilon; remove `epsilons`")
    return _epsilons(value, True, path)


def _delta(value: Any) -> str | float:
    """A number in (0, 1), or an expression of n made only of what cells.compile_delta accepts.

    An expression's value depends on the training size n of each dataset, known once the data
    are loaded: pipeline.preflight checks it there, before any cell runs (a value probed at some
    other n here would refuse expressions such as 1/(n-400) that are fine at the real n)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpecError(f"delta: must be a number in (0, 1) or an expression of n such as 1/n, got {value!r}")
    try:
        if not compile_delta(value).uses_n:
            d = evaluate_delta(value, 0)
            if not 0 < d < 1:
                raise SpecError(f"delta: must lie in (0, 1), got {d:g}")
    except ValueError as exc:
        raise SpecError(f"delta: {exc}") from None
    return float(value) if isinstance(value, (int, float)) else value


def _selection(value: Any, metrics: tuple[str, ...]) -> str | dict | None:
    """None (each metric by its natural validation score), one score for all, or metric -> score."""
    if value is None:
        return None
    choices = ", ".join(SELECTION_METRICS)
    if isinstance(value, str):
        if value not in SELECTION_METRICS:
            raise SpecError(f"selection: must be one of {choices} or a mapping metric -> one of them, got {value!r}")
        return value
    if not isinstance(value, dict):
        raise SpecError(f"selection: must be one of {choices} or a mapping metric -> one of them")
    for metric, by in value.items():
        if metric not in metrics:
            raise SpecError(f"selection.{metric}: not among this experiment's metrics ({', '.join(metrics)})")
        if by not in SELECTION_METRICS:
            raise SpecError(f"selection.{metric}: must be one of {choices}, got {by!r}")
    return dict(value)


def _optimum(value: Any) -> tuple[tuple[str, int], ...]:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise SpecError("optimum: must be a mapping such as {restarts: 2, maxiter: 500}")
    for key in value:
        if key not in OPTIMUM_DEFAULTS:
            raise SpecError(f"optimum.{key}: unknown key; allowed: {', '.join(OPTIMUM_DEFAULTS)}")
    merged = {**OPTIMUM_DEFAULTS, **value}
    return tuple(sorted((k, _int(v, f"optimum.{k}", minimum=1)) for k, v in merged.items()))


def _metrics(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise SpecError(f"metrics: must be a non-empty list of {', '.join(METRICS)}")
    for i, m in enumerate(value):
        if m not in METRICS:
            raise SpecError(f"metrics[{i}]: unknown metric {m!r}; choose from {', '.join(METRICS)}")
    return tuple(value)


FIGURE_KEYS = ("name", "kind", "metric", "title", "datasets", "algorithms", "models")  # + the kind's own options


def _swept(datasets: tuple[Component, ...]) -> dict[str, set[str]]:
    """Sweep option (n, d) -> the dataset panels swept over it."""
    out: dict[str, set[str]] = {}
    for panel in {c.panel for c in datasets}:
        members = [dict(c.options) for c in datasets if c.panel == panel]
        for option in SWEEP_KEYS:
            if len({repr(m.get(option)) for m in members}) > 1:
                out.setdefault(option, set()).add(panel)
    return out


def _check_producible(raw_metrics: Any, metrics: tuple[str, ...], figures: tuple[FigureSpec, ...],
                      datasets: tuple[Component, ...], models: tuple[Component, ...],
                      algorithms: tuple[AlgorithmSpec, ...]) -> None:
    """Refuse metrics and figures that no part of the grid can produce (they would be empty)."""
    from dpbench import data
    from dpbench import models as models_mod
    from dpbench.run.metrics import unavailable

    pairs = {(ds, model) for algo in algorithms for ds in datasets for model in models if algo.applies_to(ds, model)}

    def first_reason(metric: str, shown: set) -> str | None:
        reasons = [unavailable(metric, data.DATASETS[ds.name], models_mod.MODELS[model.name]) for ds, model in shown]
        return None if any(r is None for r in reasons) or not reasons else reasons[0]

    where = "metrics" if raw_metrics is not None else "metrics (default)"
    for i, metric in enumerate(metrics):
        reason = first_reason(metric, pairs)
        if reason:
            raise SpecError(f"{where}[{i}]: {reason}, and no other dataset/model of this experiment can give it; "
                            f"drop it or add a dataset and model that can")
    for i, algo in enumerate(algorithms):
        if algo.tuning is not None and dict(algo.tuning)["score"] == "val_accuracy":
            for ds, model in sorted(pairs, key=lambda p: (p[0].label, p[1].label)):
                if algo.applies_to(ds, model) and models_mod.MODELS[model.name].task != "classification":
                    raise SpecError(f"algorithms[{i}].tuning.score: val_accuracy needs a classifier, but {model.label} "
                                    f"is a regression model; use score: val_loss (with loss_bound)")
    traced = any(dict(params).get("trace_every") for algo in algorithms for params in algo.grid)
    swept = _swept(datasets)
    for i, fig in enumerate(figures):
        shown = {(ds, m) for ds, m in pairs if fig.datasets is None or ds.label in fig.datasets
                 or ds.panel in fig.datasets}
        reason = first_reason(fig.metric, shown)
        if reason:
            raise SpecError(f"figures[{i}].metric: {reason}, nor any other dataset/model this figure draws")
        need = FIGURES.lookup(fig.kind).needs
        if need == "trace" and not traced:
            raise SpecError(f"figures[{i}].kind: {fig.kind} draws iterate traces, but no algorithm sets trace_every; "
                            f"add e.g. params: {{trace_every: 100}} to the algorithms it should draw")
        if need in SWEEP_KEYS and not ({ds.panel for ds, _ in shown} & swept.get(need, set())):
            raise SpecError(f"figures[{i}].kind: {fig.kind} draws a dataset swept over {need}, but none of its "
                            f"datasets has `sweep: {{{need}: [...]}}`")


def _figures(value: Any, metrics: tuple[str, ...], datasets: tuple[Component, ...] = (),
             algorithms: tuple[AlgorithmSpec, ...] = (), models: tuple[Component, ...] = ()) -> tuple[FigureSpec, ...]:
    if value is None:
        return tuple(FigureSpec(name=m, kind="metric_over_epsilon", metric=m, title="") for m in metrics)
    if not isinstance(value, list):
        raise SpecError("figures: must be a list of {name, kind, metric, title, ...}")
    out = []
    for i, item in enumerate(value):
        path = f"figures[{i}]"
        if not isinstance(item, dict):
            raise SpecError(f"{path}: must be a mapping with name, kind, metric and optional title")
        kind_name = item.get("kind", "metric_over_epsilon")
        try:
            kind = FIGURES.lookup(kind_name)
        except ValueError as exc:
            raise SpecError(f"{path}.kind: {exc}") from None
        own = [p.name for p in kind.params]  # the kind's declared options, e.g. reference
        for key in item:
            if key not in FIGURE_KEYS and key not in own:
                raise SpecError(f"{path}.{key}: unknown key; allowed: {', '.join(FIGURE_KEYS + tuple(own))}"
                                + ("" if own else f" (kind {kind.name} has no options of its own)"))
        options = {k: item[k] for k in own if k in item}
        try:
            kind.validate(options)
        except ValueError as exc:
            raise SpecError(f"{path}.{exc}") from None
        metric = item.get("metric")
        if metric not in metrics:
            raise SpecError(f"{path}.metric: {metric!r} is not among this experiment's metrics ({', '.join(metrics)})")
        name = item.get("name", metric)
        if not isinstance(name, str) or not name or "/" in name:
            raise SpecError(f"{path}.name: must be a file stem such as fig1-accuracy, got {name!r}")
        out.append(FigureSpec(name=name, kind=kind.name, metric=metric, title=str(item.get("title", "")),
                              options=tuple(sorted(options.items())),
                              datasets=_restriction(item.get("datasets"), f"{path}.datasets", datasets),
                              algorithms=_restriction(item.get("algorithms"), f"{path}.algorithms",
                                                      tuple(Component(a.name, (), a.label) for a in algorithms)),
                              models=_restriction(item.get("models"), f"{path}.models", models)))
    return tuple(out)
