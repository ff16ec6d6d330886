"""Model registry: name -> `ModelInfo`, and `make(name, n_features, **options)`.

Every model is a `Model` (base.py): a loss over a flat float64 parameter vector theta whose
per-example functions are of the data loss only, the L2 term (l2/2)||theta||^2 being added by
`loss` / `grad` / `hvp` / `hessian` (ALGORITHMS.md §0.2: that regularised loss is L_ref).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .base import Model, clip_factors
from .linear import LogisticRegression, RidgeRegression
from .mlp import ACTIVATIONS, MLP


@dataclass(frozen=True)
class ModelInfo:
    """What `dpbench list` shows about a model; `options` maps option name -> default."""

    name: str
    description: str
    citation: str
    task: str  # "classification" | "regression"
    convex: bool
    options: dict[str, Any] = field(default_factory=dict)
    linear: bool = False  # theta lives in the data's feature space (theta . x), so theta can be compared with w*
    factory: Callable[..., Model] | None = field(default=None, repr=False, compare=False)


MODELS: dict[str, ModelInfo] = {
    "logreg": ModelInfo(
        name="logreg",
        description="L2-regularised logistic regression, log(1+exp(-y theta.x)) + (l2/2)||theta||^2; "
                    "no separate bias (data carry an intercept feature)",
        citation="ALGORITHMS.md §0; [S0] Kang et al. (PIDP-SGD) §7; [S3] Kang et al. (input "
                 "perturbation) §6; [S4] Wang et al. ICML 2020 §6",
        task="classification",
        convex=True,
        options={"l2": 1e-4},
        linear=True,
        factory=LogisticRegression,
    ),
    "ridge": ModelInfo(
        name="ridge",
        description="ridge regression, (theta.x - y)^2 (no 1/2, as in [S4]) + (l2/2)||theta||^2",
        citation="[S4] Wang, Xiao, Devadas, Xu, DP-SCO with heavy-tailed data, ICML 2020, §1 and §6; "
                 "ALGORITHMS.md §10.7",
        task="regression",
        convex=True,
        options={"l2": 1e-3},
        linear=True,
        factory=RidgeRegression,
    ),
    "mlp": ModelInfo(
        name="mlp",
        description="one hidden layer (width `hidden`, None = n_features), smooth activation "
                    f"({' | '.join(ACTIVATIONS)}), logistic output; non-convex",
        citation="ALGORITHMS.md §0.4; [S0] Kang et al. §7; [S3] Kang et al. §6",
        task="classification",
        convex=False,
        options={"hidden": None, "activation": "tanh", "l2": 1e-4},
        factory=MLP,
    ),
}


def make(name: str, n_features: int, **options: Any) -> Model:
    """Build model `name` for `n_features` inputs; options override `MODELS[name].options`.

    Unknown names or options raise ValueError with a one-line list of the valid values.
    """
    info = MODELS.get(name)
    if info is None:
        raise ValueError(f"unknown model {name!r}; valid models: {', '.join(sorted(MODELS))}")
    unknown = sorted(set(options) - set(info.options))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(map(repr, unknown))} for model {name!r}; "
                         f"valid options: {', '.join(sorted(info.options)) or '(none)'}")
    return info.factory(n_features, **{**info.options, **options})


__all__ = ["MODELS", "ModelInfo", "make", "Model", "LogisticRegression", "RidgeRegression", "MLP",
           "clip_factors"]
