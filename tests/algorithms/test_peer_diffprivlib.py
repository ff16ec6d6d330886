"""The diffprivlib peer (dpbench/algorithms/peer_diffprivlib.py): its theta is diffprivlib's coefficients in
dpbench's layout, it approaches dpbench's non-private optimum at a huge epsilon, the runner stores its claim
as declared by diffprivlib, a seed fixes it, and a missing library is one line naming the install."""

from __future__ import annotations

import numpy as np
import pytest

from dpbench.algorithms import PrivacyTarget, get, peers
from dpbench.algorithms.nonprivate import minimize_empirical_risk
from dpbench.algorithms.peer_diffprivlib import _diffprivlib_models, fit_diffprivlib_logreg
from dpbench.core.errors import DpbenchError
from tests.problems import logistic_problem, run_one_cell

try:  # what pytest.importorskip does, for an absent library and for one that cannot run here alike
    _diffprivlib_models()
except DpbenchError as exc:  # "not installed: ... pip install 'dpbench[diffprivlib]'" or why it cannot import/run
    pytest.skip(f"diffprivlib is an optional extra ({exc})", allow_module_level=True)

PROBLEM = logistic_problem(n=300, d=5, l2=1e-3)


def test_theta_is_diffprivlibs_coefficients_in_dpbenchs_layout():
    fit = fit_diffprivlib_logreg(PROBLEM, PrivacyTarget(1.0, None), np.random.default_rng(3))
    assert fit.theta.shape == (PROBLEM.model.n_params,)
    # the same call, made directly: the seed the fit draws first from its rng, dpbench's rows as they are
    seed = int(np.random.default_rng(3).integers(2**32))
    direct = _diffprivlib_models().LogisticRegression(
        epsilon=1.0, data_norm=1.0, C=1.0 / (PROBLEM.n * PROBLEM.model.l2), fit_intercept=False, max_iter=100,
        tol=1e-4, random_state=seed).fit(PROBLEM.X, PROBLEM.y)
    # equal up to float noise (the fit projects the rows onto the unit ball first: other operations, other last bits
    # on another CPU's kernels)
    np.testing.assert_allclose(fit.theta, direct.coef_[0], rtol=1e-12, atol=1e-14)
    margins = PROBLEM.model.decision_function(fit.theta, PROBLEM.X)
    np.testing.assert_allclose(margins, direct.decision_function(PROBLEM.X), rtol=1e-12, atol=1e-12)
    assert np.min(np.abs(margins)) > 1e-9  # no row on the boundary: the two predictions cannot differ by a tie
    np.testing.assert_array_equal(PROBLEM.model.predict(fit.theta, PROBLEM.X), direct.predict(PROBLEM.X))
    ledger = fit.privacy
    assert ledger.claim == "valid" and ledger.delta == 0.0 and ledger.epsilon_spent == {"diffprivlib": 1.0}
    assert ledger.get("C") == pytest.approx(1 / 0.3) and ledger.get("rows_projected") == 0


def test_a_huge_epsilon_approaches_the_nonprivate_optimum_of_the_same_objective():
    """At eps = 1e6: eps' = eps - 2 log(1 + 0.25/(n l2)) > 0, so no extra regulariser (Delta = 0), and
    the noise term b.w/n has ||b|| ~ Gamma(5, 2/eps'), about 1e-5: what is left is diffprivlib's
    L-BFGS-B stopping rule, max |grad_j| <= 1e-4. With strong convexity l2 = 1e-3 the gap is at most
    ||grad||^2 / (2 l2) <= 5 (1e-4)^2 / 2e-3 = 2.5e-5 (plus ~1e-8 of noise): 1e-4 leaves room, while
    the optimum of another regularisation (C off by 2x) is ~1e-2 away."""
    theta_star, lstar = minimize_empirical_risk(PROBLEM)
    fit = fit_diffprivlib_logreg(PROBLEM, PrivacyTarget(1e6, None), np.random.default_rng(0))
    assert fit.privacy.get("extra_regulariser_Delta") == 0.0
    gap = PROBLEM.model.loss(fit.theta, PROBLEM.X, PROBLEM.y) - lstar
    assert -1e-12 <= gap <= 1e-4
    assert np.linalg.norm(fit.theta - theta_star) <= np.sqrt(2 * 1e-4 / PROBLEM.model.l2)
    other = fit_diffprivlib_logreg(PROBLEM, PrivacyTarget(1e6, None), np.random.default_rng(0), C=2 / (PROBLEM.n * 1e-3))
    assert PROBLEM.model.loss(other.theta, PROBLEM.X, PROBLEM.y) - lstar > 1e-3


def test_the_same_seed_gives_the_same_theta_and_another_seed_another():
    first = fit_diffprivlib_logreg(PROBLEM, PrivacyTarget(0.5, None), np.random.default_rng(7))
    again = fit_diffprivlib_logreg(PROBLEM, PrivacyTarget(0.5, None), np.random.default_rng(7))
    other = fit_diffprivlib_logreg(PROBLEM, PrivacyTarget(0.5, None), np.random.default_rng(8))
    np.testing.assert_array_equal(first.theta, again.theta)
    assert not np.array_equal(first.theta, other.theta)


def test_the_runner_stores_the_claim_as_declared_by_diffprivlib(tmp_path, data_dir):
    record = run_one_cell(tmp_path, "diffprivlib_logreg", data_dir)
    privacy = record["privacy"]
    assert privacy["claim"] == "declared"
    assert privacy["claim_reason"].startswith(f"declared by diffprivlib {peers.version('diffprivlib')}: ")
    assert privacy["delta"] == 0.0 and privacy["adjacency"] == "replace-one"
    assert privacy["rows_projected"] == 0  # dpbench's rows are inside ||x|| <= 1 already
    assert record["n_params"] == record["n_features"]


def test_a_missing_library_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setitem(peers.EXTRAS, "diffprivlib", ("dpbench_no_such_module", peers.EXTRAS["diffprivlib"][1]))
    with pytest.raises(DpbenchError) as raised:
        get("diffprivlib_logreg").fit(PROBLEM, PrivacyTarget(1.0, None), np.random.default_rng(0))
    message = str(raised.value)
    assert message == ("diffprivlib is not installed: the peer algorithms that run it need it: "
                       "pip install 'dpbench[diffprivlib]'")
    assert "\n" not in message
