"""The built-in static figures (PNG and PDF), drawn from curves tables only (never from models or
data). Importing this module registers every built-in figure kind: `FIGURES` names it as its
built-ins module (dpbench.figures.kinds).

* `metric_over_epsilon` (dpbench.figures.epsilon): a metric over epsilon;
* `metric_over_n`, `metric_over_d` (dpbench.figures.sweeps): a metric over a swept n or d;
* `metric_over_iterations` (dpbench.figures.traces): a metric over the iterations of the fits;
* `audit_figure` (dpbench.figures.audit): audited against claimed epsilon, not a figure kind.

What every figure says on its face:
  * one legend entry per method (its colour), with the caveats all its points share, and a style
    key: one line style and marker fill per meaning, references in patterns no curve uses
    (dpbench.figures.style);
  * bands are the 95% confidence interval of the mean over seeds (curves.csv `ci_low`, `ci_high`),
    kept inside the metric's range; on a log axis a mean <= 0 (a non-private optimality gap) is a
    zero mark labelled "0" on the y axis (dpbench.figures.bands);
  * reference lines in grey: a paper's rate with its constants fitted to one curve, the
    majority-class accuracy (its value in the right margin), the projection radius
    (dpbench.figures.references);
  * a method far off the others does not set a panel's y range: it is clipped with arrows at the
    edge and a note above the panel (dpbench.figures.ranges);
  * a footer of at most two lines: bands, seeds, where the guarantees are explained (dpbench.figures.frame).
"""

from dpbench.figures.audit import audit_figure
from dpbench.figures.epsilon import metric_over_epsilon
from dpbench.figures.sweeps import metric_over_d, metric_over_n
from dpbench.figures.traces import metric_over_iterations

__all__ = ["audit_figure", "metric_over_d", "metric_over_epsilon", "metric_over_iterations", "metric_over_n"]
