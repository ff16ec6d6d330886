"""The validated experiment (`Experiment`) and its grid of cells: algorithms x hyperparameter
combinations x datasets x models x epsilons x seeds, or the runs of an algorithm's private
selection (random searches drawn from the grid, independent of the data)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from dpbench.core.keys import Cell, digest, seed_from
from dpbench.spec.algorithms import AlgorithmSpec
from dpbench.spec.components import Component, dataset_revision, path_keys
from dpbench.spec.figure_specs import FigureSpec


@dataclass(frozen=True)
class Experiment:
    """A validated experiment: its components, grid, figures, audits and claims (`load`)."""

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
    select_per: str = "seed"  # hyperparameters selected per seed or pooled over seeds (curves.select)
    # `decide:`: the seed counts at which claims are tested (dpbench decide), and per data set label a factor on them
    decide_looks: tuple[int, ...] = ()
    decide_scale: tuple[tuple[str, int], ...] = ()
    # `margins:` over dpbench's defaults: per metric the margin of every directional claim's "no difference beyond m"
    margins: tuple[tuple[str, float], ...] = ()
    # `extra_seeds:` (spec.sections.ExtraSeeds): curves that run more repetitions than their data sets
    extra_seeds: tuple = ()
    # `--device` (dpbench.on_jax.device): gpu or jax-cpu train the cells of the JAX path's families with it
    # (their cells keyed backend "jax"), the others on the CPU path; cpu trains every cell on the numpy path
    device: str = "cpu"

    def on_device(self, device: str) -> "Experiment":
        """This experiment with its cells trained on `device` (`dpbench.on_jax.device.DEVICES`)."""
        from dataclasses import replace

        from dpbench.on_jax.device import uses_jax

        uses_jax(device)  # an unknown device: DpbenchError
        return replace(self, device=device)

    def _backend(self, algorithm: str, model: str, params) -> str:
        """"jax" for a cell the JAX path trains on this experiment's device, else "numpy"."""
        if self.device == "cpu":
            return "numpy"
        from dpbench import models
        from dpbench.on_jax.twins import on_jax

        return "jax" if on_jax(algorithm, models.MODELS.lookup(model).factory, dict(params)) else "numpy"

    @property
    def spec_hash(self) -> str:
        return digest(self.resolved)

    def reps_for(self, dataset: Component | str) -> tuple[int, ...]:
        """The repetitions (cell `rep` values) of a dataset entry, or of a dataset label."""
        label = dataset.label if isinstance(dataset, Component) else dataset
        return dict(self.dataset_seeds).get(label, self.seeds)

    def reps_of(self, algo: AlgorithmSpec, ds: Component, model: Component, eps: float | None) -> tuple[int, ...]:
        """The repetitions of one curve point: its data set's (`reps_for`), and beyond them up to the
        largest `extra_seeds:` count of an entry that covers it."""
        base = self.reps_for(ds)
        extra = max((e.seeds for e in self.extra_seeds if e.covers(algo.label, ds, model.label, eps)), default=0)
        if extra <= len(base):
            return base
        return tuple(sorted(set(base) | set(range(extra))))

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
            paths = path_keys(ds.name)  # the options of ds that name files (their content is in the key)
            if algo.tuning is None:
                total += len(algo.grid) * sum(len(self.reps_of(algo, ds, model, eps))
                                              for eps in (self.budgets(algo) if algo.private else (None,)))
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
        (the dataset's, `reps_for`, or more for the curves of `extra_seeds:`, `reps_of`).

        An algorithm with `tuning` (private selection) has the runs of its random searches instead
        (`search_runs`). `skip_datasets`: labels of optional datasets whose files are absent
        (pipeline.preflight).
        """
        out: list[Cell] = []
        for algo, ds, model in itertools.product(self.algorithms, self.datasets, self.models):
            if ds.label in skip_datasets or not algo.applies_to(ds, model):
                continue
            paths = path_keys(ds.name)  # the options of ds that name files (their content is in the key)
            revision = dataset_revision(ds.name)  # nonzero: part of the key (the data set's arrays changed)

            def cell(params, eps, rep, draw=None, revision=revision):
                return Cell(backend=self._backend(algo.name, model.name, params) if algo.plugin is None else "numpy",
                            algorithm=algo.name, params=params, dataset=ds.name, dataset_options=ds.options,
                            model=model.name, model_options=model.options, epsilon=eps, delta=self.delta,
                            rep=rep, seed=self.seed, optimum=self.optimum, label=algo.label,
                            dataset_label=ds.label, model_label=model.label, dataset_panel=ds.panel or ds.label,
                            draw=draw, tuning=algo.tuning, plugin=algo.plugin, plugin_digest=algo.plugin_digest,
                            dataset_base=ds.base, dataset_files=ds.files_digest,
                            dataset_path_keys=paths, dataset_revision=revision)

            if algo.tuning is None:
                budgets = self.budgets(algo) if algo.private else (None,)
                reps = {eps: self.reps_of(algo, ds, model, eps) for eps in budgets}
                out.extend(cell(params, eps, rep) for rep in sorted(set().union(*reps.values()))
                           for params in algo.grid for eps in budgets if rep in reps[eps])
            else:
                out.extend(cell(algo.grid[i], eps, rep, draw=j) for eps in self.budgets(algo)
                           for rep, j, i in self.search_runs(algo, ds, model, eps))
        return out


# ---- loading ---------------------------------------------------------------------------------


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


__all__ = ["Experiment", "tuning_draws"]
