"""Empirical privacy audits: canary recipes (`canaries`), an audit's declaration and validation
(`setup`), the trials of a distinguishing game (`trials`), the multi-run audit with its
Clopper-Pearson bound and Gaussian-DP estimates (`multi_run`), the one-run audit (`one_run`) and
the white-box observers that record every noisy step (`whitebox`)."""
