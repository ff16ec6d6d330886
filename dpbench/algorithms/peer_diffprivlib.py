"""Peer: diffprivlib's objective perturbation for logistic regression (Holohan et al. 2019), run as a
dpbench algorithm beside dpbench's own KST12 objective perturbation (`objective_perturbation`).

Mechanism (diffprivlib `LogisticRegression`, `_logistic_regression_path` and `mechanisms.Vector`, as
the code of 0.6.6 reads; Chaudhuri, Monteleoni, Sarwate 2011 (CMS11), Algorithm 2, whose privacy is
their Theorem 9): with n rows, Lambda = 1/(C n) and c = 1/4 (the logistic loss's |l''| bound),

    theta = argmin_w (1/n) sum_i log(1 + exp(-y_i <w, x_i>)) + (Lambda/2)||w||^2 + (1/n) b^T w + (Delta/2)||w||^2,

    eps' = eps - 2 log(1 + c R / (n Lambda)), R = data_norm;
    if eps' <= 0: Delta = (c R / (exp(eps/4) - 1) - n Lambda) / n and eps' = eps/2, else Delta = 0;
    b has density proportional to exp(-(eps'/(2R)) ||b||) (norm ~ Gamma(p, 2R/eps'), uniform direction),

solved by scipy's L-BFGS-B (pgtol `tol` = 1e-4, at most `max_iter` iterations). Rows are first clipped
to ||x|| <= R (`clip_to_norm`, per record). The guarantee is pure eps-DP (delta = 0; the Vector
mechanism refuses any other delta) for data sets that differ in one record with n fixed (CMS11's
"differ in a single entry": replace-one). CMS11's theorem is stated for ||x|| <= 1; for R = 1 the
calibration above is theirs exactly.

How dpbench calls it (`fit_diffprivlib_logreg`):

* Rows: dpbench's rows AS THEY ARE, intercept column included, with fit_intercept=False. dpbench's
  logreg has no separate bias (the data carry an intercept feature of value 1/sqrt(g+1)) and its L2
  term covers every coordinate of theta; diffprivlib with fit_intercept=True would append a column of
  ones (raising its data norm to sqrt(R^2 + 1)) and leave that coordinate unregularised (scikit-learn's
  `LinearModelLoss` penalises the weights only), while CMS11's proof needs the regulariser strongly
  convex in every coordinate (its Jacobian bound divides by n Lambda in all directions). Keeping the
  column and fit_intercept=False fits dpbench's model exactly and meets the theorem's assumptions.
* data_norm R: default `Model.ROW_NORM_BOUND` = 1, the bound dpbench's preprocessing guarantees for
  every row, intercept included (`dpbench.data.preprocess`, step 6: features divided by sqrt(g + 1);
  generated data are projected onto the unit ball): declared before any data is seen, never read from
  the private rows (diffprivlib would read max ||x|| from the data when data_norm is None and warn
  PrivacyLeakWarning; dpbench never passes None). Rows are projected onto ||x|| <= R by dpbench's
  `bounded_rows` before the call (the same per-record map as diffprivlib's `clip_to_norm`, which then
  changes nothing), so the ledger can count them (`rows_projected`, a diagnostic). With R > 1 the
  calibration is diffprivlib's extension (its issue #10): the Jacobian factor uses c R where the
  rank-one Hessian l'' x x^T of a row of norm R has eigenvalue up to c R^2, so the ledger notes that
  CMS11's Theorem 9 is then not what the calibration follows (`calibration_note`).
* Regularisation: diffprivlib's C. Its objective above is dpbench's reference objective L_ref =
  (1/n) sum_i l + (l2/2)||theta||^2 when Lambda = 1/(C n) = l2, i.e. C = 1/(n l2): the default
  (C = None) takes l2 from the model, so both peers minimise the same L_ref plus their privacy terms.
  The mapping to dpbench's KST12 (`objective_perturbation`): KST12's privacy regulariser Delta_KST/n =
  2 lambda_H / (eps_int n) (added to l2) plays the role of CMS11's Delta here (added only when
  eps' <= 0, i.e. when n l2 < c R / (exp(eps/2) - 1)); the model's l2 is the same term in both. To
  give both the same total regularisation, set the model's l2 (both read it), not C.
* Labels: dpbench's y in {-1, +1}; diffprivlib's binary fit takes classes_[1] = +1 as the positive
  class, so its coef_[0] is dpbench's theta exactly (the half-binomial loss log(1 + e^z) - [y = 1] z
  is log(1 + exp(-y z))), and `decision_function` agrees with diffprivlib's.
* Seed: diffprivlib's random_state is an int drawn from the fit's rng (`rng.integers(2**32)`), so
  the same cell seed gives the same theta.

Ledger: claim "valid" resting on CMS11 Theorem 9 as diffprivlib implements it (proof=...), which the
runner stores as "declared by diffprivlib <version>" (`dpbench.run.plugin_records.owned_claim`): no
dp-accounting DpEvent describes objective perturbation, so dpbench cannot recompute the epsilon;
`dpbench verify` and the final-model audit test it from outside. epsilon_spent {"diffprivlib": eps}
(the library's own word). A PrivacyLeakWarning from diffprivlib (its guarantee's assumptions not met
by what it was given) makes the claim "none", with the warning as the reason; a ConvergenceWarning
(L-BFGS stopped at max_iter) makes it "paper-only" (the theorem is for the exact minimiser).
The solver's tolerance is diffprivlib's (pgtol 1e-4), far looser than the 1e-8 dpbench's own
objective perturbation requires (`solver_tol` in the ledger).

Not ported: diffprivlib's `LinearRegression` (functional mechanism, Zhang et al. 2012). dpbench's only
regression model is ridge with the [S4] squared loss and a model L2 term, which diffprivlib's
unregularised least squares does not minimise, and its regression data (the heavy-tailed synthetic
sets of [S4]) have no declared bound on y (unbounded labels are the point of that setting), while the
functional mechanism needs bounds_y: any bound there would be chosen, not declared.
"""

