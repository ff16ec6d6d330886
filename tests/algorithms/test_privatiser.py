"""The privatiser (dpbench/algorithms/privatiser.py): a privatised fit reaches its rows only through
dpbench's mechanisms, whose noise is calibrated as an independent accountant says, whose clipping
holds the sensitivity for any record, and whose ledger the runner stores as the run's, `valid` (or
`declared` for a sensitivity the plugin declares). A plugin that owns its loop is stored `declared`,
and only dpbench's schema of what it writes (`dpbench/run/plugin_records.py`)."""

from __future__ import annotations

import json
import textwrap
from typing import Annotated

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from dpbench.algorithms import Param, PrivacyTarget, Privatiser, PrivatiserError, Problem, privatised_algorithm
from dpbench.algorithms import release_check
from dpbench.algorithms.base import REGISTRY
from dpbench.algorithms.releases import Tally, observing, tallying
from dpbench.core.ledger import Ledger
from dpbench.run import plugins
from tests.problems import logistic_problem

TARGET = PrivacyTarget(epsilon=1.0, delta=1e-5)


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch):
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    monkeypatch.setattr(plugins, "_IMPORTED", dict(plugins._IMPORTED))


def _fit(body, name="privatised_test"):
    """A privatised fit (not registered) whose body is `body(data, rng, **hyper)`."""
    @privatised_algorithm(name, title="test", citation="none", updates=True, register=False)
    def fit(data: Privatiser, privacy: PrivacyTarget, rng: np.random.Generator, *,
            lr: Annotated[float, Param("step size", minimum=0, exclusive_minimum=True)] = 0.5):
        return body(data, rng, lr=lr)

    return fit.dpbench_component


def test_the_rows_are_reachable_only_through_the_mechanisms():
    problem = logistic_problem(n=200, d=3)
    info = _fit(lambda data, rng, lr: data.X)
    with pytest.raises(PrivatiserError, match=r"rows \(X\) are reachable only through the privatiser.*noisy_sgd"):
        info.fit(problem, TARGET, np.random.default_rng(0))
    info = _fit(lambda data, rng, lr: data.y)
    with pytest.raises(PrivatiserError, match=r"rows \(y\)"):
        info.fit(problem, TARGET, np.random.default_rng(0))
    seen = {}

    def public(data, rng, lr):
        seen.update(n=data.n, d=data.n_features, params=data.model.n_params)
        return data.noisy_gd(steps=3, lr=lr, clip_norm=1.0)

    _fit(public).fit(problem, TARGET, np.random.default_rng(0))
    assert seen == {"n": 200, "d": 3, "params": 3}


def test_one_mechanism_per_fit_and_parameters_only():
    problem = logistic_problem(n=200, d=3)
    twice = _fit(lambda data, rng, lr: (data.noisy_gd(steps=2, lr=lr, clip_norm=1.0),
                                        data.noisy_gd(steps=2, lr=lr, clip_norm=1.0))[1])
    with pytest.raises(PrivatiserError, match="called noisy_gd after noisy_gd: one mechanism per fit"):
        twice.fit(problem, TARGET, np.random.default_rng(0))
    with pytest.raises(PrivatiserError, match="returned without calling a mechanism"):
        _fit(lambda data, rng, lr: np.zeros(3)).fit(problem, TARGET, np.random.default_rng(0))
    with pytest.raises(PrivatiserError, match=r"parameters of shape \(2,\); the model has 3"):
        _fit(lambda data, rng, lr: data.noisy_gd(steps=1, lr=lr, clip_norm=1.0)[:2]).fit(
            problem, TARGET, np.random.default_rng(0))


