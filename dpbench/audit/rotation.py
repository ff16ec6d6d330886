"""A spare-feature game with its feature space turned by a random rotation: what `dpbench verify` runs.

The spare-feature game (`dpbench.audit.canaries`) appends an all-zero column to the base rows, so
a fit can tell that it is being tested (an all-zero column in X) and behave only then. `verify`
turns the whole feature space by a seeded random orthogonal matrix Q (Haar-distributed: the QR
decomposition of a standard Gaussian matrix with the signs of R's diagonal moved into Q; Mezzadri,
Notices of the AMS 2007): every row x becomes Q x, the canary and the row it replaces too, and the
spare direction u = e_new becomes Q u, a random unit vector of parameter space. No column is then
all-zero, and the base rows still never touch u: <Q x_i, Q u> = <x_i, u> = 0.

A linear model (logreg, ridge: no separate bias, the intercept is one of the features) is
equivariant: with theta' = Q theta, <theta', Q x> = <theta, x>, so every loss is unchanged, every
per-example gradient is turned by Q (its norm, hence its clipping, unchanged), the L2 term and
isotropic Gaussian noise are invariant, and the start theta = 0 maps to itself. A fit of the turned
game is the fit of the original turned by Q, in distribution; the releases and the canary's
contribution are read along Q u (`Game.direction`). A score reads theta turned back, Q^T theta'.
"""

from __future__ import annotations

import numpy as np

from dpbench.audit.canaries import Game


def random_rotation(d: int, rng: np.random.Generator) -> np.ndarray:
    """A (d, d) orthogonal matrix drawn from the Haar measure (module docstring)."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def rotated(game: Game, rng: np.random.Generator) -> tuple[Game, np.ndarray]:
    """(the game with every feature vector x turned to Q x, Q) for a random rotation Q (module docstring)."""
    d = game.n_features
    Q = random_rotation(d, rng)
    turn = (lambda x: Q @ np.asarray(x, dtype=float))
    score = game.score
    replaced = None if game.replaced is None else (turn(game.replaced[0]), float(game.replaced[1]))
    out = Game(X=np.asarray(game.X, dtype=float) @ Q.T, y=game.y, canary_x=turn(game.canary_x),
               canary_y=game.canary_y, model=game.model, score=lambda theta: score(Q.T @ np.asarray(theta, float)),
               theta0=None if game.theta0 is None else turn(game.theta0),
               description=game.description + "; feature space turned by a random rotation",
               direction=None if game.direction is None else turn(game.direction), replaced=replaced)
    return out, Q


__all__ = ["random_rotation", "rotated"]