from __future__ import annotations

import math
import warnings
from typing import Annotated, Any

import numpy as np

from dpbench.algorithms import peers
from dpbench.algorithms.base import Fit, PrivacyTarget, Problem, algorithm, bounded_rows, ledger
from dpbench.core.errors import DpbenchError
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import Param
from dpbench.models.base import Model

LIBRARY = "diffprivlib"
#: diffprivlib's bound c on the logistic loss's second derivative (`function_sensitivity`)
LOGISTIC_C = 0.25
#: diffprivlib's L-BFGS-B tolerance (pgtol), its default
DIFFPRIVLIB_TOL = 1e-4
#: scikit-learn versions diffprivlib 0.6.6 runs with: 1.8 removed LogisticRegression's multi_class
#: argument (its __init__ passes it), 1.9 removed sklearn.tree._tree.DOUBLE (its package import fails)
SKLEARN_BELOW = (1, 8)


def _release(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version string: "1.9.1" -> (1, 9, 1), "1.8.0rc1" -> (1, 8)."""
    out = []
    for part in version.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def _diffprivlib_models() -> Any:
    """diffprivlib.models, or a DpbenchError in one line: not installed (`peers.require`), or a
    diffprivlib <= 0.6.6 beside a scikit-learn it cannot run with (checked from the installed versions
    before the import, which itself fails under scikit-learn >= 1.9)."""
    sklearn = peers.version("scikit-learn")
    if (peers.available(LIBRARY) and _release(peers.version(LIBRARY)) <= (0, 6, 6)
            and _release(sklearn)[:2] >= SKLEARN_BELOW):
        raise DpbenchError(f"{LIBRARY} {peers.version(LIBRARY)} cannot run with scikit-learn {sklearn} (its "
                           f"LogisticRegression passes multi_class, removed in 1.8; its models import "
                           f"sklearn.tree._tree.DOUBLE, removed in 1.9): "
                           f"pip install 'scikit-learn<{SKLEARN_BELOW[0]}.{SKLEARN_BELOW[1]}'")
    peers.require(LIBRARY)
    import diffprivlib.models

    return diffprivlib.models


def diffprivlib_calibration(epsilon: float, n: int, C: float, data_norm: float) -> dict[str, float]:
    """What diffprivlib's Vector mechanism computes from (eps, n, C, R) (module docstring): eps', the
    extra regulariser Delta (an absolute weight, the objective's (Delta/2)||w||^2) and the scale 2R/eps'
    of the noise norm's Gamma law. Recomputed here for the ledger, from the same formulas."""
    alpha = 1.0 / C  # n Lambda
    eps_p = epsilon - 2.0 * math.log1p(LOGISTIC_C * data_norm / alpha)
    delta = 0.0
    if eps_p <= 0:
        delta = (LOGISTIC_C * data_norm / math.expm1(epsilon / 4) - alpha) / n
        eps_p = epsilon / 2
    return {"epsilon_prime": eps_p, "extra_regulariser_Delta": delta, "noise_norm_scale": 2.0 * data_norm / eps_p}


@algorithm("diffprivlib_logreg",
           title="objective perturbation (diffprivlib)",
           citation="Chaudhuri, Monteleoni, Sarwate, Differentially Private Empirical Risk Minimization, JMLR 12 "
                    "(2011), Algorithm 2 / Theorem 9; Holohan, Braghin, Mac Aonghusa, Levacher, Diffprivlib: the "
                    "IBM Differential Privacy Library, arXiv:1907.02444 (2019)",
           private=True, convex_only=True, library=LIBRARY)
def fit_diffprivlib_logreg(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    C: Annotated[float | None, Param(
        "diffprivlib's inverse regularisation C: its objective's L2 weight is Lambda = 1/(C n), so C = 1/(n l2) "
        "minimises dpbench's reference objective (logreg's l2); none: that C, from the model's l2",
        minimum=0, exclusive_minimum=True)] = None,
    max_iter: Annotated[int, Param("diffprivlib's L-BFGS-B iterations (its default 100; it stops at pgtol 1e-4)",
                                   minimum=1)] = 100,
    data_norm: Annotated[float, Param(
        "declared bound R on every row's L2 norm (intercept column included); rows are projected onto it; "
        "default: dpbench's preprocessing bound 1 (CMS11's assumption)",
        minimum=0, exclusive_minimum=True)] = Model.ROW_NORM_BOUND,
) -> Fit:
    if privacy.epsilon is None:
        raise ValueError("diffprivlib_logreg is a private algorithm: it needs a target epsilon")
    model = problem.model
    if model.name != "logreg":
        raise ValueError(f"diffprivlib_logreg fits logistic regression only (model logreg), not {model.name}")
    eps, n = float(privacy.epsilon), problem.n
    if C is None:
        if not model.l2 > 0:
            raise ValueError("diffprivlib_logreg: the model's l2 is 0, so C = 1/(n l2) is infinite; diffprivlib "
                             "needs a positive regularisation (set the model's l2 or C)")
        C = 1.0 / (n * model.l2)
    dpl = _diffprivlib_models()
    problem, rows = bounded_rows(problem, float(data_norm))
    seed = int(rng.integers(2**32))
    classifier = dpl.LogisticRegression(epsilon=eps, data_norm=float(data_norm), C=float(C), fit_intercept=False,
                                        max_iter=int(max_iter), tol=DIFFPRIVLIB_TOL, random_state=seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        classifier.fit(problem.X, problem.y)
    theta = np.asarray(classifier.coef_, dtype=float).reshape(-1).copy()
    if list(np.asarray(classifier.classes_, dtype=float)) != [-1.0, 1.0] or theta.shape != (model.n_params,):
        raise ValueError(f"diffprivlib_logreg: expected classes [-1, 1] and {model.n_params} coefficients, got "
                         f"{list(classifier.classes_)} and {theta.shape}")

    names = {type(w.message).__name__ for w in caught}
    leaks = [str(w.message) for w in caught if type(w.message).__name__ == "PrivacyLeakWarning"]
    unconverged = [str(w.message) for w in caught if type(w.message).__name__ == "ConvergenceWarning"]
    if leaks:
        claim, spent, reason = "none", {}, "diffprivlib warned PrivacyLeakWarning: " + " | ".join(leaks)
    elif unconverged:
        claim, spent = "paper-only", {LIBRARY: eps}
        reason = (f"CMS11 Theorem 9 is for the exact minimiser; diffprivlib's L-BFGS-B stopped at max_iter = "
                  f"{max_iter} without converging ({unconverged[0]})")
    else:
        claim, spent, reason = "valid", {LIBRARY: eps}, None
    calibration = diffprivlib_calibration(eps, n, float(C), float(data_norm))
    extra: dict[str, Any] = {}
    if data_norm > Model.ROW_NORM_BOUND:
        extra["calibration_note"] = (f"data_norm {data_norm:g} > 1: diffprivlib's eps' uses c R where a row's Hessian "
                                     f"has eigenvalue up to c R^2; CMS11 Theorem 9 is stated for R = 1")
    version = peers.version(LIBRARY)
    return Fit(theta=theta, trace=[], privacy=ledger(
        private=True,
        mechanism=f"objective perturbation ({LIBRARY} {version} LogisticRegression): minimiser of "
                  f"the logistic loss + (1/(2Cn))||w||^2 + b.w/n (+ (Delta/2)||w||^2), ||b|| ~ Gamma(p, 2R/eps'), "
                  f"pure eps-DP",
        claim=claim,
        target_epsilon=eps,
        delta=0.0,
        epsilon_spent=spent,
        adjacency=Adjacency.REPLACE_ONE,
        sensitivity=float(data_norm),
        claim_reason=reason,
        proof=f"Chaudhuri, Monteleoni, Sarwate 2011, Theorem 9 (Algorithm 2) / {LIBRARY} {version} "
              f"LogisticRegression (pure eps-DP, delta = 0)",
        library=LIBRARY,
        library_version=version,
        pure_dp="delta = 0: diffprivlib's Vector mechanism is pure eps-DP (it refuses delta != 0)",
        requested_delta=privacy.delta,
        data_norm=float(data_norm),
        data_norm_source="declared: dpbench's preprocessing bound ||x|| <= 1 (Model.ROW_NORM_BOUND)"
                         if data_norm == Model.ROW_NORM_BOUND else "declared by the spec (data_norm)",
        **rows,
        function_sensitivity_c=LOGISTIC_C,
        C=float(C),
        regulariser_Lambda=1.0 / (float(C) * n),
        model_l2=model.l2,
        fit_intercept=False,
        intercept="dpbench's intercept column is kept (fit_intercept=False): regularised with the rest, inside "
                  "the norm bound",
        **calibration,
        random_state=seed,
        solver="scipy L-BFGS-B (diffprivlib)",
        solver_tol=DIFFPRIVLIB_TOL,
        max_iter=int(max_iter),
        lbfgs_iterations=int(np.asarray(classifier.n_iter_).reshape(-1)[0]),
        library_warnings=", ".join(sorted(names)) if names else "none",
        **extra,
    ))