def test_noisy_sgd_is_dpsgd_s_mechanism_with_its_ledger_and_every_step_reported():
    """The privatiser's noisy SGD draws and releases exactly what the built-in DP-SGD does with the
    same generator (its own is spawned from the fit's), with DP-SGD's ledger, every step reported."""
    from dpbench.algorithms import get

    problem = logistic_problem(n=500, d=4, seed=3)
    info = _fit(lambda data, rng, lr: data.noisy_sgd(epochs=2, batch_size=25, lr=lr, clip_norm=0.5))
    seen = []
    with observing(seen.append), tallying() as tally:
        fit = info.fit(problem, TARGET, np.random.default_rng(7))
    ledger = fit.privacy
    assert ledger.claim == "valid" and ledger["privatiser"] == "noisy_sgd"
    assert ledger["steps"] == 40 and len(seen) == 40 and tally.steps == 40
    assert release_check.check(tally, ledger).status == "consistent"
    builtin = get("dpsgd").fit(problem, TARGET, np.random.default_rng(7).spawn(1)[0], epochs=2, batch_size=25,
                               lr=0.5, clip_norm=0.5)
    assert np.allclose(builtin.theta, fit.theta, rtol=1e-12, atol=1e-12)
    assert builtin.privacy["noise_multiplier"] == ledger["noise_multiplier"]


def _pld_epsilon(event: dp_event.DpEvent, delta: float) -> float:
    """Epsilon of one event by dp-accounting's PLD accountant (independent of dpbench's calibration)."""
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    return accountant.compose(event).get_epsilon(delta)


@pytest.mark.parametrize("epsilon, delta", [(1.0, 1e-5), (0.3, 1e-6), (4.0, 1e-5)])
def test_gaussian_sum_is_calibrated_to_the_target_and_clips_every_record(epsilon, delta):
    problem = logistic_problem(n=50, d=2, seed=1)
    target = PrivacyTarget(epsilon=epsilon, delta=delta)
    data = Privatiser(problem, target, np.random.default_rng(0))
    data.gaussian_sum(lambda x, y: np.array([1000.0 * y, 1.0]), clip_norm=2.0)
    ledger = data.result(np.zeros(2)).privacy
    assert ledger.claim == "valid" and ledger.sensitivity == 2.0
    z = ledger["noise_multiplier"]
    assert _pld_epsilon(dp_event.GaussianDpEvent(z), delta) == pytest.approx(epsilon, rel=2e-3)
    # neighbours (one record added) with the same noise: the sums differ by exactly the clipped record
    X, y = problem.X, problem.y
    bigger = Problem(model=problem.model, X=np.vstack([X, [[5.0, -3.0]]]), y=np.append(y, 1.0))
    a = Privatiser(problem, target, np.random.default_rng(1)).gaussian_sum(lambda x, y: x * 1e3, clip_norm=2.0)
    b = Privatiser(bigger, target, np.random.default_rng(1)).gaussian_sum(lambda x, y: x * 1e3, clip_norm=2.0)
    assert np.linalg.norm(b - a) == pytest.approx(2.0, rel=1e-9)


def test_a_declared_sensitivity_is_declared_and_the_laplace_scale_is_the_textbook_one():
    problem = logistic_problem(n=80, d=2, seed=2)
    data = Privatiser(problem, TARGET, np.random.default_rng(0))
    data.laplace(lambda X, y: X.mean(axis=0), sensitivity=2.0 / 80)
    ledger = data.result(np.zeros(2)).privacy
    assert ledger.claim == "declared" and "declared by the plugin" in ledger.claim_reason
    assert ledger["laplace_scale"] == pytest.approx((2.0 / 80) / 1.0)
    assert _pld_epsilon(dp_event.LaplaceDpEvent(ledger["laplace_scale"] / (2.0 / 80)), 1e-5) == pytest.approx(
        1.0, abs=2e-3)
    data = Privatiser(problem, TARGET, np.random.default_rng(0))
    data.gaussian(lambda X, y: X.mean(axis=0), sensitivity=0.1)
    ledger = data.result(np.zeros(2)).privacy
    assert ledger.claim == "declared"
    assert _pld_epsilon(dp_event.GaussianDpEvent(ledger["noise_multiplier"]), 1e-5) == pytest.approx(1.0, rel=2e-3)


def test_a_composition_with_no_step_reported_is_declared_not_valid():
    problem = logistic_problem(n=300, d=3)
    fit = _fit(lambda data, rng, lr: data.noisy_sgd(epochs=1, batch_size=30, lr=lr, clip_norm=1.0)).fit(
        problem, TARGET, np.random.default_rng(0))
    silent = release_check.with_release_check(fit.privacy, Tally())
    assert silent.claim == "declared"
    assert "composes 10 noisy steps and the algorithm reported none" in silent.claim_reason
    one = Ledger.from_dict({**fit.privacy.as_dict(), "event": {"type": "GaussianDpEvent", "noise_multiplier": 3.0},
                            "steps": 1})
    assert release_check.with_release_check(one, Tally()).claim == "valid"  # one mechanism: nothing to report


