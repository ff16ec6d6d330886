"""DP-SGD as Opacus runs it (Yousefpour et al. 2021; Abadi et al. 2016, Algorithm 1): a peer.

The fit hands dpbench's problem to Opacus' `PrivacyEngine` and lets it run the mechanism: its
`DPDataLoader` draws the Poisson batches, its `DPOptimizer` clips each per-example gradient to norm C,
adds N(0, (zC)^2 I) to the clipped sum and divides by its expected batch size, and its accountant
(RDP or PRV, `accountant`) calibrates z to the target (epsilon, delta) and reports the epsilon spent.
dpbench supplies only what makes the run comparable with its own `dpsgd`:

* **the same model and start.** The torch module is dpbench's model with its parameter layout: logreg
  is `Linear(d, 1, bias=False)` (dpbench's data carry an intercept feature), ridge the same, the MLP
  `Linear(d, h) -> tanh (or softplus) -> Linear(h, 1)`, whose weights are theta = [W1 row-major, b1, w2,
  b2] (`dpbench.models.mlp`). theta_0 is `model.init(rng)` (zeros for the linear models, Glorot for the
  MLP: dpsgd's first draw). Everything runs in float64: rows, labels, parameters and Opacus' noise
  (drawn in the dtype of the gradient it is added to).
* **the same objective.** The per-example loss is the model's data loss (logistic: `BCEWithLogitsLoss`
  with the labels {-1, +1} mapped to {0, 1}, which is log(1 + exp(-y u)); ridge: `MSELoss`, (u - y)^2
  without a 1/2), mean-reduced as Opacus expects; the model's L2 term (l2/2)||theta||^2 is torch
  SGD's `weight_decay=l2`, added to the noisy gradient inside the update (post-processing), as
  dpbench's DP-SGD adds `reg_grad` after the noise.
* **the sampling rate Opacus can give.** Opacus samples at q = 1 / len(DataLoader) = 1 / ceil(n / b)
  for the loader's batch size b; the fit picks the b whose q is closest to B/n (`opacus_rate`) and
  records the q Opacus used. Opacus composes T = int(epochs / q) steps (its calibration's count) and
  divides the noisy sum by its `expected_batch_size` = int(n q) (B = 1 can truncate it to 0: then
  round(n q), recorded as `expected_batch_size_corrected_from`).

`make_private_with_epsilon` is two calls, made here as it makes them: z = `get_noise_multiplier(target
epsilon, delta, sample_rate = 1 / len(DataLoader), epochs, accountant)`, then `make_private(noise_multiplier=z,
max_grad_norm=C, poisson_sampling=True)`; z and Opacus' final epsilon are memoised by their arguments
(`opacus_noise_multiplier`, `opacus_epsilon_spent`): the calibration is most of a small fit's time, and
`dpbench verify` and the audits run thousands of fits at one setting.

Every step is reported (`releases.release`) from the optimizer's step hook, which Opacus calls after
the noise and the division, before the parameter update: theta_t (dpbench's layout), the noisy
mean gradient Opacus computed (weight = 1 / its expected batch size), noise std zC, rate q, clip C.
The rows of each batch Opacus' loader drew are told to `dpbench verify`'s gradient-access recorder
(`dpbench.models.access.evaluated`: torch, not the model's methods, computes their gradients), so
its steps-taken and sampling-scheme checks see Opacus' batches.

The ledger carries Opacus' own epsilon (`engine.get_epsilon(delta)`, "opacus-<accountant>") beside
dpbench's RDP and PLD accountants for the same (z, q, T), and the DpEvent from which the runner
recomputes epsilon. The run's "valid" is stored "declared by opacus <version>" (`peers.declared_reason`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import Annotated, Any, get_args

import numpy as np

from dpbench.algorithms import peers
from dpbench.algorithms.base import Fit, PrivacyTarget, Problem, algorithm, ledger
from dpbench.algorithms.dpsgd import BatchSize, ClipNorm, Epochs, LearningRate
from dpbench.algorithms.releases import release
from dpbench.core.errors import DpbenchError
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import Param
from dpbench.models import access
from dpbench.privacy import dpsgd_epsilon_report
from dpbench.privacy.events import dpsgd_event_json

LIBRARY = "opacus"
ACCOUNTANTS = ("rdp", "prv")
#: dpbench's models that have a torch twin here (`_module`)
MODELS = ("logreg", "ridge", "mlp")


def _redoc(annotated: Any, doc: str) -> Any:
    """dpsgd's declaration `annotated` (its type and range) with another text."""
    kind, param = get_args(annotated)
    return Annotated[kind, replace(param, doc=doc)]


