"""Benchmarks that print figures (`dpbench bench`): steps per second of the compiled kernels,
whole fits, accounting calibrations (`suites`), and the side-by-side comparison with Opacus
(`opacus`)."""
