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
    margins: {estimation_error: 0.05}  # the margin rule over dpbench's per-metric defaults: every directional
                                     #   claim's "no difference beyond m" margin
    decide: {looks: [5, 10, 20]}     # `dpbench decide`: the seed counts at which claims are tested
    extra_seeds: [{datasets: [Adult], algorithms: [DP-SGD], epsilons: [1, 3], seeds: 40}]
                                     # curves that run more seeds than their data sets (what decide extends)
    profiles:                        # named overrides of top-level keys (dicts merge, lists replace)
      ci: {seeds: 2, epsilons: [0.5, 2]}   # `seeds: 2` sets every dataset's count; a seeds mapping
                                     #   merges with the base's (an int or list there is its default)

YAML is read with the `yaml.safe_load` loader only, with a key repeated in one mapping refused
(`yaml_loader`). Every value is checked against its declared constraints (dpbench.core.validation):
an error is one line that starts with the YAML path and says what to do
(`algorithms[2].params.lr: must be > 0, got -1`).

The parts live in modules named for what they hold: `sections` (single values: seeds, epsilons,
delta, metrics, selection, optimum), `components` (datasets and models), `algorithms` (entries,
grids) and `tuning` (private selection), `figure_specs`, `audits`, `profiles`, and `grid` (the
`Experiment` and its cells). This module reads a file and puts them together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpbench.core.errors import SpecError
from dpbench.core.validation import missing, unknown_key, validate
from dpbench.spec import yaml_loader
from dpbench.spec.algorithms import ALGORITHM_KEYS, AlgorithmSpec, algorithms
from dpbench.spec.audits import AUDIT_ENTRY_KEYS, AUDIT_KEYS, ONE_RUN_KEYS, audits
from dpbench.spec.components import SWEEP_KEYS, Component, components, dataset_check, model_check
from dpbench.spec.figure_specs import FIGURE_KEYS, FigureSpec, check_producible, figures
from dpbench.spec.grid import Experiment, tuning_draws
from dpbench.spec.profiles import DEFAULT_PROFILE, apply_profile, merge
from dpbench.spec.sections import NAME, OPTIMUM_DEFAULTS, TOP_KEYS, decide, delta, epsilons, extra_seeds, integer, \
    margins, metrics, \
    optimum, seed_plan, select_per, selection, text
from dpbench.spec.tuning import TUNING_DEFAULTS, TUNING_SCORES

#: A run of more cells than this needs `--allow-large`: the largest paper experiment has 4,590
#: cells (inputpert, full profile), so a grid beyond it is more often a typo (a long list where a
#: short one was meant) than a plan, and its L* phase and cells would run for hours.
MAX_CELLS = 50_000
_merge = merge  # the profile merge under its private name (tests call it)


def check_size(exps: list[Experiment], allow_large: bool) -> int:
    """The number of cells of these experiments; SpecError above MAX_CELLS unless allow_large."""
    total = sum(exp.n_cells() for exp in exps)
    if total > MAX_CELLS and not allow_large:
        parts = ", ".join(f"{exp.name}[{exp.profile}] {exp.n_cells():,}" for exp in exps)
        raise SpecError(f"{total:,} cells ({parts}) is more than {MAX_CELLS:,}; check the grid (every list in "
                        f"params, epsilons, seeds and sweeps multiplies it), or pass --allow-large to run it")
    return total


#: epsilons outside this range are extreme: below it a calibration needs minutes and the noise
#: swamps any signal; above it no accountant certifies a meaningful guarantee (PLD often says inf)
ORDINARY_EPSILONS = (1e-3, 100.0)


def extreme_epsilons(exps: list[Experiment]) -> list[str]:
    """One notice per experiment with a private algorithm run at an epsilon outside ORDINARY_EPSILONS:
    what to expect of it, said before any cell runs."""
    low, high = ORDINARY_EPSILONS
    out = []
    for exp in exps:
        used = sorted({float(e) for algo in exp.algorithms if algo.private for e in exp.budgets(algo)})
        small, large = [e for e in used if e < low], [e for e in used if e > high]
        if small:
            out.append(f"{exp.name}: epsilon {', '.join(f'{e:g}' for e in small)} is below {low:g}: each noise "
                       "calibration can take minutes (the optimal RDP orders are in the thousands) and the noise "
                       "swamps the data (expect chance-level results)")
        if large:
            out.append(f"{exp.name}: epsilon {', '.join(f'{e:g}' for e in large)} is above {high:g}: no meaningful "
                       "guarantee; accountants may return an infinite epsilon there, and a run whose accountant "
                       "says inf is not labelled valid")
    return out


