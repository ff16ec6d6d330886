"""Models: the `MODELS` registry (name -> `ModelInfo`) and `make(name, n_features, **options)`.

Every model is a `Model` (base.py): a loss over a flat float64 parameter vector theta whose
per-example functions are of the data loss only, the L2 term (l2/2)||theta||^2 being added by
`loss` / `grad` / `hvp` / `hessian` (that regularised loss is L_ref; docs/methods/conventions.md, Optimality gap).
A model class declares itself with the `model(...)` decorator (base.py); its options are the
annotated keyword arguments of its `__init__` after `n_features`. Importing this package imports
every module in it, so a model is one file.
"""

from __future__ import annotations

from typing import Any

from dpbench.core.registry import import_submodules

from .base import MODELS, Model, ModelInfo, clip_factors, model

import_submodules(__name__)

from .linear import LogisticRegression, RidgeRegression  # noqa: E402
from .mlp import ACTIVATIONS, MLP  # noqa: E402


def make(name: str, n_features: int, **options: Any) -> Model:
    """Build model `name` for `n_features` inputs; options override the declared defaults.

    Unknown names or options, and values out of their declared range, raise a one-line ValueError
    listing the valid values.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; valid models: {', '.join(sorted(MODELS))}")
    info = MODELS[name]
    unknown = sorted(set(options) - set(info.options))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(map(repr, unknown))} for model {name!r}; "
                         f"valid options: {', '.join(sorted(info.options)) or '(none)'}")
    return info.factory(n_features, **info.validate(options))


__all__ = ["MODELS", "ModelInfo", "make", "model", "Model", "LogisticRegression", "RidgeRegression", "MLP",
           "ACTIVATIONS", "clip_factors"]
