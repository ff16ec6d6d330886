"""The all-updates adversary of the audits: it watches every noisy step and scores a training by its privacy loss.

Threat model "all_updates" (Nasr et al. S&P 2021 and USENIX Security 2023; docs/audits.md, Threat models):
the adversary sees every iterate, knows the algorithm, its hyperparameters and every record of
D0, and chose a canary whose gradient lies along a direction u that no base record touches (the
game's `direction`, e.g. a spare all-zero feature). For each noisy step a fit reports
(`dpbench.algorithms.releases.Release`), it projects the released statistic on u,
z = <released, u> / weight, and computes what the record that differs would put there: on D1 the
canary's clipped gradient at the step's iterate, a1 = <clip_C(grad l(theta_t; x_c, y_c)), u>; on D0
nothing under add/remove (a0 = 0), or under replace-one the contribution of the row the canary
replaces (the game's `replaced` row, or D0's last row). Both are known to the adversary: theta_t is
public. The score of a training is the sum over its steps of the per-step log-likelihood ratios
(`audit_estimates.step_log_likelihood_ratio`: Neyman-Pearson, including the mixture for
subsampled steps), the privacy loss of the transcript as the adversary sees it. Steps of kind
"noisy_statistic" (a robust mean, say: the canary's effect is bounded but not known) add the
matched-filter term sign(a1 - a0) z / s instead.

Alongside, per training, the sums `audit_estimates.STEP_SUMS` of the gradient-sum steps with noise
(for the measured-mechanism estimate). All arrays have one entry per replica: a vectorised fit
reports R trainings at once.
"""

from __future__ import annotations

import numpy as np

from dpbench.algorithms.releases import Release
from dpbench.audit.canaries import Game
from dpbench.core.ledger import Adjacency
from dpbench.models.base import clip_factors
from dpbench.models.linear import _GLM
from dpbench.privacy.audit_estimates import STEP_SUMS, step_log_likelihood_ratio


def contribution(model, thetas: np.ndarray, x: np.ndarray, y: float, clip_norm: float | None,
                 direction: np.ndarray) -> np.ndarray:
    """<clip_C(grad l(theta_r; x, y)), u> for each row theta_r of `thetas` (R, m): the data gradient
    of one record (no regulariser), clipped to `clip_norm` (None: not clipped), along u."""
    thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
    x = np.asarray(x, dtype=float)
    if isinstance(model, _GLM) and model.n_params == x.size:  # grad = phi'(theta.x, y) x: closed form for all R
        s = model._dphi(thetas @ x, np.full(thetas.shape[0], float(y)))
        if clip_norm is not None:
            s = s * clip_factors(np.abs(s) * float(np.linalg.norm(x)), clip_norm)
        return s * float(x @ direction)
    X1, y1 = x[None, :], np.array([float(y)])
    out = np.empty(thetas.shape[0])
    for r, theta in enumerate(thetas):
        if clip_norm is None:
            g = model.data_grad(theta, X1, y1)
        else:
            g, _ = model.clipped_grad_sum(theta, X1, y1, clip_norm)
        out[r] = float(np.asarray(g) @ direction)
    return out


