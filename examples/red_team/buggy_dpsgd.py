"""A DP-SGD plugin with one deliberate bug at a time (`bug=`), for `dpbench verify`'s tests.

bug honest: DP-SGD (Abadi et al. 2016, Alg. 1): Poisson sampling at q = B/n, per-example
clipping to C, N(0, (zC)^2 I) on the sum, z calibrated to (epsilon, delta) by dpbench's RDP
accountant, every step reported with `release`. Each other value breaks one thing and leaves the
ledger (and the claim "valid") as the honest run would write it, except where the bug is the ledger:
  ledger_eps     the ledger's epsilon spent is 3x the target;
  half_noise     half the noise;
  twice_steps    2T steps;
  wrong_rate     samples at 4q;
  no_clip        per-example gradients not clipped;
  mean_noise     the noise of the mean (zC / B) added to the sum;
  other_delta    z calibrated at delta 0.1 (the ledger's epsilon spent is of that delta);
  lying_stream   reports the noisy step but updates with the clean one;
  reused_noise   draws one noise vector per epoch and adds it to every step of that epoch;
  shuffle        shuffled fixed-size batches of B (each row once per epoch), not Poisson at q = B/n;
  hidden_steps   takes hidden_factor * T steps and reports every hidden_factor-th (each reported one
                 as it was taken);
  zero_column    honest only while X has an all-zero column (the game `verify` showed before it
                 rotated the feature space), noise-free otherwise;
  rate_135       samples at rate_factor x q (default 1.35).

declare: what each release says. "claimed" (the default): the ledger's noise std z C, rate q and
clip norm C whatever the bug did, a stream that lies as the ledger does (what `dpbench verify`'s
measured checks are for); "actual": what the step did (noise std, sampling rate, no clip norm when
not clipped), a stream that tells the truth (what the runner's release check compares with the
ledger, `dpbench.algorithms.release_check`).
"""
from typing import Annotated

import numpy as np

from dpbench.algorithms import Fit, Param, PrivacyTarget, Problem, algorithm, ledger
from dpbench.algorithms.dpsgd import BatchSize, ClipNorm, Epochs, LearningRate  # DP-SGD's declarations
from dpbench.algorithms.releases import release
from dpbench.core.ledger import Adjacency
from dpbench.privacy import calibrate_dpsgd_noise, dpsgd_epsilon_report
from dpbench.privacy.events import dpsgd_event_json

BUGS = ("honest", "ledger_eps", "half_noise", "twice_steps", "wrong_rate", "no_clip", "mean_noise", "other_delta",
        "lying_stream", "reused_noise", "shuffle", "hidden_steps", "zero_column", "rate_135")


@algorithm("buggy_dpsgd", title="DP-SGD with a switchable bug (tests of dpbench verify)",
           citation="Abadi et al., CCS 2016", private=True, updates=True)
def fit(
    problem: Problem, privacy: PrivacyTarget, rng: np.random.Generator, *,
    epochs: Epochs = 2.0,
    batch_size: BatchSize = 32.0,
    lr: LearningRate = 0.5,
    clip_norm: ClipNorm = 1.0,
    bug: Annotated[str, Param("the bug", choices=BUGS)] = "honest",
    hidden_factor: Annotated[int, Param("hidden_steps: steps taken per step reported", minimum=1)] = 2,
    rate_factor: Annotated[float, Param("rate_135: the true rate over the declared one", minimum=0,
                                        exclusive_minimum=True)] = 1.35,
    declare: Annotated[str, Param("what the releases declare: the ledger's numbers (claimed) or what each step "
                                  "did (actual)", choices=("claimed", "actual"))] = "claimed",
) -> Fit:
    model, X, y, n = problem.model, problem.X, problem.y, problem.n
    B = min(float(batch_size), float(n))
    q, steps = B / n, max(1, round(epochs * n / B))
    z = calibrate_dpsgd_noise(privacy.epsilon, 0.1 if bug == "other_delta" else privacy.delta, q, steps)
    sigma = z * clip_norm * {"half_noise": 0.5, "mean_noise": 1.0 / B}.get(bug, 1.0)
    if bug == "zero_column" and not np.any(np.all(X == 0, axis=0)):
        sigma = 0.0
    rate = {"wrong_rate": 4 * q, "rate_135": min(1.0, float(rate_factor) * q)}.get(bug, q)
    factor = {"twice_steps": 2, "hidden_steps": int(hidden_factor)}.get(bug, 1)
    per_epoch = max(1, round(n / B))
    order = np.empty(0, dtype=np.int64)  # shuffle: the rows left in this epoch's permutation
    theta = model.init(rng)
    for t in range(1, factor * steps + 1):
        if bug == "shuffle":
            if order.size == 0:
                order = rng.permutation(n)
            batch, order = order[:int(B)], order[int(B):]
        else:
            batch = rng.random(n) < rate
        if bug == "no_clip":
            total = model.per_example_grads(theta, X[batch], y[batch]).sum(axis=0)
        else:
            total, _ = model.clipped_grad_sum(theta, X[batch], y[batch], clip_norm)
        if bug != "reused_noise" or (t - 1) % per_epoch == 0:
            noise = rng.normal(0.0, sigma, size=theta.shape)
        noisy = total + noise
        reported = bug != "hidden_steps" or t % factor == 0
        if reported and declare == "actual":
            release(t // factor if bug == "hidden_steps" else t, theta, noisy / B, sigma, rate=rate,
                    clip_norm=None if bug == "no_clip" else clip_norm, weight=1.0 / B)
        elif reported:
            release(t // factor if bug == "hidden_steps" else t, theta, noisy / B, z * clip_norm, rate=q,
                    clip_norm=clip_norm, weight=1.0 / B)
        step = total if bug == "lying_stream" else noisy
        theta = theta - lr * (step / B + model.reg_grad(theta))
    spent = dpsgd_epsilon_report(z, q, steps, 0.1 if bug == "other_delta" else privacy.delta)
    if bug == "ledger_eps":
        spent = {k: 3 * privacy.epsilon for k in spent}
    return Fit(theta=theta, privacy=ledger(
        private=True, mechanism="Poisson-subsampled Gaussian over T steps (DP-SGD)", claim="valid",
        target_epsilon=privacy.epsilon, delta=privacy.delta, epsilon_spent=spent, adjacency=Adjacency.ADD_REMOVE,
        sensitivity=clip_norm, event=dpsgd_event_json(z, q, steps),
        sampling={"kind": "poisson", "rate": q, "expected_batch": B}, steps=steps, noise_multiplier=z))
