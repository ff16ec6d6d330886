"""opacus_dpsgd: Opacus' DP-SGD as a peer (dpbench.algorithms.peer_opacus), checked against dpbench's own."""

from __future__ import annotations

import numpy as np
import pytest

from dpbench import models
from dpbench.algorithms import PrivacyTarget, Problem, get, peers, release_check, releases
from dpbench.core.errors import DpbenchError
from dpbench.core.ledger import Ledger
from dpbench.models import access
from dpbench.privacy import claim_check
from dpbench.run import plugin_records
from dpbench.run.cells import checked_releases
from tests.problems import tiny_rows

torch = pytest.importorskip("torch", reason="the Opacus peer needs torch: pip install torch==2.13.0 'dpbench[opacus]'")
pytest.importorskip("opacus", reason="the Opacus peer needs opacus: pip install torch==2.13.0 'dpbench[opacus]'")

from dpbench.algorithms import peer_opacus  # noqa: E402  (after the skip: the module itself imports no torch)

torch.set_num_threads(1)
TARGET = PrivacyTarget(epsilon=1.0, delta=1e-5)


def problem(model: str = "logreg", n: int = 200, d: int = 5, seed: int = 0) -> Problem:
    X, y = tiny_rows(n, d, seed)
    return Problem(model=models.make(model, d), X=X, y=y)


def observed_fit(prob: Problem, target: PrivacyTarget = TARGET, seed: int = 0, **params):
    """(fit, releases seen, tally) of one fit, observed and tallied as verify and the runner do."""
    seen: list[releases.Release] = []

    def keep(r: releases.Release) -> None:  # the arrays are read before the loop changes them
        seen.append(releases.Release(**{**r.__dict__, "theta": np.array(r.theta), "released": np.array(r.released)}))

    with releases.tallying() as tally, releases.observing(keep):
        fit = get("opacus_dpsgd").fit(prob, target, np.random.default_rng(seed), **params)
    return fit, seen, tally


def test_logreg_fit_releases_ledger_and_stored_claim():
    """The fast one: T steps reported with the ledger's z, q and clip (the release check: consistent),
    Opacus' RDP epsilon equal to dpbench's for the same (z, q, T), stored "declared by opacus <version>"."""
    prob = problem()
    fit, seen, tally = observed_fit(prob, epochs=2.0, batch_size=20.0, lr=0.5, clip_norm=1.0)
    ledger = Ledger.from_dict(fit.privacy)
    z, steps, q = ledger.get("noise_multiplier"), ledger.get("steps"), ledger.get("sampling")["rate"]
    assert q == pytest.approx(0.1)  # n = 200, B = 20: b = 20, 10 batches, exactly B/n
    assert steps == 20 and len(seen) == steps == tally.steps
    assert [r.step for r in seen] == list(range(1, steps + 1))
    assert all(r.noise_std == pytest.approx(z * 1.0) and r.rate == q and r.clip_norm == 1.0 for r in seen)
    assert all(r.weight == pytest.approx(1.0 / ledger.get("opacus_expected_batch_size")) for r in seen)
    assert all(r.theta.shape == r.released.shape == (5,) for r in seen)
    assert np.all(seen[0].theta == 0.0)  # logreg's theta_0, as dpsgd starts
    assert release_check.check(tally, ledger).status == "consistent"
    # Opacus' RDP and dpbench's RDP: the same bound (Mironov et al. 2019) on the same (z, q, T); dpbench's
    # order grid contains Opacus' (1.1..10.9, 12..63) and extends and refines it, so dpbench's is never
    # larger, and here (optimal order inside Opacus' grid) equal up to the accountants' 1e-3 refinement
    spent = ledger.epsilon_spent
    assert spent["rdp"] <= spent["opacus-rdp"] * (1 + 1e-9)
    assert spent["opacus-rdp"] <= spent["rdp"] * (1 + 1e-3)
    assert spent["opacus-rdp"] <= TARGET.epsilon  # Opacus calibrated z to the target with its accountant
    assert ledger.claim == "valid" and ledger.mechanism.startswith("DP-SGD (Opacus ")
    # as the runner stores it: recomputed from the event, release-checked, then the peer's "declared"
    info = get("opacus_dpsgd")
    kept = checked_releases(claim_check.checked(ledger, TARGET.epsilon, TARGET.delta), tally)
    assert kept.claim == "valid" and kept.get(release_check.DETAIL).startswith("consistent: 20 steps")
    assert min(kept.epsilon_recomputed.values()) <= TARGET.epsilon
    declared = plugin_records.owned_claim(kept, info.mechanism_owner, info.library)
    assert info.mechanism_owner == "library" and info.library == "opacus"
    assert declared.claim == "declared"
    assert declared.claim_reason.startswith(f"declared by opacus {peers.version('opacus')}: ")
    assert np.all(np.isfinite(fit.theta)) and fit.theta.shape == (5,)