class WhiteBoxObserver:
    """Listens to the releases of `replicas` trainings on one side of a game (module docstring).

    Use as the callback of `releases.observing`; afterwards `scores` holds each training's
    statistic and `sums` the per-training `STEP_SUMS`.
    """

    def __init__(self, game: Game, adjacency: Adjacency | str, replicas: int = 1):
        if game.direction is None:
            raise ValueError("the game has no canary direction: the all-updates statistic needs one")
        u = np.asarray(game.direction, dtype=float)
        self.direction = u / np.linalg.norm(u)
        self.game = game
        self.add_remove = Adjacency.parse(adjacency) is Adjacency.ADD_REMOVE
        self.replaced = game.replaced_row() if not self.add_remove else None
        self.replicas = int(replicas)
        self.scores = np.zeros(self.replicas)
        self.sums = {k: np.zeros(self.replicas) for k in STEP_SUMS}
        self.releases = 0
        self.kinds: set[str] = set()
        self.rates: set[float] = set()  # the declared inclusion rates of the gradient-sum steps

    def __call__(self, release: Release) -> None:
        theta = np.atleast_2d(release.theta)
        if theta.shape[0] != self.replicas:
            raise ValueError(f"a release of {theta.shape[0]} replicas reached an observer of {self.replicas}")
        z = (np.atleast_2d(release.released) @ self.direction) / release.weight
        model, game = self.game.model, self.game
        clip = release.clip_norm if release.kind == "gradient_sum" else None
        a1 = contribution(model, theta, game.canary_x, game.canary_y, clip, self.direction)
        a0 = np.zeros_like(a1) if self.replaced is None else \
            contribution(model, theta, self.replaced[0], self.replaced[1], clip, self.direction)
        s = release.noise_std
        self.releases += 1
        self.kinds.add(release.kind)
        if release.kind != "gradient_sum":
            self.scores += np.sign(a1 - a0) * z / max(s, 1e-300)
            return
        self.rates.add(release.rate)
        self.scores += step_log_likelihood_ratio(z, a0, a1, s, release.rate)
        if s > 0.0:
            s2 = s * s
            for key, value in (("steps", 1.0), ("z2", z * z / s2), ("za0", z * a0 / s2), ("a0a0", a0 * a0 / s2),
                               ("za1", z * a1 / s2), ("a1a1", a1 * a1 / s2), ("d2", (a1 - a0) ** 2 / s2)):
                self.sums[key] += value


class CanariesObserver:
    """The all-updates statistic of m canaries in one training (the one-run audit), each on its
    own coordinate `coords[j]` that no other record touches: the per-step log-likelihood ratio of
    canary j being in (row Xc[j], yc[j]) rather than out (nothing under add/remove; row Xr[j],
    yr[j] under replace-one), from the released statistic's coordinate coords[j]. Linear models
    only (the contributions of all m canaries are computed in closed form at every step)."""

    def __init__(self, model, Xc: np.ndarray, yc: np.ndarray, coords: np.ndarray,
                 Xr: np.ndarray | None = None, yr: np.ndarray | None = None):
        if not isinstance(model, _GLM):
            raise ValueError(f"the all-updates one-run statistic needs a linear model, got {model.name}")
        self.model, self.Xc, self.yc, self.coords = model, Xc, np.asarray(yc, dtype=float), np.asarray(coords)
        self.Xr, self.yr = Xr, None if yr is None else np.asarray(yr, dtype=float)
        self.scores = np.zeros(len(self.coords))
        self.releases = 0

    def _along(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray, clip: float | None) -> np.ndarray:
        s = self.model._dphi(X @ theta, y)
        if clip is not None:
            s = s * clip_factors(np.abs(s) * np.sqrt(np.einsum("ij,ij->i", X, X)), clip)
        return s * X[np.arange(len(self.coords)), self.coords]

    def __call__(self, release: Release) -> None:
        theta = np.asarray(release.theta, dtype=float)
        if theta.ndim != 1:
            raise ValueError("the one-run observer watches one training, got a vectorised release")
        z = np.asarray(release.released, dtype=float)[self.coords] / release.weight
        clip = release.clip_norm if release.kind == "gradient_sum" else None
        a1 = self._along(theta, self.Xc, self.yc, clip)
        a0 = np.zeros_like(a1) if self.Xr is None else self._along(theta, self.Xr, self.yr, clip)
        self.releases += 1
        if release.kind != "gradient_sum":
            self.scores += np.sign(a1 - a0) * z / max(release.noise_std, 1e-300)
        else:
            self.scores += step_log_likelihood_ratio(z, a0, a1, release.noise_std, release.rate)


__all__ = ["CanariesObserver", "WhiteBoxObserver", "contribution"]
