"""The error and power of an experiment's claim tests on its own data's shapes: a Monte-Carlo run
of the whole procedure (`sequential.run_rounds`: looks, spending, capped Holm, claims stopping when
decided) on per-seed values resampled from the committed runs' sub-tests, skew and outliers as
they are.

Each claim with sub-tests that can support it gives a `Shape`: its quantifier and, per sub-test,
the per-seed values it was tested on, oriented so that "the relation holds" means "the parameter
lies above the threshold" (a `less` / `decreasing` relation is negated; an interval relation is
taken at its lower end). For a test (`stats.TESTS`) the residuals of a sub-test are its values
minus that test's parameter (the median for the sign test, the mean for the t-test), so that a
resampled sub-test has its parameter exactly where a scenario puts it:

- **boundary**: every sub-test's parameter at the threshold (a verdict either way is false);
- **least favourable**: per claim, the sub-test with the largest |skew| at the threshold and the
  others 3 robust scales above it (the intersection-union test then rests on the skewed one);
- **shift d**: every sub-test d robust scales above the threshold (power).

The robust scale is the interquartile range / 1.349 (the sd of normal data, not inflated by a
runaway seed), and one seed count n_K (the design's last look) is drawn per sub-test. A false
verdict is "reproduced" when fewer than r of the claim's panels truly lie above the threshold, or
"contradicted" when at least r do (a parameter exactly at the threshold does not satisfy "above",
so there the relation fails and only "reproduced" is false); the family-wise error is the fraction
of experiments with one.
Equivalence margins are left out (the "no difference" verdicts are not simulated here; the normal
simulation of `sequential.simulate` covers them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from dpbench.analysis.claims.sequential import CONTRADICTED, REPRODUCED, Design, clopper_pearson, run_rounds
from dpbench.analysis.claims.stats import ALPHA, SIDES, TESTS, combine_p, needed, relation_p, skewness

#: the scenarios: name -> (the shift of each claim's most skewed sub-test, of its others), in robust scales
SCENARIOS = {"boundary": (0.0, 0.0), "least favourable": (0.0, 3.0), "shift 0.5": (0.5, 0.5), "shift 1": (1.0, 1.0)}


@dataclass(frozen=True)
class Shape:
    """One claim as observed: its id, quantifier and the per-seed values of each sub-test that can
    support it, oriented so that "holds" is "above the threshold", with the threshold subtracted."""

    claim: str
    quantifier: str
    values: tuple[np.ndarray, ...]

    @property
    def skews(self) -> np.ndarray:
        return np.asarray([skewness(v) for v in self.values])


def claim_shapes(verdicts: Sequence) -> list[Shape]:
    """The `Shape` of every claim (dpbench.analysis.claims.Verdict) with at least one live sub-test
    of at least 3 finite seeds: its values minus the relation's threshold, negated for a relation
    that holds below it."""
    out = []
    for v in verdicts:
        values = []
        for t in getattr(v, "live", []):
            if t.values is None or np.isfinite(t.values).sum() < 3:
                continue
            x = np.asarray(t.values, dtype=float)
            x = x[np.isfinite(x)]
            low = _threshold(v.claim, t)
            values.append(-(x - low) if SIDES[_relation(v.claim)] == "below" else x - low)
        if values:
            out.append(Shape(v.claim.id, v.claim.quantifier, tuple(values)))
    return out


def _relation(claim) -> str:
    """The relation a sub-test of the claim tests (a rate claim tests at_most / within)."""
    if claim.kind == "rate":
        return {"upper": "at_most", "exact": "within", "flattens": "greater", "steepens": "less"}[claim.relation]
    return claim.relation


def _threshold(claim, test) -> float:
    """The threshold of the relation's "holds" side, from the sub-test's own distance."""
    side = SIDES[_relation(claim)]
    if side == "above":
        return test.effect - test.distance
    if side == "below":
        return test.effect + test.distance
    if claim.kind == "rate":
        return claim.slope - claim.tolerance
    return -getattr(claim, "margin", 0.0)


def _residuals(x: np.ndarray, test: str) -> np.ndarray:
    """x minus the test's parameter (`stats.PARAMETER`); all zero for a constant x."""
    if np.ptp(x) == 0:
        return np.zeros_like(x)
    return x - (np.median(x) if test == "sign" else np.mean(x))


