"""The Model contract: a loss over a flat parameter vector theta (docs/contributing.md, Components).

Conventions every model follows:
* `per_example_losses` / `per_example_grads` are of the *data* loss l(theta; x_i, y_i) only.
* The model's own L2 term (l2/2)||theta||^2 is data independent; it is added by `loss` and
  `grad` (and `hvp`, `hessian`) but not by the per-example functions, so a private algorithm
  clips and noises only the data part and adds `reg_grad(theta)` afterwards (post-processing).
  loss(theta) = mean_i l(theta; z_i) + reg(theta); grad = mean_i per_example_grads + reg_grad.
* This regularised loss is the reference objective L_ref (docs/methods/conventions.md,
  Optimality gap): optimality
  gaps are measured against it for every algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from dpbench.core.registry import BUILT_IN, Declared, Param, Registry, current_source, params_of

from .access import GRADIENT_METHODS, counted


def clip_factors(norms: np.ndarray, clip_norm: float) -> np.ndarray:
    """Per-example clipping factors min(1, C/||g_i||) (Abadi et al. 2016); C = inf means no clipping.

    One source of truth for the factor, shared by the reference `Model.clipped_grad_sum` and the
    fast overrides, so both paths scale identically. A zero gradient gets factor 1.
    """
    if not clip_norm > 0:  # also rejects NaN
        raise ValueError(f"clip_norm must be > 0, got {clip_norm}")
    return np.minimum(1.0, clip_norm / np.maximum(norms, 1e-300))


class Model:
    """Base class; subclasses implement the data-loss methods, this class adds the L2 term."""

    name: str = "model"
    task: str = "classification"  # or "regression"
    convex: bool = True  # is the loss convex in theta (decides which guarantees are valid)
    #: Bound G on the per-example *data*-loss gradient norm for rows with ||x||_2 <= 1
    #: (docs/methods/conventions.md, "G"); None when no global bound exists (then clip).
    lipschitz: float | None = None
    #: Bound beta_s on the per-example *data*-loss Hessian norm for rows with ||x||_2 <= 1
    #: (docs/methods/conventions.md, "beta_s"); None when no global bound exists. The regularised loss
    #: adds l2 to it (and is l2-strongly convex when `convex`).
    smoothness: float | None = None
    #: The row norm ||x||_2 that `lipschitz` and `smoothness` assume (docs/methods/conventions.md,
    #: Preprocessing): a mechanism that calibrates noise from them projects its rows onto this ball
    #: first (`bounded_rows`).
    ROW_NORM_BOUND = 1.0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every gradient method a subclass defines tells the gradient-access recorder its rows
        (`dpbench.models.access`: one ContextVar.get per call while nobody records)."""
        super().__init_subclass__(**kwargs)
        for name in GRADIENT_METHODS:
            if name in cls.__dict__:
                setattr(cls, name, counted(cls.__dict__[name]))

    def __init__(self, n_features: int, l2: float = 0.0):
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        if l2 < 0:
            raise ValueError(f"l2 must be >= 0, got {l2}")
        self.n_features = int(n_features)
        self.l2 = float(l2)

    # ---- to implement -------------------------------------------------------------------
    @property
    def n_params(self) -> int:
        raise NotImplementedError

    def init(self, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def per_example_losses(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def per_example_grads(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(n, m) gradients of the data loss, one row per example."""
        raise NotImplementedError

    def data_grad(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Mean data-loss gradient; subclasses override it to avoid the (n, m) matrix."""
        return self.per_example_grads(theta, X, y).mean(axis=0)

    def data_hvp(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, v: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def data_hessian(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Dense mean data-loss Hessian; default builds it column by column from `data_hvp`."""
        m = self.n_params
        return np.column_stack([self.data_hvp(theta, X, y, e) for e in np.eye(m)])

    def decision_function(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Real-valued output f(theta; x) per row (margin for classifiers, prediction for regression)."""
        raise NotImplementedError

    # ---- provided ------------------------------------------------------------------------
    def reg(self, theta: np.ndarray) -> float:
        return 0.5 * self.l2 * float(theta @ theta)

    def reg_grad(self, theta: np.ndarray) -> np.ndarray:
        return self.l2 * theta

    def loss(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        """Mean data loss plus (l2/2)||theta||^2: the reference objective L_ref."""
        return float(np.mean(self.per_example_losses(theta, X, y))) + self.reg(theta)

    def grad(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.data_grad(theta, X, y) + self.reg_grad(theta)

    def loss_and_grad(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        """(loss, grad) at one point, what optimisers ask for; models whose loss and gradient share
        a forward pass override it (same numbers as the two calls, one pass fewer)."""
        return self.loss(theta, X, y), self.grad(theta, X, y)

    def hvp(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, v: np.ndarray) -> np.ndarray:
        return self.data_hvp(theta, X, y, v) + self.l2 * v

    def hessian(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.data_hessian(theta, X, y) + self.l2 * np.eye(self.n_params)

    def clipped_grad_sum(
        self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, clip_norm: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Sum over rows of per-example data gradients clipped to L2 norm `clip_norm`.

        Returns (sum (m,), pre-clipping norms (n,)). Abadi et al. 2016, Alg. 1 line "clip
        gradient": g_i * min(1, C/||g_i||). Subclasses may override with a path that never
        forms the (n, m) matrix; results must agree with this reference implementation.
        """
        G = self.per_example_grads(theta, X, y)
        norms = np.linalg.norm(G, axis=1)
        return clip_factors(norms, clip_norm) @ G, norms

    def predict(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Labels in {-1, +1} for classifiers (ties go to +1), real predictions for regression."""
        f = self.decision_function(theta, X)
        if self.task == "classification":
            return np.where(f >= 0, 1.0, -1.0)
        return f

    def describe(self) -> dict:
        return {"name": self.name, "n_features": self.n_features, "n_params": self.n_params,
                "l2": self.l2, "convex": self.convex, "task": self.task}


for _name in GRADIENT_METHODS:  # the base class's own (subclasses' by __init_subclass__)
    setattr(Model, _name, counted(Model.__dict__[_name]))


@dataclass(frozen=True)
class ModelInfo(Declared):
    """A registered model: what `dpbench list` shows, its options (the annotated keyword arguments
    of its class's `__init__`, `params`) and the class that builds it (`factory`)."""

    name: str
    description: str
    citation: str
    task: str  # "classification" | "regression"
    convex: bool
    params: tuple[Param, ...] = ()
    linear: bool = False  # theta lives in the data's feature space (theta . x), so theta can be compared with w*
    factory: Callable[..., Model] | None = field(default=None, repr=False, compare=False)
    source: str = BUILT_IN

    @property
    def options(self) -> dict[str, Any]:
        """Option name -> default."""
        return {p.name: p.default for p in self.params}

    def owner(self) -> str:
        return f"model {self.name!r}"


MODELS: Registry[ModelInfo] = Registry("model", builtins="dpbench.models", group="dpbench.models")


def model(*, description: str, citation: str, linear: bool = False) -> Callable[[type], type]:
    """Declare a Model subclass as a model: its name, task and convexity come from the class, its
    options from the annotated keyword arguments of `__init__` after n_features."""
    def declare(cls: type) -> type:
        MODELS.register(ModelInfo(name=cls.name, description=description, citation=citation, task=cls.task,
                                  convex=cls.convex, params=params_of(cls.__init__, keyword_only=False),
                                  linear=linear, factory=cls, source=current_source()))
        return cls

    return declare