@pytest.mark.filterwarnings("ignore:Secure RNG turned off", "ignore:Optimal order is the largest alpha")
def test_noise_multiplier_is_make_private_with_epsilon_s():
    """The fit's z (get_noise_multiplier, then make_private) is the one make_private_with_epsilon picks."""
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    prob = problem()
    fit = get("opacus_dpsgd").fit(prob, TARGET, np.random.default_rng(0), epochs=2.0, batch_size=20.0)
    module = torch.nn.Linear(5, 1, bias=False).double()
    loader = DataLoader(TensorDataset(torch.from_numpy(prob.X), torch.from_numpy(prob.y)), batch_size=20)
    _, optimizer, _ = PrivacyEngine(accountant="rdp").make_private_with_epsilon(  # Opacus 1.6 defaults to prv
        module=module, optimizer=torch.optim.SGD(module.parameters(), lr=0.5), data_loader=loader,
        target_epsilon=TARGET.epsilon, target_delta=TARGET.delta, epochs=2.0, max_grad_norm=1.0)
    assert Ledger.from_dict(fit.privacy).get("noise_multiplier") == optimizer.noise_multiplier


@pytest.mark.parametrize("model", ["logreg", "ridge", "mlp"])
def test_module_has_dpbench_layout_and_loss(model):
    """The torch twin computes dpbench's output and the gradient of dpbench's data loss at the same theta."""
    prob = problem(model, n=30, d=4)
    theta = prob.model.init(np.random.default_rng(3)) + 0.1 * np.random.default_rng(4).standard_normal(
        prob.model.n_params)
    module, params, to_theta, load = peer_opacus._module(prob)
    load(theta)
    assert np.array_equal(to_theta(), theta)
    X = torch.from_numpy(prob.X)
    out = module(X).reshape(-1)
    np.testing.assert_allclose(out.detach().numpy(), prob.model.decision_function(theta, prob.X), rtol=1e-12,
                               atol=1e-12)
    if model == "ridge":
        loss = torch.nn.MSELoss()(out, torch.from_numpy(prob.y))  # dpbench's (u - y)^2, no 1/2
    else:
        loss = torch.nn.BCEWithLogitsLoss()(out, torch.from_numpy((prob.y > 0).astype(np.float64)))
    loss.backward()
    grad = np.concatenate([p.grad.reshape(-1).numpy() for p in params])
    np.testing.assert_allclose(float(loss.detach()), prob.model.loss(theta, prob.X, prob.y) - prob.model.reg(theta),
                               rtol=1e-12)
    np.testing.assert_allclose(grad, prob.model.data_grad(theta, prob.X, prob.y), rtol=1e-10, atol=1e-12)


