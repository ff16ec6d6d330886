"""The stream checks on hand-made recorders (`dpbench.audit.stream_checks`): what they skip, and the
direction of each verdict on draws far from the threshold."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dpbench.audit import stream_checks
from dpbench.audit.verify import Verification
from dpbench.models.access import Access


def _recorder(sizes, steps, q=0.1, n=300, hits=None, z=None):
    """A run of `steps` reported steps at iterates 0..steps-1 whose gradient calls (`sizes`) are at
    iterates 0, 1, ...: calls beyond the steps are at iterates no step reports."""
    access = Access()
    access.sizes, access.hits, access.points = list(sizes), list(hits or []), list(range(len(sizes)))
    z = np.zeros(steps) if z is None else z
    return SimpleNamespace(access=access, steps=steps, n=n, declared=[(1.0, q, 0.1, 1.0)] * steps,
                           z=list(z), s=[1.0] * steps, kinds={"gradient_sum"}, iterates=set(range(steps)))


def _status(check, *args) -> str:
    out = Verification("x")
    check(*args, out)
    return out.findings[0].status


def test_no_gradient_through_the_model_is_skipped_not_passed():
    assert _status(stream_checks.check_steps_taken, [_recorder([], 20)]) == "skipped"
    assert _status(stream_checks.check_sampling, [_recorder([30] * 21, 20)], []) == "skipped"  # an extra call


def test_poisson_batches_pass_and_fixed_batches_or_many_rows_do_not():
    rng = np.random.default_rng(5)
    honest = [_recorder(rng.binomial(300, 0.1, 40), 40) for _ in range(10)]
    fixed = [_recorder([30] * 40, 40) for _ in range(10)]
    doubled = [_recorder(rng.binomial(300, 0.1, 80), 40) for _ in range(10)]
    assert _status(stream_checks.check_sampling, honest, []) == "ok"
    assert _status(stream_checks.check_sampling, fixed, []) == "mismatch"
    assert _status(stream_checks.check_steps_taken, honest) == "ok"
    assert _status(stream_checks.check_steps_taken, doubled) == "mismatch"
    for r in doubled:  # the same calls at the reported iterates (a step's gradient recomputed): not hidden steps
        r.access.points = [p % 40 for p in r.access.points]
    assert _status(stream_checks.check_steps_taken, doubled) == "ok"


def test_noise_repeated_within_blocks_is_serially_dependent():
    rng = np.random.default_rng(6)
    fresh = [_recorder([], 40, z=rng.normal(size=40)) for _ in range(10)]
    repeated = [_recorder([], 40, z=np.repeat(rng.normal(size=4), 10)) for _ in range(10)]
    assert _status(stream_checks.check_serial_dependence, fresh) == "ok"
    assert _status(stream_checks.check_serial_dependence, repeated) == "mismatch"
    assert _status(stream_checks.check_serial_dependence, [_recorder([], 3, z=rng.normal(size=3))]) == "skipped"
