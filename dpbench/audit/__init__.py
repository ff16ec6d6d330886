"""Empirical privacy audits: canary recipes (`canaries`), an audit's declaration and validation
(`setup`), the trials of a distinguishing game (`trials`), the multi-run audit with its
Clopper-Pearson bound and Gaussian-DP estimates (`multi_run`), the one-run audit (`one_run`) and
the white-box observers that record every noisy step (`whitebox`)."""

from dpbench.core.moved import forward

__getattr__ = forward(__name__)  # the names of the old module dpbench.audit, with a DeprecationWarning