def _scale(x: np.ndarray) -> float:
    q1, q3 = np.percentile(x, [25, 75])
    scale = (q3 - q1) / 1.349
    return float(scale) if scale > 0 else float(np.std(x)) or 1.0


@dataclass(frozen=True)
class ShapeResult:
    """`simulate_shapes`' result: one row per (test, scenario)."""

    rows: tuple[dict, ...]
    design: Design
    n_experiments: int
    claims: int
    subtests: int
    seconds: float

    def table(self) -> pd.DataFrame:
        """Columns: test, scenario, fwer with its 95 % Clopper-Pearson interval (fwer_low,
        fwer_high), power (claims that truly hold reproduced; NaN where none does), decided."""
        return pd.DataFrame(list(self.rows))

    def row(self, test: str, scenario: str) -> dict:
        found = [r for r in self.rows if r["test"] == test and r["scenario"] == scenario]
        if len(found) != 1:
            raise KeyError(f"{len(found)} rows for {test!r}, {scenario!r}")
        return found[0]


def simulate_shapes(shapes: Sequence[Shape], design: Design, n_experiments: int = 1000, *,
                    tests: Sequence[str] = TESTS, scenarios: Sequence[str] = tuple(SCENARIOS),
                    rng_seed: int = 0, alpha: float = ALPHA, progress: bool = False) -> ShapeResult:
    """Run the procedure on `n_experiments` experiments resampled from `shapes` (module docstring)
    for each test and scenario; the same random indices serve every test and scenario. `progress`:
    a bar over the (test, scenario) pairs."""
    start = time.perf_counter()
    if not shapes:
        raise ValueError("simulate_shapes: no claim with sub-tests to resample")
    for name in scenarios:
        if name not in SCENARIOS:
            raise ValueError(f"simulate_shapes: unknown scenario {name!r}; one of {', '.join(SCENARIOS)}")
    n = design.max_seeds
    rng = np.random.default_rng(rng_seed)
    draws = [[rng.integers(0, x.size, size=(n_experiments, n)) for x in shape.values] for shape in shapes]
    weights = design.weights
    rows = []
    pairs = [(test, name) for test in tests for name in scenarios]
    for test, name in tqdm(pairs, desc="simulating the procedure", unit="scenario", disable=not progress,
                           leave=False):
        skewed, others = SCENARIOS[name]
        c = len(shapes)
        p_hold = np.empty((n_experiments, c, len(design.looks)))
        p_fail = np.empty_like(p_hold)
        holds = np.zeros(c, dtype=bool)
        for i, shape in enumerate(shapes):
            worst = int(np.nanargmax(np.abs(np.nan_to_num(shape.skews, nan=0.0))))
            shifts = np.full(len(shape.values), others)
            shifts[worst] = skewed
            sample = np.stack([_residuals(x, test)[idx] + shift * _scale(x)
                               for x, idx, shift in zip(shape.values, draws[i], shifts)], axis=1)
            for k, look in enumerate(design.looks):
                hold, fail = relation_p(sample[..., :look], "greater", 0.0, test=test)
                p_hold[:, i, k], p_fail[:, i, k], _ = combine_p(hold, fail, np.full(hold.shape, np.nan),
                                                                shape.quantifier)
            holds[i] = (shifts > 0).sum() >= needed(shape.quantifier, len(shape.values))
        verdicts, _, _ = run_rounds(p_hold, p_fail, np.full(p_hold.shape, np.nan), weights, alpha)
        wrong = ((verdicts == REPRODUCED) & ~holds) | ((verdicts == CONTRADICTED) & holds)
        errors = int(wrong.any(axis=1).sum())
        low, high = clopper_pearson(errors, n_experiments)
        rows.append({"test": test, "scenario": name, "fwer": errors / n_experiments, "fwer_low": low,
                     "fwer_high": high,
                     "power": float((verdicts[:, holds] == REPRODUCED).mean()) if holds.any() else float("nan"),
                     "decided": float((verdicts != "undecided").mean())})
    return ShapeResult(tuple(rows), design, n_experiments, len(shapes), sum(len(s.values) for s in shapes),
                       time.perf_counter() - start)


__all__ = ["SCENARIOS", "Shape", "ShapeResult", "claim_shapes", "simulate_shapes"]