def load(path: str | Path, profile: str = DEFAULT_PROFILE) -> Experiment:
    """Read, profile and validate an experiment file; raise SpecError (one line) on any problem."""
    path = Path(path)
    return from_dict(yaml_loader.read(path), name=path.stem, profile=profile, source=str(path))


def from_dict(raw: Any, *, name: str = "experiment", profile: str = DEFAULT_PROFILE,
              source: str = "<dict>") -> Experiment:
    """A spec already read (a mapping), profiled and validated; SpecError (one line) on any problem."""
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: the top level must be a mapping with keys such as datasets, models, "
                        f"algorithms, epsilons")
    for key in raw:
        if key not in TOP_KEYS:
            raise unknown_key("", key, TOP_KEYS)
    spec = apply_profile(raw, profile)
    for key in ("datasets", "models", "algorithms"):
        if key not in spec and "audits" not in spec:  # an audit-only experiment has no grid
            raise missing(key, "list at least one")

    exp_name = validate("name", text(spec, "name", default=name), NAME)
    grid = all(key in spec for key in ("datasets", "models", "algorithms"))
    base = "" if source.startswith("<") else str(Path(source).resolve().parent)  # relative paths start there
    datasets = components(spec["datasets"], "datasets", dataset_check, sweepable=True, base=base) if grid else ()
    models = components(spec["models"], "models", model_check) if grid else ()
    algos = algorithms(spec["algorithms"], datasets, models, base) if grid else ()
    any_private = any(a.private and a.epsilons is None for a in algos)
    budgets = epsilons(spec.get("epsilons"), required=any_private)
    exp_delta = delta(spec.get("delta", "1/n"))
    exp_metrics = metrics(spec.get("metrics", ["accuracy", "optimality_gap"]))
    exp_selection = selection(spec.get("selection"), exp_metrics)
    exp_figures = figures(spec.get("figures"), exp_metrics, datasets, algos, models)
    if grid:
        check_producible(spec.get("metrics"), exp_metrics, exp_figures, datasets, models, algos)
    seed = integer(spec.get("seed", 0), "seed", minimum=0)
    seeds, dataset_seeds = seed_plan(spec.get("seeds", 1), datasets)
    looks, scale = decide(spec.get("decide"), datasets, strict=profile == DEFAULT_PROFILE)
    rule = margins(spec.get("margins"))
    extra = extra_seeds(spec.get("extra_seeds"), datasets, algos, models, strict=profile == DEFAULT_PROFILE)
    return Experiment(
        name=exp_name, description=text(spec, "description"), paper=text(spec, "paper"), profile=profile,
        seed=seed, seeds=seeds, datasets=datasets, models=models, algorithms=algos, epsilons=budgets,
        delta=exp_delta, metrics=exp_metrics, selection=exp_selection, figures=exp_figures,
        optimum=optimum(spec.get("optimum")), source=source, audits=audits(spec.get("audits"), seed, base),
        claims=claims(spec.get("claims"), dict(rule)), dataset_seeds=dataset_seeds,
        select_per=select_per(spec.get("select_per")), decide_looks=looks, decide_scale=scale, margins=rule,
        extra_seeds=extra,
        resolved={k: v for k, v in spec.items() if k != "profiles"},
    )


def claims(value: Any, rule: dict[str, float] | None = None) -> tuple:
    """`claims:` -> dpbench.analysis.claims.Claim per entry, each directional claim carrying the
    margin of `rule` (metric -> margin, `sections.margins`) for its metric (the relations are
    checked against the curves when they are evaluated: `dpbench claims`)."""
    from dpbench.analysis.claims import parse_claims

    return parse_claims(value, margins=rule)


__all__ = ["ALGORITHM_KEYS", "AUDIT_ENTRY_KEYS", "AUDIT_KEYS", "AlgorithmSpec", "Component", "DEFAULT_PROFILE",
           "Experiment", "FIGURE_KEYS", "FigureSpec", "MAX_CELLS", "ONE_RUN_KEYS", "OPTIMUM_DEFAULTS",
           "ORDINARY_EPSILONS", "SWEEP_KEYS", "SpecError", "TOP_KEYS", "TUNING_DEFAULTS", "TUNING_SCORES",
           "apply_profile", "check_size", "extreme_epsilons", "from_dict", "load", "tuning_draws"]
