"""What an adversary who sees every update observes: the noisy steps an iterative algorithm releases.

Threat model "all updates" (Nasr, Song, Thakurta, Papernot, Carlini, S&P 2021; Nasr, Hayes,
Steinke, Balle, Tramer, Jagielski, Carlini, Terzis, USENIX Security 2023; docs/audits.md, Threat models):
every iterate theta_0 .. theta_T is public. Seeing theta_t and theta_{t+1} and knowing the
hyperparameters, the adversary can recompute each step's noisy statistic, so an iterative
algorithm describes every noisy step it takes as a `Release`, and the audit harness (which the
algorithm knows nothing about) may listen with `observing(callback)`. With nobody listening,
`release(...)` costs two context-variable lookups and builds nothing.

A step of kind "gradient_sum" releases

    released = weight * ( sum_{i in S_t} clip_C(grad l(theta_t; z_i)) + N(0, noise_std^2 I) ),

with each record in S_t independently with probability `rate` (1: full batch) and clip_C the
per-example clipping to norm `clip_norm` (None: unclipped). Every other noisy step (e.g. a robust
mean estimate of the gradients) is of kind "noisy_statistic": `released` carries Gaussian noise of
std weight * noise_std per coordinate, and a record moves it by at most its sensitivity, but not
by a known function of the record. Arrays carry a leading replica axis (R, m) when R trainings
run as one vectorised fit.

The tally. Besides an observer, a `Tally` may listen (`tallying()`): it keeps only how many steps
were declared with each (kind, noise_std, rate, clip_norm, weight), a dictionary increment per
step, and never touches the arrays. The runner tallies every fit and compares the tally with the
fit's ledger (`release_check`). A tally is not an observer: dpbench's own loops (`_observed()`,
theirs only) see nobody while only a tally listens, so a loop keeps its compiled path, which cannot call `release` per step; such a
path reports its steps in bulk after the loop (`released_steps`), which only a tally reads. A loop
that calls `release` only while observed reports in bulk otherwise: every step is counted once.

Replicas. A release whose arrays have a leading axis of R rows counts one step for each of
replicas 0..R-1 of the fit; `released_steps` takes a per-replica noise std ((R,) array) or a
`replicas` count. A batched fit that runs its replicas one after another marks each with
`replicas_from(r)`, so the tally can be split per replica (`Tally.replica`, `Tally.split`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

KINDS = ("gradient_sum", "noisy_statistic")


@dataclass(frozen=True)
class Release:
    """One noisy step as the all-updates adversary sees it (module docstring)."""

    step: int  # 1-based step index
    theta: np.ndarray  # (m,) or (R, m): the iterate the step's gradients were taken at
    released: np.ndarray  # (m,) or (R, m): the noisy statistic (module docstring for its scale)
    noise_std: float  # std of the Gaussian noise, before `weight`; 0 for a step without noise
    rate: float = 1.0  # probability that a given record is in the step's batch
    clip_norm: float | None = None  # per-example clipping norm (None: not clipped)
    weight: float = 1.0  # released = weight * (sum + noise)
    kind: str = "gradient_sum"


class Declared(NamedTuple):
    """What a step declares about itself (the fields of a `Release` other than its arrays)."""

    kind: str
    noise_std: float
    rate: float
    clip_norm: float | None
    weight: float


#: rows of a tally entry: None (a fit's own steps, no replica axis) or (a, b), replicas a..b-1
Rows = tuple[int, int] | None


class Tally:
    """How many steps were declared with each `Declared` (and for which replicas) inside `tallying()`.

    Each entry has rows: None for a release of (m,) arrays (or (r, r + 1) inside
    `replicas_from(r)`), (0, R) for one of (R, m) arrays (shifted likewise). Counting a step is one
    dictionary increment on the numbers as declared (normalised to floats when read); the distinct
    keys are few (one per distinct declared noise std, rate, ... and replica block)."""

    __slots__ = ("_counts", "_first")

    def __init__(self) -> None:
        # (first, stacked, kind, noise_std, rate, clip_norm, weight) -> steps; first: the view's first
        # replica (None outside replicas_from), stacked: R for (R, m) arrays, 0 for (m,) arrays
        self._counts: dict[tuple, int] = {}
        self._first: int | None = None

    def _view(self, first: int) -> Tally:
        """A view sharing the counts whose replica rows start at `first` (`replicas_from`)."""
        view = Tally.__new__(Tally)
        view._counts = self._counts
        view._first = (self._first or 0) + first
        return view

    def _add(self, first: int | None, stacked: int, kind: str, noise_std, rate, clip_norm, weight, count: int) -> None:
        key = (first, stacked, kind, noise_std, rate, clip_norm, weight)
        self._counts[key] = self._counts.get(key, 0) + count

    # ---- reading ------------------------------------------------------------------------------
    def entries(self) -> list[tuple[Rows, Declared, int]]:
        """(rows, declared, count) of every distinct entry, in the order first seen."""
        out: dict[tuple[Rows, Declared], int] = {}
        for (first, stacked, kind, noise_std, rate, clip_norm, weight), count in self._counts.items():
            if stacked:
                rows: Rows = (first or 0, (first or 0) + int(stacked))
            else:
                rows = None if first is None else (first, first + 1)
            declared = Declared(kind, float(noise_std), float(rate), None if clip_norm is None else float(clip_norm),
                                float(weight))
            out[rows, declared] = out.get((rows, declared), 0) + count
        return [(rows, declared, count) for (rows, declared), count in out.items()]

    def declared(self) -> dict[Declared, int]:
        """Steps per declared (kind, noise_std, rate, clip_norm, weight), the replica rows merged:
        one fit's view (a release of R rows counts once)."""
        out: dict[Declared, int] = {}
        for _, declared, count in self.entries():
            out[declared] = out.get(declared, 0) + count
        return out

    @property
    def steps(self) -> int:
        """Steps counted (a release of R rows counts once)."""
        return sum(self._counts.values())

    @property
    def per_replica(self) -> bool:
        """Every entry names its replicas (a batched fit's tally can be split)."""
        return all(rows is not None for rows, _, _ in self.entries())

    def replica(self, r: int) -> Tally:
        """The steps of replica r: the entries whose rows include r, as a tally without replica rows
        (entries without rows are not any replica's: see `per_replica`)."""
        out = Tally()
        for rows, d, count in self.entries():
            if rows is not None and rows[0] <= r < rows[1]:
                out._add(None, 0, d.kind, d.noise_std, d.rate, d.clip_norm, d.weight, count)
        return out

    def split(self, replicas: int) -> list[Tally]:
        """`replica(r)` for r = 0..replicas-1."""
        return [self.replica(r) for r in range(replicas)]

    @classmethod
    def of(cls, steps: Iterable[Release]) -> Tally:
        """The tally of these releases (as `tallying` would count them outside any replica block)."""
        tally = cls()
        for rel in steps:
            tally._add(None, np.shape(rel.theta)[0] if np.ndim(rel.theta) == 2 else 0, rel.kind, rel.noise_std,
                       rel.rate, rel.clip_norm, rel.weight, 1)
        return tally