# DP-SGD's declarations (dpbench.algorithms.dpsgd), the text of epochs and batch size saying how Opacus uses them
OpacusEpochs = _redoc(Epochs, "passes over the data; Opacus composes T = int(epochs / q) steps")
OpacusBatchSize = _redoc(BatchSize, "expected (Poisson) batch size B; Opacus samples at q = 1/ceil(n/b) for the "
                                    "loader batch size b whose q is closest to B/n")
Accountant = Annotated[str, Param("Opacus' accountant, which calibrates z and reports epsilon", choices=ACCOUNTANTS)]


def opacus_rate(n: int, batch_size: float) -> tuple[int, int]:
    """(loader batch size b, number of batches k = ceil(n/b)) whose Opacus sampling rate 1/k is closest
    to B/n (the smallest such b where two are equally close)."""
    b = np.arange(1, n + 1)
    k = -(-n // b)  # ceil(n / b)
    best = int(np.argmin(np.abs(1.0 / k - min(float(batch_size), float(n)) / n)))
    return int(b[best]), int(k[best])


#: Opacus' answers by their arguments: its calibration (~0.3 s a call, most of a small fit's time) and its epsilon
#: for one accountant history; a verification or an audit runs thousands of fits with the same ones
_MEMO: dict[tuple, float] = {}
MEMO_SIZE = 4096


def _memoised(key: tuple, compute) -> float:
    try:
        return _MEMO[key]
    except KeyError:
        pass
    if len(_MEMO) >= MEMO_SIZE:
        _MEMO.clear()
    value = _MEMO[key] = float(compute())
    return value


def opacus_noise_multiplier(epsilon: float, delta: float, sample_rate: float, epochs: float, accountant: str) -> float:
    """z as `PrivacyEngine.make_private_with_epsilon` computes it: Opacus' `get_noise_multiplier` for
    its accountant at the loader's sample rate and `epochs` (it composes int(epochs / sample_rate) steps)."""
    from opacus.accountants.utils import get_noise_multiplier

    return _memoised(("z", epsilon, delta, sample_rate, epochs, accountant), lambda: get_noise_multiplier(
        target_epsilon=epsilon, target_delta=delta, sample_rate=sample_rate, epochs=epochs, accountant=accountant))


def opacus_epsilon_spent(engine: Any, delta: float) -> float:
    """`engine.get_epsilon(delta)`: Opacus' accountant's epsilon for the steps it counted (its history
    of (z, q, steps))."""
    history = tuple(tuple(entry) for entry in engine.accountant.history)
    return _memoised(("epsilon", engine.accountant.mechanism(), history, delta), lambda: engine.get_epsilon(delta))


def _module(problem: Problem):
    """The torch module (float64) computing dpbench's model's output, and a function from its
    parameters to dpbench's theta and back (`to_theta`, `load`)."""
    import torch
    from torch import nn

    model, d = problem.model, problem.model.n_features
    if model.name in ("logreg", "ridge"):
        module = nn.Linear(d, 1, bias=False)
    elif model.name == "mlp":
        act = {"tanh": nn.Tanh, "softplus": nn.Softplus}[model.activation]
        module = nn.Sequential(nn.Linear(d, model.hidden), act(), nn.Linear(model.hidden, 1))
    else:
        raise DpbenchError(f"opacus_dpsgd runs the models {', '.join(MODELS)}, not {model.name!r}")
    module = module.to(torch.float64)
    # dpbench's flat layout: logreg/ridge [w]; the MLP [W1 (h x d row-major), b1, w2, b2] (models.mlp)
    params = list(module.parameters())

    def to_theta() -> np.ndarray:
        return np.concatenate([p.detach().reshape(-1).numpy() for p in params]).astype(np.float64)

    def load(theta: np.ndarray) -> None:
        with torch.no_grad():
            at = 0
            for p in params:
                p.copy_(torch.from_numpy(np.ascontiguousarray(theta[at:at + p.numel()])).reshape(p.shape))
                at += p.numel()

    return module, params, to_theta, load


def _grads_theta(params) -> np.ndarray:
    return np.concatenate([p.grad.detach().reshape(-1).numpy() for p in params]).astype(np.float64)


@algorithm("opacus_dpsgd", title="DP-SGD (Opacus)",
           citation="Yousefpour et al., Opacus: User-Friendly Differential Privacy Library in PyTorch, 2021; "
                    "Abadi et al., Deep Learning with Differential Privacy, CCS 2016 (Alg. 1)",
           private=True, updates=True, library=LIBRARY)
def fit_opacus_dpsgd(
    problem: Problem,
    privacy: PrivacyTarget,
    rng: np.random.Generator,
    *,
    epochs: OpacusEpochs = 1.0,
    batch_size: OpacusBatchSize = 64.0,
    lr: LearningRate = 0.5,
    clip_norm: ClipNorm = 1.0,
    accountant: Accountant = "rdp",
) -> Fit:
    """Opacus' DP-SGD on dpbench's problem (module docstring): `make_private_with_epsilon`'s calibration
    and `make_private` with Poisson sampling, SGD(lr, weight_decay=l2), every step reported, Opacus' epsilon in the ledger."""
    opacus = peers.require(LIBRARY)
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    if accountant not in ACCOUNTANTS:
        raise ValueError(f"unknown Opacus accountant {accountant!r}; choose one of {', '.join(ACCOUNTANTS)}")
    if privacy.epsilon is None or privacy.delta is None:
        raise DpbenchError("opacus_dpsgd needs a privacy target (epsilon, delta)")
    model, n = problem.model, problem.n
    theta0 = model.init(rng)  # dpsgd's first draw (none for the linear models)
    loader_seed, noise_seed = (int(s) for s in rng.integers(0, 2**63 - 1, size=2))

    module, params, to_theta, load = _module(problem)
    load(theta0)
    X = torch.from_numpy(np.array(problem.X, dtype=np.float64))
    y_np = np.asarray(problem.y, dtype=np.float64)
    classify = model.task == "classification"
    y = torch.from_numpy((y_np > 0).astype(np.float64) if classify else y_np)  # {-1, +1} -> {0, 1}
    criterion = torch.nn.BCEWithLogitsLoss() if classify else torch.nn.MSELoss()
    b, _ = opacus_rate(n, batch_size)
    loader = DataLoader(TensorDataset(X, y), batch_size=b, generator=torch.Generator().manual_seed(loader_seed))
    optimizer = torch.optim.SGD(module.parameters(), lr=lr, weight_decay=model.l2)
    with warnings.catch_warnings():  # Opacus' notices of its defaults (secure_mode off, its alpha grid)
        warnings.filterwarnings("ignore", message="Secure RNG turned off")
        warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        engine = opacus.PrivacyEngine(accountant=accountant)
        # make_private_with_epsilon, its two calls: z from Opacus' get_noise_multiplier (memoised), then make_private
        z = opacus_noise_multiplier(float(privacy.epsilon), float(privacy.delta), 1.0 / len(loader), epochs,
                                    accountant)
        private_module, optimizer, private_loader = engine.make_private(
            module=module, optimizer=optimizer, data_loader=loader, noise_multiplier=z, max_grad_norm=float(clip_norm),
            poisson_sampling=True, noise_generator=torch.Generator().manual_seed(noise_seed))
    # the rate its sampler draws every batch at: 1 / len(loader), as z was calibrated (its epochs hold
    # int(1 / q) batches, one fewer than len(loader) for some lengths, e.g. 93: the fit runs T steps regardless)
    q = float(private_loader.sample_rate)
    if q != 1.0 / len(loader):
        raise DpbenchError(f"opacus_dpsgd: Opacus samples at {q!r}, its calibration assumed 1/{len(loader)}")
    steps = int(epochs / q)  # the steps get_noise_multiplier calibrated z for
    if steps < 1:
        raise DpbenchError(f"opacus_dpsgd: epochs = {epochs:g} gives Opacus int(epochs / q) = 0 steps at q = {q:.4g}")
    corrected = None
    if optimizer.expected_batch_size < 1:  # int(n q) truncated to 0 (B = 1): Opacus would divide by zero
        corrected = optimizer.expected_batch_size
        optimizer.expected_batch_size = max(1, round(n * q))
    noise_std = z * float(clip_norm)

    step, theta_t = 0, theta0
    accounting_hook = optimizer.step_hook  # Opacus' accountant counts the step

    def report(opt) -> None:
        """After Opacus' noise and division, before the update: the step as released."""
        if accounting_hook is not None:
            accounting_hook(opt)
        divisor = float(opt.expected_batch_size * opt.accumulated_iterations)
        release(step, theta_t, _grads_theta(params), noise_std, rate=q, clip_norm=float(clip_norm),
                weight=1.0 / divisor)

    optimizer.step_hook = report
    private_module.train()
    batches_iter = iter(private_loader)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        for step in range(1, steps + 1):
            try:
                xb, yb = next(batches_iter)
            except StopIteration:  # an epoch of Poisson batches ended: the next one
                batches_iter = iter(private_loader)
                xb, yb = next(batches_iter)
            theta_t = to_theta()
            access.evaluated(theta_t, xb.numpy())  # the rows whose gradients Opacus takes at theta_t (verify)
            optimizer.zero_grad()
            loss = criterion(private_module(xb).reshape(-1), yb)  # an empty batch: nan loss, zero per-example grads
            loss.backward()
            optimizer.step()
    theta = to_theta()
    if not np.all(np.isfinite(theta)):
        raise DpbenchError("opacus_dpsgd: Opacus' iterate is not finite")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
        opacus_epsilon = opacus_epsilon_spent(engine, float(privacy.delta))
    spent = {f"opacus-{accountant}": opacus_epsilon, **dpsgd_epsilon_report(z, q, steps, float(privacy.delta))}
    within = min(spent.values()) <= float(privacy.epsilon) * (1 + 1e-9)
    expected_batch = float(optimizer.expected_batch_size)
    record = ledger(
        private=True,
        mechanism=f"DP-SGD (Opacus {peers.version(LIBRARY)}, PrivacyEngine, {accountant})",
        claim="valid" if within else "paper-only",
        target_epsilon=privacy.epsilon,
        delta=privacy.delta,
        epsilon_spent=spent,
        adjacency=Adjacency.ADD_REMOVE,
        sensitivity=float(clip_norm),
        event=dpsgd_event_json(z, q, steps),
        sampling={"kind": "poisson", "rate": q, "expected_batch": n * q},
        steps=steps,
        noise_multiplier=z,
        noise_std_sum=noise_std,
        noise_std_mean_gradient=noise_std / expected_batch,
        calibration=f"opacus-{accountant}",
        library=LIBRARY,
        library_version=peers.version(LIBRARY),
        torch_version=torch.__version__,
        dtype="float64",
        loader_batch_size=b,
        requested_sampling_rate=min(float(batch_size), float(n)) / n,
        opacus_expected_batch_size=expected_batch,
        **({"expected_batch_size_corrected_from": corrected} if corrected is not None else {}),
    )
    if not math.isfinite(opacus_epsilon):
        record = record.with_claim("paper-only", "Opacus' accountant reports an infinite epsilon")
    return Fit(theta=theta, privacy=record)