def test_opacus_rate_is_the_closest_to_b_over_n():
    assert peer_opacus.opacus_rate(200, 20.0) == (20, 10)
    b, k = peer_opacus.opacus_rate(455, 32.0)  # 455/32 = 14.2: 14 batches (b = 33), q = 1/14
    assert k == 14 and -(-455 // b) == 14
    assert peer_opacus.opacus_rate(10, 1.0) == (1, 10)
    assert peer_opacus.opacus_rate(10, 50.0) == (10, 1)  # B above n: every row, q = 1


@pytest.mark.slow
def test_rate_and_steps_where_opacus_epochs_hold_one_batch_fewer():
    """93 batches: Opacus' sampler holds int(1 / (1/93)) = 92 batches an epoch, and draws each at 1/93, the
    rate z was calibrated for; the fit declares 1/93 and runs the T = int(epochs / (1/93)) = 92 steps Opacus'
    calibration composes."""
    fit, seen, tally = observed_fit(problem(n=93), epochs=1.0, batch_size=1.0, lr=0.1)
    ledger = Ledger.from_dict(fit.privacy)
    assert ledger.get("sampling")["rate"] == 1 / 93 and ledger.get("steps") == len(seen) == int(1.0 / (1 / 93)) == 92
    assert release_check.check(tally, ledger).status == "consistent"


@pytest.mark.slow
def test_expected_batch_size_truncated_to_zero_is_corrected():
    """n = 49, B = 1: Opacus' expected batch size int(49 * (1/49)) = int(0.999...) = 0 (it would divide by 0);
    the fit divides by round(n q) = 1 and says so."""
    fit, seen, tally = observed_fit(problem(n=49), epochs=1.0, batch_size=1.0, lr=0.1)
    ledger = Ledger.from_dict(fit.privacy)
    assert ledger.get("expected_batch_size_corrected_from") == 0 and ledger.get("opacus_expected_batch_size") == 1
    assert all(r.weight == 1.0 for r in seen) and np.all(np.isfinite(fit.theta))
    assert release_check.check(tally, ledger).status == "consistent"


@pytest.mark.slow
@pytest.mark.parametrize("model", ["logreg", "mlp"])
def test_full_batch_releases_are_dpbench_clipped_mean_plus_noise(model):
    """At q = 1 (B = n) Opacus' batch is every row, so each release must be dpbench's clipped gradient sum
    over all rows divided by Opacus' expected batch size n, plus N(0, (zC/n)^2) per coordinate; and the
    next iterate theta - lr (release + l2 theta) (SGD's weight decay is the model's L2 term). Checks the
    clipping (flat, over all parameters), the loss and the layout on every step; also what non-private
    SGD on the same batches would do, up to the noise, which is measured."""
    prob = problem(model, n=60, d=4)
    C, lr = 0.05, 0.5  # small C: most per-example gradients clipped
    with access.recording(iterates=True) as evaluated:
        fit, seen, tally = observed_fit(prob, PrivacyTarget(epsilon=20.0, delta=1e-5), epochs=8.0, batch_size=60.0,
                                        lr=lr, clip_norm=C)
    # the batches as verify's recorder sees them: every row, at the iterate each step declares
    assert evaluated.sizes == [prob.n] * len(seen)
    assert evaluated.points == [access.digest(r.theta) for r in seen]
    ledger = Ledger.from_dict(fit.privacy)
    z, n = ledger.get("noise_multiplier"), prob.n
    assert ledger.get("sampling")["rate"] == 1.0 and len(seen) == ledger.get("steps") == 8
    assert ledger.get("opacus_expected_batch_size") == n
    std = z * C / n
    residuals = []
    for r in seen:
        clipped, _ = prob.model.clipped_grad_sum(r.theta, prob.X, prob.y, C)
        residuals.append((r.released - clipped / n) / std)
    residuals = np.concatenate(residuals)
    assert np.max(np.abs(residuals)) < 6.0  # noise of the declared std, not a different statistic
    assert 0.5 < np.mean(residuals ** 2) < 1.6  # chi-square / dof over 8 m coordinates (m >= 4 x 8 = 32 dof)
    thetas = [r.theta for r in seen] + [fit.theta]
    for r, after in zip(seen, thetas[1:]):
        np.testing.assert_allclose(after, r.theta - lr * (r.released + prob.model.l2 * r.theta), rtol=1e-12,
                                   atol=1e-14)
    assert release_check.check(tally, ledger).status == "consistent"


@pytest.mark.slow
def test_mlp_starts_from_dpbench_init_and_reports_every_step():
    prob = problem("mlp", n=120, d=4)
    fit, seen, tally = observed_fit(prob, seed=7, epochs=1.0, batch_size=12.0, lr=0.3, clip_norm=1.0)
    ledger = Ledger.from_dict(fit.privacy)
    np.testing.assert_array_equal(seen[0].theta, prob.model.init(np.random.default_rng(7)))
    assert len(seen) == ledger.get("steps") == 10 and fit.theta.shape == (prob.model.n_params,)
    assert release_check.check(tally, ledger).status == "consistent"
    assert np.all(np.isfinite(fit.theta))


@pytest.mark.slow
def test_prv_accountant_close_to_dpbench_pld():
    """Opacus' PRV accountant against dpbench's PLD for the same (z, q, T): both numerical (not bounds of
    the RDP kind); PRV's default eps_error is 0.01, dpbench's PLD discretisation is within ~0.3 %
    (dpbench.privacy.accounting), so they agree within 0.02 + 2 % of epsilon."""
    fit, seen, tally = observed_fit(problem(), epochs=2.0, batch_size=20.0, accountant="prv")
    ledger = Ledger.from_dict(fit.privacy)
    spent = ledger.epsilon_spent
    assert ledger.mechanism.endswith(", prv)") and "opacus-prv" in spent
    assert abs(spent["opacus-prv"] - spent["pld"]) <= 0.02 + 0.02 * spent["pld"]
    assert spent["opacus-prv"] <= TARGET.epsilon
    assert release_check.check(tally, ledger).status == "consistent"


@pytest.mark.slow
def test_fit_is_reproducible_from_its_rng():
    prob = problem(n=100)
    a = get("opacus_dpsgd").fit(prob, TARGET, np.random.default_rng(5), epochs=1.0, batch_size=10.0)
    b = get("opacus_dpsgd").fit(prob, TARGET, np.random.default_rng(5), epochs=1.0, batch_size=10.0)
    c = get("opacus_dpsgd").fit(prob, TARGET, np.random.default_rng(6), epochs=1.0, batch_size=10.0)
    assert np.array_equal(a.theta, b.theta) and not np.array_equal(a.theta, c.theta)


def test_missing_library_is_one_line(monkeypatch):
    """Without opacus: the fit fails in one line naming the pip install, and so does a run about to
    fit the peer (pipeline.require_libraries); the spec itself still loads."""
    from dpbench.experiment.pipeline import require_libraries
    from dpbench.spec.algorithms import algorithm_of

    monkeypatch.setitem(peers.EXTRAS, "opacus", ("dpbench_no_such_module_opacus", peers.EXTRAS["opacus"][1]))
    with pytest.raises(DpbenchError) as raised:
        get("opacus_dpsgd").fit(problem(n=20), TARGET, np.random.default_rng(0))
    message = str(raised.value)
    assert "\n" not in message and message.startswith("opacus is not installed") and "pip install" in message
    assert algorithm_of({"name": "opacus_dpsgd"}, "algorithms[0]", "")[0].name == "opacus_dpsgd"

    class Cell:  # what require_libraries reads of a cell
        algorithm = "opacus_dpsgd"

    with pytest.raises(DpbenchError) as refused:
        require_libraries([Cell()])
    assert "\n" not in str(refused.value) and "pip install torch==2.13.0 'dpbench[opacus]'" in str(refused.value) and "pip install torch==2.13.0 'dpbench[opacus]'" in str(refused.value)