PLUGINS = textwrap.dedent('''\
    from typing import Annotated

    import numpy as np

    from dpbench.algorithms import Fit, Param, algorithm, ledger, privatised_algorithm, released_steps
    from dpbench.core.ledger import Adjacency
    from dpbench.privacy import calibrate_dpsgd_noise, dpsgd_epsilon_report
    from dpbench.privacy.events import dpsgd_event_json


    @privatised_algorithm("privatised_sgd_test", title="test", citation="none", updates=True)
    def privatised(data, privacy, rng, *, epochs: Annotated[float, Param("epochs", minimum=0)] = 1.0):
        return data.noisy_sgd(epochs=epochs, batch_size=32, lr=0.5, clip_norm=1.0, trace_every=5)


    @algorithm("leaky_owned_test", title="test", citation="none", private=True)
    def leaky(problem, privacy, rng, *, epochs: Annotated[float, Param("epochs", minimum=0)] = 1.0):
        n, q = problem.n, 32 / problem.n
        steps = round(epochs / q)
        z = calibrate_dpsgd_noise(privacy.epsilon, privacy.delta, q, steps)
        theta = np.zeros(problem.model.n_params)
        released_steps(steps, z, rate=q, clip_norm=1.0)
        return Fit(theta=theta, trace=[{"step": 1, "theta": theta, "rows": problem.X[:3], "train_loss": -1.0}],
                   privacy=ledger(private=True, mechanism="mine", claim="valid", target_epsilon=privacy.epsilon,
                                  delta=privacy.delta, epsilon_spent=dpsgd_epsilon_report(z, q, steps, privacy.delta),
                                  adjacency=Adjacency.ADD_REMOVE, sensitivity=1.0, event=dpsgd_event_json(z, q, steps),
                                  sampling={"kind": "poisson", "rate": q}, steps=steps, noise_multiplier=z,
                                  raw=problem.X[:5].tolist(), first_row=",".join(map(str, problem.X[0])) * 20,
                                  note="fine"))
    ''')


def test_the_runner_stores_privatised_runs_valid_and_owned_loops_declared_without_their_rows(tmp_path, data_dir):
    from dpbench.run.cells import CellContext, load_dataset, run_cell
    from dpbench.spec.experiment import load

    (tmp_path / "mine.py").write_text(PLUGINS)
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent("""\
        name: privatiser
        seed: 0
        seeds: 1
        datasets: [breast_cancer]
        models: [logreg]
        algorithms:
          - {plugin: mine.py:privatised}
          - {plugin: mine.py:leaky}
        epsilons: [1.0]
        delta: 1.0e-5
        metrics: [accuracy]
        """))
    context = CellContext(data_dir=str(data_dir), cache_dir=str(tmp_path / "cache"))
    cells = load(str(spec)).cells()
    records = {c.algorithm: run_cell(c, context) for c in cells}
    private = records["privatised_sgd_test"]
    assert private["privacy"]["claim"] == "valid" and private["privacy"]["privatiser"] == "noisy_sgd"
    assert private["privacy"]["release_check"].startswith("consistent: ")
    assert private["trace"] and "train_loss" in private["trace"][0]  # dpbench's own trace is kept
    owned = records["leaky_owned_test"]["privacy"]
    assert owned["claim"] == "declared" and owned["claim_reason"].startswith("declared by the plugin")
    assert owned["note"] == "fine" and owned["sampling"] == {"kind": "poisson", "rate": 32 / 409}  # n_train of Breast Cancer
    assert "raw" not in owned and "first_row" not in owned
    assert owned["dropped"] == "raw, first_row, trace rows, trace train_loss"
    (entry,) = records["leaky_owned_test"]["trace"]
    assert set(entry) >= {"step", "train_loss", "accuracy"} and entry["train_loss"] > 0  # dpbench's, not -1
    stored = json.dumps(records["leaky_owned_test"])
    X = load_dataset(cells[0], context).X_train  # the rows the plugin tried to store: none of their values is
    assert not [v for v in X[:5].ravel() if abs(v) > 1e-3 and json.dumps(float(v)) in stored]
