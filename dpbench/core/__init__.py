"""The floor every other layer stands on: errors, component registries and declared parameters,
cell keys and seeds, privacy ledgers, the crash-safe result store, and the optional numba compiler.

Nothing here imports another part of dpbench."""
