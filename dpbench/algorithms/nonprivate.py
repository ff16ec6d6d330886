"""Non-private baselines: the exact empirical minimiser (L-BFGS) and plain minibatch SGD.

`minimize_empirical_risk` gives theta* and L* = L_ref(theta*) for optimality gaps
(docs/methods/conventions.md, Optimality gap): L-BFGS with a tight gradient tolerance, then Newton steps with
backtracking for convex models whose Hessian is small (accept when ||grad|| <= 1e-10). For a
non-convex model (the MLP) L* is only an estimate: the best of `restarts` L-BFGS runs from
random initialisations (curves.py further takes the minimum with every trained model's loss
so reported gaps are >= 0). Cost (measured, Adult, d = 105, one BLAS thread): logreg 0.3 s;
MLP about 0.1 s per L-BFGS iteration (53 s for 500), so `maxiter` bounds the MLP's L* budget.

Not private: nothing to privatise.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from scipy.optimize import minimize

from dpbench.algorithms.base import MAX_EPOCHS, NON_PRIVATE_LEDGER, Fit, Problem, algorithm, ledger
from dpbench.algorithms.sgd import LR_SCHEDULES, run_sgd, steps_for, training_loss_trace
from dpbench.core.registry import Param

NEWTON_MAX_PARAMS = 2000


def _lbfgs(problem: Problem, theta0: np.ndarray, maxiter: int) -> np.ndarray:
    model, X, y = problem.model, problem.X, problem.y

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        return model.loss_and_grad(theta, X, y)

    res = minimize(fun, theta0, jac=True, method="L-BFGS-B",
                   options={"maxiter": maxiter, "gtol": 1e-10, "ftol": 1e-16, "maxcor": 20})
    return np.asarray(res.x, dtype=float)


def _newton_polish(problem: Problem, theta: np.ndarray, max_steps: int = 20) -> np.ndarray:
    model, X, y = problem.model, problem.X, problem.y
    value = model.loss(theta, X, y)
    for _ in range(max_steps):
        g = model.grad(theta, X, y)
        if np.linalg.norm(g) <= 1e-10:
            break
        step = np.linalg.solve(model.hessian(theta, X, y), g)
        t = 1.0
        while t > 1e-10:
            candidate = theta - t * step
            new_value = model.loss(candidate, X, y)
            if new_value <= value:
                theta, value = candidate, new_value
                break
            t *= 0.5
        else:
            break
    return theta


def minimize_empirical_risk(
    problem: Problem, rng: np.random.Generator | None = None, *, restarts: int = 3, maxiter: int = 5000
) -> tuple[np.ndarray, float]:
    """Return (theta*, L*) for the model's reference objective on the problem's data."""
    model = problem.model
    if model.convex:
        theta = _lbfgs(problem, np.zeros(model.n_params), maxiter)
        if model.n_params <= NEWTON_MAX_PARAMS:
            theta = _newton_polish(problem, theta)
        return theta, model.loss(theta, problem.X, problem.y)
    rng = rng if rng is not None else np.random.default_rng(0)
    best_theta, best_value = None, np.inf
    for _ in range(max(1, restarts)):
        theta = _lbfgs(problem, model.init(rng), maxiter)
        value = model.loss(theta, problem.X, problem.y)
        if value < best_value:
            best_theta, best_value = theta, value
    return best_theta, float(best_value)


@algorithm("nonprivate", title="Non-private baseline (exact minimiser or plain SGD)",
           citation="reference line of every figure; L-BFGS (Liu & Nocedal 1989) + Newton polishing",
           private=False)
def fit_nonprivate(
    problem: Problem,
    privacy,
    rng: np.random.Generator,
    *,
    method: Annotated[str, Param("lbfgs: exact empirical minimiser; sgd: plain minibatch SGD",
                                 choices=("lbfgs", "sgd"))] = "lbfgs",
    restarts: Annotated[int, Param("random restarts for a non-convex model (L-BFGS)", minimum=1)] = 3,
    epochs: Annotated[float, Param("passes over the data (sgd)", minimum=0, exclusive_minimum=True,
                                   maximum=MAX_EPOCHS)] = 5.0,
    batch_size: Annotated[float, Param("expected batch size (sgd)", minimum=1)] = 64.0,
    lr: Annotated[float, Param("step size (sgd)", minimum=0, exclusive_minimum=True)] = 0.5,
    lr_schedule: Annotated[str, Param("step-size schedule (sgd)", choices=LR_SCHEDULES)] = "constant",
    trace_every: Annotated[int, Param("record the training loss every this many steps (sgd; 0: no trace)",
                                      minimum=0)] = 0,
) -> Fit:
    """Non-private reference: the exact minimiser (method=lbfgs) or plain minibatch SGD."""
    if method == "lbfgs":
        theta, _ = minimize_empirical_risk(problem, rng, restarts=restarts)
        return Fit(theta=theta, privacy=ledger(**NON_PRIVATE_LEDGER, method="lbfgs"))
    steps = steps_for(epochs, batch_size, problem.n)
    theta, trace = run_sgd(problem, rng, steps=steps, batch_size=batch_size, lr=lr, lr_schedule=lr_schedule,
                           trace_every=trace_every, on_trace=training_loss_trace(problem))
    return Fit(theta=theta, trace=trace, privacy=ledger(**NON_PRIVATE_LEDGER, method="sgd", steps=steps))