_OBSERVER: ContextVar[Callable[[Release], None] | None] = ContextVar("dpbench_release_observer", default=None)
_TALLY: ContextVar[Tally | None] = ContextVar("dpbench_release_tally", default=None)


def _observed() -> bool:
    """True while somebody observes (dpbench's own loops then skip a compiled path that cannot report
    steps); a tally alone is not an observer. dpbench's own loops only; not part of the plugin API:
    nothing public tells a plugin that it is being watched (what `dpbench verify` relies on)."""
    return _OBSERVER.get() is not None


def release(step: int, theta: np.ndarray, released: np.ndarray, noise_std: float, *, rate: float = 1.0,
            clip_norm: float | None = None, weight: float = 1.0, kind: str = "gradient_sum") -> None:
    """Report one noisy step to the current tally and observer, if any (copies nothing: the observer
    must read the arrays before the loop changes them; the tally reads only the declared numbers
    and whether the arrays have a replica axis)."""
    tally = _TALLY.get()
    if tally is not None:  # the numbers as declared (normalised when read): one dictionary increment
        ndim = theta.ndim if type(theta) is np.ndarray else np.ndim(theta)
        key = (tally._first, len(theta) if ndim == 2 else 0, kind, noise_std, rate, clip_norm, weight)
        counts = tally._counts
        counts[key] = counts.get(key, 0) + 1
    observer = _OBSERVER.get()
    if observer is not None:
        observer(Release(step=int(step), theta=theta, released=released, noise_std=float(noise_std),
                         rate=float(rate), clip_norm=None if clip_norm is None else float(clip_norm),
                         weight=float(weight), kind=kind))


