"""`dpbench verify SPEC`: `dpbench.audit.verify` at the settings an experiment runs its algorithms with.

`dpbench verify ALGORITHM` runs at its own settings: Breast Cancer, logistic regression, epsilon 1,
and the clip norm the gradient canary recommends (0.1, set through the parameter role clip_norm).
A bug that shows only at other settings passes there: clipping to min(C, the batch's median
gradient norm) with the noise scaled to that clip is honest DP-SGD at C = 0.1 on Breast Cancer
(the median norm is above C) and releases less noise than declared at C = 1. This module plans one
verification per (algorithm entry of the spec, hyperparameter setting of its grid, data set, model,
epsilon), each with the entry's own parameters, every one given (the grid fills in defaults), so
that no recipe's recommendation by role replaces them; the spec's delta (an expression of n
evaluated at the data set's training size, as a cell's) and seed.

Rows that verify cannot check say why (`VerifyRow.skipped`): a model that is not linear (the
checks read the spare feature's own parameter), a non-private algorithm (nothing is claimed).
Settings are capped per entry (`plan(max_settings=)`), epsilons are the entry's largest and
smallest unless all are asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpbench.core.errors import DpbenchError
from dpbench.core.keys import evaluate_delta


@dataclass(frozen=True)
class VerifyRow:
    """One line of the table: what is verified (labels as the spec writes them) and its setup, or
    why it is skipped."""

    algorithm: str
    setting: str  # the hyperparameters that vary over the entry's grid, "k=v, ..." ("-" when none vary)
    dataset: str
    model: str
    epsilon: float | None
    setup: object | None  # dpbench.audit.setup.AuditSetup; None when skipped
    skipped: str = ""


def _setting(combo: tuple, varying: set[str]) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in combo if k in varying)
    return shown or "-"


def _delta(exp, ds, data_dir: str | None, cache: dict) -> float:
    """The spec's delta at the data set's training size (a number is itself)."""
    if not isinstance(exp.delta, str):
        return float(exp.delta)
    if ds.label not in cache:
        from dpbench import data
        from dpbench.core.registry import resolve_paths

        options = resolve_paths(data.DATASETS.lookup(ds.name).params, dict(ds.options), ds.base)
        cache[ds.label] = data.load(ds.name, seed=0, data_dir=data_dir, **options).n_train
    return evaluate_delta(exp.delta, cache[ds.label])


def plan(exp, *, max_settings: int = 4, all_epsilons: bool = False,
         data_dir: str | None = None) -> tuple[list[VerifyRow], list[str]]:
    """(rows, notes) of `dpbench verify SPEC` for an Experiment (module docstring); a note says
    where settings were capped."""
    from dpbench import algorithms, models
    from dpbench.audit.setup import AuditSetup
    from dpbench.spec.components import dataset_revision, path_keys

    rows: list[VerifyRow] = []
    notes: list[str] = []
    sizes: dict[str, int] = {}
    for algo in exp.algorithms:
        info = algorithms.get(algo.name)
        varying = {k for k in dict(algo.grid[0]) if len({repr(dict(c)[k]) for c in algo.grid}) > 1}
        combos = list(dict.fromkeys(algo.grid))
        if len(combos) > max_settings:
            notes.append(f"{algo.label}: {max_settings} of its {len(combos)} hyperparameter settings verified "
                         f"(the first in the grid's order; --max-settings {len(combos)} verifies all)")
            combos = combos[:max_settings]
        budgets = exp.budgets(algo) if info.private else (None,)
        if info.private and not all_epsilons:
            budgets = tuple(sorted({min(budgets), max(budgets)}))
        for ds in exp.datasets:
            for model in exp.models:
                if not algo.applies_to(ds, model):
                    continue
                for combo in combos:
                    for eps in budgets:
                        row = dict(algorithm=algo.label, setting=_setting(combo, varying), dataset=ds.label,
                                   model=model.label, epsilon=eps)
                        if not info.private:
                            rows.append(VerifyRow(**row, setup=None, skipped="not private: nothing is claimed"))
                            continue
                        if not models.MODELS.lookup(model.name).linear:
                            rows.append(VerifyRow(**row, setup=None, skipped=(
                                f"model {model.name} is not linear: the checks read the spare feature's own "
                                "parameter")))
                            continue
                        try:
                            delta = _delta(exp, ds, data_dir, sizes)
                        except (DpbenchError, ValueError, OSError) as exc:
                            rows.append(VerifyRow(**row, setup=None, skipped=f"data set: {exc}"))
                            continue
                        setup = AuditSetup.create(
                            algo.name, plugin=algo.plugin, plugin_digest=algo.plugin_digest, params=dict(combo),
                            dataset=ds.name, dataset_options=dict(ds.options), dataset_base=ds.base,
                            dataset_files=ds.files_digest, dataset_path_keys=path_keys(ds.name),
                            dataset_revision=dataset_revision(ds.name), model=model.name,
                            model_options=dict(model.options), epsilon=float(eps), delta=delta, trials=4,
                            canary="gradient_canary", seed=exp.seed, label=algo.label)
                        rows.append(VerifyRow(**row, setup=setup))
    return rows, notes


__all__ = ["VerifyRow", "plan"]
