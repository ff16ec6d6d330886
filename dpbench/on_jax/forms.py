"""The built-in models' data losses as JAX functions, for the optional JAX path (`dpbench.on_jax.loops`).

Only imported by that path (it needs the `jax` extra, `pip install 'dpbench[jax]'`). Each form is the
numpy model's formula written with jax.numpy, for one row and in float64 (JAX's x64 mode, which
`dpbench.on_jax.device` switches on before any of these run):

  logreg  phi(z; y) = log(1 + exp(-y z)),           phi'(z; y) = -y expit(-y z)
  ridge   phi(z; y) = (z - y)^2,                    phi'(z; y) = 2 (z - y)
  mlp     l(theta; x, y) = log(1 + exp(-y u)),      u = w2 . act(W1 x + b1) + b2 (theta's layout: `MLP.unpack`)

A generalised linear model (margin z = theta . x) is given by its slope phi' (`JaxForm.slope`): the
per-example gradient is phi'(z_i) x_i with norm |phi'(z_i)| ||x_i||, so the loops clip and sum it
without forming the (rows, d) matrix, as the numpy twins do. The MLP gives its clipped sum in closed
form (`JaxForm.clipped_sum`, below), also without the (rows, m) matrix of per-example gradients.
Every form gives its loss of one row (`JaxForm.loss`): the loops differentiate it for unclipped sums
(`jax.grad` of the summed loss) and, for a form with neither of the above, per example by
`jax.vmap(jax.grad(...))`. The regulariser (l2/2)||theta||^2 is the model's own (`Model.reg_grad` =
l2 theta), added by the loops.

The MLP's clipped sum: with s_i = dl/du_i = -y_i expit(-y_i u_i) and delta_i = s_i w2 * act'(z_i) (the
backward pass), example i's gradient is [delta_i x_i^T, delta_i, s_i a_i, s_i], so its squared norm is
||delta_i||^2 (||x_i||^2 + 1) + s_i^2 (||a_i||^2 + 1) and, with c_i = w_i min(1, C / norm_i), the clipped
sum is [(c delta)^T X, sum_i c_i delta_i, (c s)^T A, sum_i c_i s_i] -- `MLP.clipped_grad_sum`'s formula.

The forms are tied to the numpy models by tests (tests/on_jax/): the gradients of `loss`, the slopes
and the MLP's clipped sum equal the models' `per_example_grads` and `clipped_grad_sum` to float64 rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp

from dpbench.models.base import Model
from dpbench.models.linear import LogisticRegression, RidgeRegression
from dpbench.models.mlp import MLP


@dataclass(frozen=True)
class JaxForm:
    """A model on the JAX path: `loss(theta, x, y)`, the data loss of one row; `slope(z, y)` for a
    generalised linear model (else None); `clipped_sum(theta, X, y, w, C)`, sum_i w_i clip_C(grad_i),
    where the model has it in closed form (else None)."""

    loss: Callable
    slope: Callable | None = None
    clipped_sum: Callable | None = None


def _logreg_slope(z, y):
    return -y * jax.nn.sigmoid(-y * z)


def _logreg_phi(z, y):
    return jnp.logaddexp(0.0, -y * z)


def _ridge_slope(z, y):
    return 2.0 * (z - y)


def _ridge_phi(z, y):
    return (z - y) ** 2


def _glm_loss(phi: Callable) -> Callable:
    return lambda theta, x, y: phi(jnp.dot(x, theta), y)


_ACTIVATIONS = {"tanh": jnp.tanh, "softplus": lambda z: jnp.logaddexp(0.0, z)}


def _mlp_parts(theta, h: int, d: int):
    """(W1, b1, w2, b2) of the flat theta (`MLP.unpack`'s layout)."""
    return theta[:h * d].reshape(h, d), theta[h * d:h * d + h], theta[h * d + h:h * d + 2 * h], theta[-1]


def _mlp_loss(model: MLP) -> Callable:
    h, d = model.hidden, model.n_features
    act = _ACTIVATIONS[model.activation]

    def loss(theta, x, y):
        W1, b1, w2, b2 = _mlp_parts(theta, h, d)
        u = jnp.dot(w2, act(W1 @ x + b1)) + b2
        return jnp.logaddexp(0.0, -y * u)

    return loss


def _mlp_clipped_sum(model: MLP) -> Callable:
    h, d = model.hidden, model.n_features
    act = _ACTIVATIONS[model.activation]

    def clipped_sum(theta, X, y, w, C):
        W1, b1, w2, b2 = _mlp_parts(theta, h, d)
        Z = X @ W1.T + b1
        A, dA = jax.jvp(act, (Z,), (jnp.ones_like(Z),))  # act(z) and act'(z), elementwise
        u = A @ w2 + b2
        s = -y * jax.nn.sigmoid(-y * u)
        delta = s[:, None] * w2 * dA
        sq = jnp.sum(delta * delta, axis=1) * (jnp.sum(X * X, axis=1) + 1.0) + s * s * (jnp.sum(A * A, axis=1) + 1.0)
        c = w * jnp.minimum(1.0, C / jnp.maximum(jnp.sqrt(sq), 1e-300))
        cd, cs = c[:, None] * delta, c * s
        return jnp.concatenate([(cd.T @ X).ravel(), jnp.sum(cd, axis=0), cs @ A, jnp.sum(cs)[None]])

    return clipped_sum


def jax_form(model: Model) -> JaxForm | None:
    """The model's JAX form, or None for a model the JAX path does not know (it then runs on the CPU path)."""
    if type(model) is LogisticRegression:
        return JaxForm(loss=_glm_loss(_logreg_phi), slope=_logreg_slope)
    if type(model) is RidgeRegression:
        return JaxForm(loss=_glm_loss(_ridge_phi), slope=_ridge_slope)
    if type(model) is MLP and model.activation in _ACTIVATIONS:
        return JaxForm(loss=_mlp_loss(model), clipped_sum=_mlp_clipped_sum(model))
    return None


__all__ = ["JaxForm", "jax_form"]
