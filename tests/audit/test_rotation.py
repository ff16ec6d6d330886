"""verify's turned game (`dpbench.audit.rotation`): no all-zero column, the base rows still orthogonal to
the spare direction, and a linear model's gradients turned with the features (clipping unchanged)."""

from __future__ import annotations

import numpy as np

from dpbench import models
from dpbench.audit.canaries import Game
from dpbench.audit.rotation import random_rotation, rotated


def test_a_rotation_is_orthogonal_and_hides_the_zero_column():
    rng = np.random.default_rng(3)
    X = np.hstack([rng.uniform(-1, 1, size=(40, 4)), np.zeros((40, 1))])
    y = np.where(rng.uniform(size=40) < 0.5, -1.0, 1.0)
    u = np.eye(5)[-1]
    model = models.make("logreg", 5)
    game = Game(X=X, y=y, canary_x=u, canary_y=1.0, model=model, score=lambda th: float(th[-1]), direction=u,
                replaced=(u, -1.0))
    turned, Q = rotated(game, np.random.default_rng(0))
    np.testing.assert_allclose(Q @ Q.T, np.eye(5), atol=1e-12)
    assert not np.any(np.all(np.abs(turned.X) < 1e-9, axis=0))  # no column is (nearly) all zero
    np.testing.assert_allclose(turned.X @ turned.direction, 0.0, atol=1e-12)
    np.testing.assert_allclose(turned.canary_x, turned.direction)
    np.testing.assert_allclose(turned.replaced[0], turned.direction)
    theta = rng.normal(size=5)
    # the model is equivariant: gradients at Q theta on Q x are Q times those at theta on x
    g, norms = model.clipped_grad_sum(theta, X, y, 0.1)
    g_turned, norms_turned = model.clipped_grad_sum(Q @ theta, turned.X, y, 0.1)
    np.testing.assert_allclose(g_turned, Q @ g, atol=1e-12)
    np.testing.assert_allclose(norms_turned, norms, atol=1e-12)
    assert abs(turned.score(Q @ theta) - theta[-1]) < 1e-12


def test_rotations_differ_by_seed():
    a, b = random_rotation(6, np.random.default_rng(1)), random_rotation(6, np.random.default_rng(2))
    assert np.max(np.abs(a - b)) > 0.1
