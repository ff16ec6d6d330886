"""Experiment specs: a YAML file parsed and validated into an `Experiment` (`experiment`: `load`),
whose grid of cells (`grid`) the runner runs, and the catalogue of every registered component
(`catalog`). The parts of a spec are checked in modules named for what they hold: `sections`,
`components`, `algorithms`, `tuning`, `figure_specs`, `audits`, `profiles`, `yaml_loader`."""

from dpbench.core.moved import forward

__getattr__ = forward(__name__)  # the names of the old module dpbench.spec, with a DeprecationWarning
