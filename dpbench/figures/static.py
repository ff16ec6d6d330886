"""The built-in static figures (PNG and PDF), drawn from curves tables only (never from models or
data). Importing this module registers every built-in figure kind: `FIGURES` names it as its
built-ins module (dpbench.figures.kinds).

* `metric_over_epsilon` (dpbench.figures.epsilon): a metric over epsilon;
* `metric_over_n`, `metric_over_d` (dpbench.figures.sweeps): a metric over a swept n or d;
* `metric_over_iterations` (dpbench.figures.traces): a metric over the iterations of the fits;
* `audit_figure` (dpbench.figures.audit): audited against claimed epsilon, not a figure kind.

What every figure says on its face:
  * bands are the 95% confidence interval of the mean over seeds (curves.csv `ci_low`, `ci_high`),
    kept inside the metric's range; on a log axis a mean <= 0 (a non-private optimality gap) is
    drawn at the panel's floor with a down-triangle (dpbench.figures.bands);
  * a private curve's guarantee is in its line style and in its legend entry ("label — selected
    among k (not private)", "— ε not certified", ...; dpbench.figures.style);
  * reference lines in grey: a paper's rate with its constants fitted to one curve, the
    majority-class accuracy, the projection radius (dpbench.figures.references);
  * one legend for all panels and a footer saying how to read them (dpbench.figures.frame).
"""

from dpbench.figures.audit import audit_figure
from dpbench.figures.epsilon import metric_over_epsilon
from dpbench.figures.sweeps import metric_over_d, metric_over_n
from dpbench.figures.traces import metric_over_iterations

__all__ = ["audit_figure", "metric_over_d", "metric_over_epsilon", "metric_over_iterations", "metric_over_n"]
