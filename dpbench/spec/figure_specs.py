"""The `figures:` entries of a spec: a figure kind (dpbench.figures.kinds) with its own options,
a metric, and restrictions to some data sets, algorithms or models; and the check that every
metric and figure can be produced by the grid (none would be empty)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpbench.core.errors import SpecError
from dpbench.core.validation import Mapping, Sequence, StrOptions, Text, validate
from dpbench.figures.kinds import FIGURES
from dpbench.spec.algorithms import AlgorithmSpec
from dpbench.spec.components import SWEEP_KEYS, Component, restriction

FIGURE_KEYS = ("name", "kind", "metric", "title", "datasets", "algorithms", "models")  # + the kind's own options
FIGURE_NAME = Text(pattern=r"[^/]+", what="a file stem such as fig1-accuracy")


@dataclass(frozen=True)
class FigureSpec:
    """A figure entry: what the figure kind draws and of which rows."""

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


def swept(datasets: tuple[Component, ...]) -> dict[str, set[str]]:
    """Sweep option (n, d) -> the dataset panels swept over it."""
    out: dict[str, set[str]] = {}
    for panel in {c.panel for c in datasets}:
        members = [dict(c.options) for c in datasets if c.panel == panel]
        for option in SWEEP_KEYS:
            if len({repr(m.get(option)) for m in members}) > 1:
                out.setdefault(option, set()).add(panel)
    return out


def check_producible(raw_metrics: Any, metrics: tuple[str, ...], figures: tuple[FigureSpec, ...],
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
    sweeps = swept(datasets)
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
        if need in SWEEP_KEYS and not ({ds.panel for ds, _ in shown} & sweeps.get(need, set())):
            raise SpecError(f"figures[{i}].kind: {fig.kind} draws a dataset swept over {need}, but none of its "
                            f"datasets has `sweep: {{{need}: [...]}}`")


def figures(value: Any, metrics: tuple[str, ...], datasets: tuple[Component, ...] = (),
            algorithms: tuple[AlgorithmSpec, ...] = (), models: tuple[Component, ...] = ()) -> tuple[FigureSpec, ...]:
    """The `figures:` list -> FigureSpecs (default: one metric-over-epsilon figure per metric)."""
    if value is None:
        return tuple(FigureSpec(name=m, kind="metric_over_epsilon", metric=m, title="") for m in metrics)
    validate("figures", value, Sequence(Mapping("a mapping with name, kind, metric and optional title"), min_len=0,
                                        what="a list of {name, kind, metric, title, ...}"))
    out = []
    for i, item in enumerate(value):
        path = f"figures[{i}]"
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
        given = {k: item[k] for k in own if k in item}
        try:
            kind.validate(given)
        except ValueError as exc:
            raise SpecError(f"{path}.{exc}") from None
        metric = validate(f"{path}.metric", item.get("metric"), StrOptions(metrics), note="this experiment's metrics")
        name = validate(f"{path}.name", item.get("name", metric), FIGURE_NAME)
        out.append(FigureSpec(name=name, kind=kind.name, metric=metric, title=str(item.get("title", "")),
                              options=tuple(sorted(given.items())),
                              datasets=restriction(item.get("datasets"), f"{path}.datasets", datasets),
                              algorithms=restriction(item.get("algorithms"), f"{path}.algorithms",
                                                     tuple(Component(a.name, (), a.label) for a in algorithms)),
                              models=restriction(item.get("models"), f"{path}.models", models)))
    return tuple(out)


__all__ = ["FIGURE_KEYS", "FigureSpec", "check_producible", "figures", "swept"]
