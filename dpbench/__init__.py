"""dpbench: reproduce, compare and audit differentially private learning algorithms.

Flow (see README): experiments/X.yaml -> spec.Experiment -> cells -> runner -> store ->
curves -> plots / check.
"""

__version__ = "0.1.0"
