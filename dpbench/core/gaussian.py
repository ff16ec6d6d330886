"""Standard normal draws, fast: the numbers `numpy.random.Generator.standard_normal` gives.

Every Gaussian mechanism of the noisy training loops draws its noise here (`standard_normal`). With
numba (`dpbench.core.jit`), a compiled call fills the buffer through numba's port of numpy's
ziggurat (Marsaglia & Tsang 2000, numpy's 256-layer tables) on the same bit generator: the same
bits in the same order, so the same numbers and the same generator state afterwards as numpy's
own call -- no random stream of a result changes. The compiled loop avoids numpy's per-draw call
through the bit generator's function pointer: 5.2 ns a draw against 8.2 ns (PCG64, one core,
`dpbench bench --suite noise`). Equality is to the last bit on the fast path of the ziggurat
(integer and table arithmetic) and to libm rounding in the tail branch (|z| > 3.65, one draw in
~4,000), where numba's exp/log stand in for numpy's; `tests/core/test_gaussian.py` checks both
against numpy's draws. Small buffers (below `COMPILED_MIN` values) go to numpy directly: there
the compiled call's fixed cost exceeds the gain.
"""

from __future__ import annotations

import numpy as np

from .jit import HAVE_NUMBA, jit_enabled, njit

#: fewer values than this are drawn by numpy itself (the compiled call costs ~2 us)
COMPILED_MIN = 2048


@njit(cache=True)
def _fill(rng, flat):  # pragma: no cover - compiled
    n = flat.shape[0]
    block = 65536  # bounded temporary: numba's Generator.standard_normal allocates its result
    for a in range(0, n, block):
        b = min(n, a + block)
        flat[a:b] = rng.standard_normal(b - a)


def standard_normal(rng: np.random.Generator, out: np.ndarray) -> np.ndarray:
    """Fill `out` (float64, C-contiguous) with standard normal draws from `rng` and return it: the
    values and the generator state of `rng.standard_normal(out=out)`."""
    if out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ValueError("standard_normal fills a C-contiguous float64 array")
    if out.size < COMPILED_MIN or not (HAVE_NUMBA and jit_enabled()):
        return rng.standard_normal(out=out)
    _fill(rng, out.reshape(-1))
    return out


def normal(rng: np.random.Generator, scale: float, shape: int | tuple[int, ...]) -> np.ndarray:
    """`rng.normal(0.0, scale, size=shape)`: the same values (numpy computes 0 + scale * z)."""
    out = standard_normal(rng, np.empty(shape))
    out *= scale
    return out
