"""How often `dpbench verify` catches a fit, or falsely accuses an honest one: its checks run `reps` times.

`power(algorithm, params=...)` runs `dpbench.audit.verify.verify` without the audit (trials 0: the
ledger and the stream checks, the model-access checks of `dpbench.audit.stream_checks` included)
`reps` times, rep r with seed `first_seed + r` (its own rotation of the game and its own fits), at
the settings of docs/validity.md's bug table: the training rows of Breast Cancer, logistic
regression, epsilon 1, delta 1e-5, the gradient canary. A detection is a verdict of mismatch; for
an honest algorithm every detection is a false alarm (each statistical check runs at level
`CHECK_LEVEL`, so with the few checks of one verify, a false-alarm rate of a few per thousand).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import NamedTuple


class Power(NamedTuple):
    """`detections` of `reps` verifications, the mismatches per check, and the seconds they took."""

    detections: int
    reps: int
    by_check: dict[str, int]
    seconds: float


def power(algorithm: str, *, params: dict | None = None, reps: int = 50, data_dir: str | None = None,
          first_seed: int = 0, dataset: str = "breast_cancer", model: str = "logreg", epsilon: float = 1.0,
          delta: float = 1e-5, sensitivity: bool = True) -> Power:
    """Verify `algorithm` (a built-in name or a plugin reference, path/to/file.py:fit) with `params`
    `reps` times without the audit (the sensitivity game too unless sensitivity=False); how many
    verdicts were mismatches (module docstring)."""
    from dpbench.audit.setup import AuditSetup
    from dpbench.audit.verify import verify
    from dpbench.run import plugins

    plugin = digest = None
    name = algorithm
    if ":" in algorithm:
        plugin = plugins.resolve(algorithm)
        name, digest = plugins.load(plugin).name, plugins.fingerprint(plugin)
    detections, by_check = 0, Counter()
    start = time.perf_counter()
    for rep in range(reps):
        setup = AuditSetup.create(name, plugin=plugin, plugin_digest=digest, params=dict(params or {}),
                                  dataset=dataset, model=model, epsilon=epsilon, delta=delta,
                                  canary="gradient_canary", trials=4, seed=first_seed + rep)
        result = verify(setup, trials=0, data_dir=data_dir, sensitivity=sensitivity)
        failed = {f.check for f in result.findings if f.status == "mismatch"}
        detections += bool(failed)
        by_check.update(failed)
    return Power(detections, reps, dict(by_check), time.perf_counter() - start)


__all__ = ["Power", "power"]
