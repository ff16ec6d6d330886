"""Benchmarks that print figures (`dpbench bench`): steps per second of the compiled kernels,
whole fits, accounting calibrations (`suites`), and the side-by-side comparison with Opacus
(`opacus`)."""

from dpbench.core.moved import forward

__getattr__ = forward(__name__)  # the names of the old module dpbench.bench, with a DeprecationWarning
