"""Experiment specs: a YAML file parsed and validated into an `Experiment` (`experiment`), whose
grid of cells the runner runs, and the catalogue of every registered component (`catalog`)."""

from dpbench.core.moved import forward

__getattr__ = forward(__name__)  # the names of the old module dpbench.spec, with a DeprecationWarning