def released_steps(count: int, noise_std: float | np.ndarray, *, rate: float = 1.0, clip_norm: float | None = None,
                   weight: float = 1.0, kind: str = "gradient_sum", replicas: int | None = None) -> None:
    """Report in bulk `count` steps that were not reported one by one (a compiled loop, or a loop
    that calls `release` only while observed), each declared as `release` would declare it.

    Only a tally reads this (an observer needs each step's arrays: a loop runs its reporting path
    while observed). `noise_std` may be an (R,) array, one std per replica (replica r of a batched
    fit: count steps at noise_std[r]); a float with `replicas` = R counts the steps for each of R
    replicas; a float alone, for the fit itself (or the replica of the enclosing `replicas_from`)."""
    tally = _TALLY.get()
    if tally is None or count <= 0 or replicas == 0:
        return
    if kind not in KINDS:
        raise ValueError(f"unknown release kind {kind!r}; expected one of {', '.join(KINDS)}")
    if isinstance(noise_std, (float, int)):  # one std (the common case: no array made)
        tally._add(tally._first, 0 if replicas is None else int(replicas), kind, noise_std, rate, clip_norm, weight,
                   int(count))
        return
    stds = np.asarray(noise_std, dtype=float)
    if stds.ndim == 0:
        tally._add(tally._first, 0 if replicas is None else int(replicas), kind, float(stds), rate, clip_norm, weight,
                   int(count))
        return
    if replicas is not None and replicas != stds.shape[0]:
        raise ValueError(f"{stds.shape[0]} noise stds for {replicas} replicas")
    if stds.size and np.all(stds == stds[0]):  # one entry for all
        tally._add(tally._first, stds.shape[0], kind, float(stds[0]), rate, clip_norm, weight, int(count))
        return
    first = tally._first or 0
    for r, std in enumerate(stds.tolist()):
        tally._add(first + r, 0, kind, std, rate, clip_norm, weight, int(count))


@contextmanager
def observing(callback: Callable[[Release], None]) -> Iterator[None]:
    """Call `callback(release)` for every noisy step of the fits run inside the block."""
    token = _OBSERVER.set(callback)
    try:
        yield
    finally:
        _OBSERVER.reset(token)


@contextmanager
def tallying() -> Iterator[Tally]:
    """Count the steps of the fits run inside the block in the yielded `Tally` (module docstring);
    an inner `tallying` block counts its steps in its own tally only."""
    tally = Tally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


@contextmanager
def replicas_from(first: int) -> Iterator[None]:
    """Inside the block, a release of (m,) arrays is replica `first`'s step and a release of R rows
    replicas first..first+R-1 (relative to an enclosing block): how a batched fit that runs its
    replicas one after another, or in blocks, keeps its tally splittable."""
    tally = _TALLY.get()
    if tally is None:
        yield
        return
    token = _TALLY.set(tally._view(first))
    try:
        yield
    finally:
        _TALLY.reset(token)


@contextmanager
def not_tallied() -> Iterator[None]:
    """Inside the block the tally counts nothing: for steps that are collected and reported again
    afterwards (a vectorised fit re-emitting its blocks' releases stacked), so each counts once."""
    token = _TALLY.set(None)
    try:
        yield
    finally:
        _TALLY.reset(token)


__all__ = ["KINDS", "Declared", "Release", "Tally", "not_tallied", "observing", "release",
           "released_steps", "replicas_from", "tallying"]
