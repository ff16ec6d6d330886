"""Experiment specs: a YAML file parsed and validated into an `Experiment` (`experiment`), whose
grid of cells the runner runs, and the catalogue of every registered component (`catalog`)."""
