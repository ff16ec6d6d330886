"""Which rows a model's data gradients were evaluated on: a recorder the audits can set (`recording`).

A fit's releases say which steps it took (`dpbench.algorithms.releases`); nothing but the model
sees how many gradients it computed to take them. `dpbench verify` therefore counts, through the
model, the rows of every call of a gradient method of the data loss (`GRADIENT_METHODS`:
`per_example_grads`, `data_grad`, `clipped_grad_sum`, `loss_and_grad`, in `Model` and in every
subclass, the fast overrides of dpbench/models/linear.py and mlp.py and a plugin's model
included: `Model.__init_subclass__` wraps each with `counted`). A call made from inside another
counted call (the base `data_grad` calling `per_example_grads`, an override calling `super()`)
counts once, as the outer call.

With a recorder set (`recording(marked, iterates)`), each outer call appends its number of rows to
`Access.sizes`; when the recorder was given `marked` (rows -> bool per row: e.g. rows with a
nonzero value along the canary's spare direction), whether any marked row was among them to
`Access.hits`; with `iterates`, the `digest` of the theta it was evaluated at to `Access.points`
(so a gradient can be matched with the iterate a reported step declares). With none set, a counted
call costs one ContextVar.get.

A loop that evaluates gradients with another library (a peer's, `dpbench.algorithms.peers`) tells the
recorder each batch itself (`evaluated`). What this cannot see: compiled loops that evaluate gradients without a model method (the numba
kernels of dpbench/algorithms/kernels.py, the JAX twins). Under `verify` they do not run: the
built-in loops take their numpy path, through the model's methods, whenever somebody observes
their releases (`dpbench.algorithms.releases.observing`), and verify observes every fit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

#: the Model methods that evaluate data-loss gradients of a batch of rows (counted when overridden too)
GRADIENT_METHODS = ("per_example_grads", "data_grad", "clipped_grad_sum", "loss_and_grad")


class Access:
    """The gradient calls of the fits run inside `recording` (module docstring)."""

    def __init__(self, marked: Callable[[np.ndarray], np.ndarray] | None = None, iterates: bool = False):
        self.marked, self.iterates = marked, iterates
        self.sizes: list[int] = []  # rows of each outer gradient call, in order
        self.hits: list[bool] = []  # per call, whether a marked row was among them (only with `marked`)
        self.points: list[int] = []  # per call, the digest of its theta (only with `iterates`)
        self._depth = 0

    @property
    def rows(self) -> int:
        """Rows evaluated over all calls."""
        return int(sum(self.sizes))

    def _enter(self, theta: np.ndarray, X: np.ndarray) -> None:
        if self._depth == 0:
            if self.iterates:
                self.points.append(digest(theta))
            rows = np.asarray(X)
            self.sizes.append(int(rows.shape[0]) if rows.ndim else 1)
            if self.marked is not None:
                self.hits.append(bool(rows.shape[0]) and bool(np.any(self.marked(np.atleast_2d(rows)))))
        self._depth += 1


def digest(theta: np.ndarray) -> int:
    """A hash of theta's values (-0.0 read as 0.0): equal for the same iterate, whatever array holds it."""
    return hash((np.asarray(theta, dtype=np.float64) + 0.0).tobytes())


_RECORDER: ContextVar[Access | None] = ContextVar("dpbench_gradient_access", default=None)


def counted(method: Callable) -> Callable:
    """`method(self, theta, X, ...)` that tells the current recorder, if any, about its rows X."""
    if getattr(method, "_counts_access", False):
        return method

    @functools.wraps(method)
    def wrapper(self, theta, X, *args, **kwargs):
        recorder = _RECORDER.get()
        if recorder is None:
            return method(self, theta, X, *args, **kwargs)
        recorder._enter(theta, X)
        try:
            return method(self, theta, X, *args, **kwargs)
        finally:
            recorder._depth -= 1

    wrapper._counts_access = True  # type: ignore[attr-defined]
    return wrapper


def evaluated(theta: np.ndarray, X: np.ndarray) -> None:
    """Tell the current recorder, if any, that the data-loss gradients of rows X were evaluated at theta
    by code that is no model method: a peer's loop, whose library computes them (`dpbench.algorithms.peers`),
    reports each batch as a counted call of the model would (one ContextVar.get while nobody records)."""
    recorder = _RECORDER.get()
    if recorder is not None and recorder._depth == 0:
        recorder._enter(theta, X)
        recorder._depth -= 1


@contextmanager
def recording(marked: Callable[[np.ndarray], np.ndarray] | None = None, iterates: bool = False
              ) -> Iterator[Access]:
    """Record the gradient calls of the fits run inside the block in the yielded `Access`; `marked`
    (rows (b, d) -> (b,) bools) says which rows to look for, `iterates` whether to keep each call's
    theta digest (module docstring)."""
    recorder = Access(marked, iterates)
    token = _RECORDER.set(recorder)
    try:
        yield recorder
    finally:
        _RECORDER.reset(token)


__all__ = ["GRADIENT_METHODS", "Access", "counted", "digest", "evaluated", "recording"]
