"""The optional JAX path (`--device gpu` or `jax-cpu`; `pip install 'dpbench[jax]'`).

  device  the `--device` choices, and JAX switched on (float64) for one of them
  forms   the built-in models' data losses in jax.numpy
  loops   the jitted training loops: noisy clipped-gradient descent and plain GD, vmapped over replicas
  twins   the families that run on it (DP-SGD, DP-LSSGD, DP-GD, output and input perturbation), each a batched fit
          that shares its calibration and ledger with the numpy path

A layer between the runner and the algorithms: it builds on the algorithms' plans and ledgers, and the
runner, the audits and the benchmarks call it. Importing this package, `device` or `twins` does not
import JAX; `forms` and `loops` do, and are imported only when a twin runs.
"""
