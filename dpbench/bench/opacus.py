"""dpbench's DP-SGD steps side by side with Opacus (`dpbench bench --against opacus`).

What is compared: examples/s of DP-SGD training steps on the same data (Adult-sized by default:
all n = 45,222 preprocessed Adult rows, d = 105; `bench._data`) and the same two models, logreg
(d -> 1) and the MLP (d -> d -> 1 with tanh, 11,236 parameters), at expected batch sizes B in
{1, 64, 256, 1024}. On both sides one step is the whole of DP-SGD: Poisson sampling of the batch
(every row independently at rate ~B/n), per-example gradients, clipping to norm 1, Gaussian noise
(multiplier 1) and the parameter update (lr 0.1). Opacus' logreg is `nn.Linear(d, 1)` with its bias
(106 parameters against dpbench's 105, whose data carry an intercept feature); the MLPs match.

- dpbench: the `steps` suite of `dpbench.bench.suites` (`sgd.run_sgd`, the loop DP-SGD fits run), best of
  its paths ("compiled" numba kernels for logreg, "numpy" otherwise); examples/s = B * steps/s.
  It runs in float64 with one BLAS thread per process, the setting its experiment cells use.
- Opacus: end to end, exactly as a user runs it with its defaults: float32 tensors of the same
  data (labels {-1, +1} mapped to {0, 1}) in a `TensorDataset` + `DataLoader(batch_size=B)`,
  `PrivacyEngine().make_private(module, optimizer=SGD(lr=0.1), data_loader, noise_multiplier=1.0,
  max_grad_norm=1.0, poisson_sampling=True)` (its DPDataLoader draws the Poisson batches: rate
  1 / len(DataLoader) = 1 / ceil(n / B), i.e. B/n up to rounding), loss `BCEWithLogitsLoss`; a step
  is next batch, zero_grad, forward, loss, backward, optimizer.step(). Two modes: "hooks"
  (grad_sample_mode="hooks", Opacus' default: per-sample gradients from module hooks) and
  "ghost" (grad_sample_mode="ghost": ghost clipping, two backward passes through the criterion
  that make_private returns). examples/s = rows actually processed / seconds over a timed
  stretch of at least `min_time` seconds after a few warm-up steps (the loader's iterator is
  restarted when an epoch ends). Opacus runs with torch's threads (`threads`, else torch's
  default; recorded as `torch_threads`), so on a multi-core machine it may use every core while
  dpbench uses one. torch's default follows OMP_NUM_THREADS, which the `dpbench` command sets to 1
  for its cells, so `dpbench bench --against opacus` passes torch's own default (from a clean
  process) unless the user set OMP_NUM_THREADS / MKL_NUM_THREADS. On a machine whose cores are
  busy with other work, multi-threaded torch can be many times slower than on one thread
  (threads wait for descheduled peers): `OMP_NUM_THREADS=1 dpbench bench --against opacus` then
  gives Opacus' one-thread figures.

`compare` pairs the two per (model, B): ratio = dpbench / the faster Opacus mode, against a
target of 20x (printed, never asserted).

Optional extra (torch and opacus are not dpbench dependencies; this module imports them lazily):
    pip install torch==2.13.0 'dpbench[opacus]'     # or, in a checkout: pip install -e '.[opacus]'
Install the CPU torch first (`make bench-opacus` does both): a plain `torch` requirement can pull
a multi-GB CUDA build on Linux.
"""

from __future__ import annotations

import math
import time

MODELS: tuple[str, ...] = ("logreg", "mlp")
BATCH_SIZES: tuple[int, ...] = (1, 64, 256, 1024)
MODES: tuple[str, ...] = ("hooks", "ghost")
MIN_TIME = 2.0  # seconds per timed stretch of Opacus steps
WARMUP_STEPS = 5
TARGET_RATIO = 20.0  # dpbench / fastest Opacus mode, per (model, B): printed, never asserted
LR = 0.1
NOISE_MULTIPLIER = 1.0
MAX_GRAD_NORM = 1.0

INSTALL_HINT = ("--against opacus needs torch and opacus: pip install torch==2.13.0 'dpbench[opacus]' "
                "(in a checkout: pip install -e '.[opacus]'; or `make bench-opacus`)")


def require() -> tuple[str, str]:
    """(torch version, opacus version); ImportError with INSTALL_HINT when either is missing."""
    try:
        import opacus
        import torch
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return torch.__version__, opacus.__version__


def framework() -> str:
    torch_version, opacus_version = require()
    return f"opacus {opacus_version}, torch {torch_version}"


def torch_default_threads() -> int | None:
    """torch's own default intra-op thread count, from a clean process (the CLI has set
    OMP_NUM_THREADS=1 for its cells, which torch would otherwise follow); None if that fails."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    try:
        out = subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=env,
                             capture_output=True, text=True, timeout=120, check=True)
        return int(out.stdout.strip().splitlines()[-1])
    except Exception:
        return None


def _module(model_name: str, d: int):
    from torch import nn

    if model_name == "logreg":
        return nn.Linear(d, 1)
    if model_name == "mlp":  # the shape of dpbench's MLP: d -> d (tanh) -> 1
        return nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, 1))
    raise ValueError(f"unknown model {model_name!r} for the Opacus comparison (expected one of {MODELS})")


def _time_opacus(X, y, model_name: str, B: int, mode: str, min_time: float) -> dict:
    """One (model, B, mode): set up Opacus as a user would, warm up, time >= min_time seconds of steps."""
    import torch
    from opacus import PrivacyEngine
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    module = _module(model_name, X.shape[1])
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    loader = DataLoader(TensorDataset(X, y), batch_size=B)
    criterion = nn.BCEWithLogitsLoss()
    engine = PrivacyEngine()
    common = dict(module=module, optimizer=optimizer, data_loader=loader, noise_multiplier=NOISE_MULTIPLIER,
                  max_grad_norm=MAX_GRAD_NORM, poisson_sampling=True)
    if mode == "hooks":
        module, optimizer, loader = engine.make_private(**common)
    elif mode == "ghost":
        # ghost clipping needs the criterion passed in (make_private's default is CrossEntropyLoss)
        # and used as returned: its backward() runs the two passes
        module, optimizer, criterion, loader = engine.make_private(criterion=criterion, grad_sample_mode="ghost",
                                                                   **common)
    else:
        raise ValueError(f"unknown Opacus mode {mode!r} (expected one of {MODES})")
    corrected = _expected_batch_size(optimizer, len(X) / len(loader))
    module.train()
    batches = iter(loader)

    def step() -> int:
        nonlocal batches
        try:
            xb, yb = next(batches)
        except StopIteration:  # an epoch ended: a new pass of Poisson batches
            batches = iter(loader)
            xb, yb = next(batches)
        optimizer.zero_grad()
        # (B,) logits against (B,) targets: ghost clipping scales the per-sample losses by (B,) coefficients
        loss = criterion(module(xb).squeeze(1), yb)
        loss.backward()
        optimizer.step()
        return len(yb)

    for _ in range(WARMUP_STEPS):
        step()
    steps = examples = 0
    started = time.perf_counter()
    while True:
        examples += step()
        steps += 1
        elapsed = time.perf_counter() - started
        if elapsed >= min_time:
            break
    finite = all(bool(torch.isfinite(p).all()) for p in module.parameters())
    return {"steps": steps, "examples": examples, "timed_seconds": elapsed,
            "sample_rate": 1.0 / len(loader), "expected_batch_size": len(X) / len(loader),
            "finite_parameters": finite, **({"expected_batch_size_corrected_from": corrected}
                                            if corrected is not None else {})}


def _expected_batch_size(optimizer, expected: float) -> int | None:
    """Set the DP optimizer's `expected_batch_size` (what it divides the noisy sum by) to round(n q)
    where Opacus' own `int(n * sample_rate)` truncated it: at B = 1, n * (1/n) is 0.999... in floating
    point, so Opacus 1.6 stores 0 and averages by dividing by zero, and every parameter becomes
    infinite after the first step (its timing would then be of inf arithmetic). Returns the value it
    replaced, None when Opacus' was right."""
    wanted = max(1, round(expected))
    had = getattr(optimizer, "expected_batch_size", None)
    if had is None or had == wanted:
        return None
    optimizer.expected_batch_size = wanted
    return int(had)


def opacus_suite(data_dir: str | None = None, repeats: int = 1, *, data=None, models: tuple[str, ...] = MODELS,
                 batch_sizes: tuple[int, ...] = BATCH_SIZES, min_time: float = MIN_TIME,
                 modes: tuple[str, ...] = MODES, threads: int | None = None) -> list[dict]:
    """Opacus DP-SGD steps (see the module docstring), one record per (model, B, mode).

    Records as `bench._record` makes them (suite "opacus", measure "step"), plus `mode`,
    `framework`, `torch_threads`, `steps`, `examples`, `timed_seconds`, `steps_per_s` and
    `expected_batch_size` (n / len(DataLoader), Opacus' own rounding of B), `finite_parameters` (the
    module's parameters after the timed steps) and, where Opacus' optimizer truncated its expected
    batch size (B = 1: 0), `expected_batch_size_corrected_from` (`_expected_batch_size`). The best of `repeats`
    timed stretches is kept. A (mode, shape) that raises is recorded with `error`, not aborted.
    """
    import warnings

    import numpy as np
    import torch

    from dpbench.bench import suites as bench

    fw = framework()
    Xnp, ynp = bench._data(data, data_dir)
    X = torch.from_numpy(np.ascontiguousarray(Xnp, dtype=np.float32))
    y = torch.from_numpy((ynp > 0).astype(np.float32))  # {-1, +1} -> {0, 1}
    n, d = X.shape
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    torch_threads = torch.get_num_threads()
    records = []
    try:
        with warnings.catch_warnings():
            # expected with these defaults, and printed once per setup otherwise
            warnings.filterwarnings("ignore", message="Secure RNG turned off")
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            for model_name in models:
                for B in batch_sizes:
                    B = max(1, min(int(B), n))
                    for mode in modes:
                        n_params = sum(p.numel() for p in _module(model_name, d).parameters())
                        extra = {"mode": mode, "framework": fw, "torch_threads": torch_threads, "dtype": "float32"}
                        best = None
                        try:
                            for _ in range(max(1, repeats)):
                                run = _time_opacus(X, y, model_name, B, mode, min_time)
                                if best is None or (run["examples"] / run["timed_seconds"]
                                                    > best["examples"] / best["timed_seconds"]):
                                    best = run
                        except Exception as exc:  # record, don't abort the benchmark
                            records.append(bench._record("opacus", "dpsgd", model_name, "step", B, n, n_params,
                                                         error=f"{type(exc).__name__}: {exc}"[:200], **extra))
                            continue
                        records.append(bench._record(
                            "opacus", "dpsgd", model_name, "step", B, n, n_params,
                            examples_per_s=best["examples"] / best["timed_seconds"],
                            steps_per_s=best["steps"] / best["timed_seconds"], steps=best["steps"],
                            examples=best["examples"], timed_seconds=best["timed_seconds"],
                            expected_batch_size=best["expected_batch_size"],
                            finite_parameters=best["finite_parameters"],
                            **{k: best[k] for k in ("expected_batch_size_corrected_from",) if k in best}, **extra))
    finally:
        torch.set_num_threads(previous_threads)
    return records


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def compare(dpbench_records: list[dict], opacus_records: list[dict], target: float = TARGET_RATIO) -> list[dict]:
    """One row per (model, batch_size): dpbench's best path, Opacus per mode, ratio to the faster mode.

    dpbench values come from the `steps` suite's "step" records (other suites and measures are
    ignored); Opacus values from suite "opacus" records without `error` whose parameters stayed
    finite (`finite_parameters`). `ratio` is None when
    either side has no value for the shape.
    """
    dp: dict[tuple, dict] = {}
    for rec in dpbench_records:
        if rec.get("suite") != "steps" or rec.get("measure") != "step" or not _finite(rec.get("examples_per_s")):
            continue
        key = (rec["model"], int(rec["batch_size"]))
        if key not in dp or rec["examples_per_s"] > dp[key]["examples_per_s"]:
            dp[key] = rec
    op: dict[tuple, dict[str, float]] = {}
    for rec in opacus_records:
        if rec.get("suite") != "opacus" or "error" in rec or not _finite(rec.get("examples_per_s")) \
                or rec.get("finite_parameters") is False:  # steps of inf arithmetic are not DP-SGD steps
            continue
        modes = op.setdefault((rec["model"], int(rec["batch_size"])), {})
        modes[rec["mode"]] = max(modes.get(rec["mode"], 0.0), rec["examples_per_s"])
    model_order = {m: i for i, m in enumerate(MODELS)}
    rows = []
    for model, B in sorted(set(dp) | set(op), key=lambda k: (model_order.get(k[0], len(MODELS)), k[0], k[1])):
        d_rec = dp.get((model, B))
        modes = op.get((model, B), {})
        dpbench_value = d_rec["examples_per_s"] if d_rec else None
        best_opacus = max(modes.values()) if modes else None
        ratio = dpbench_value / best_opacus if dpbench_value is not None and best_opacus else None
        rows.append({"model": model, "batch_size": B,
                     "dpbench_examples_per_s": dpbench_value, "dpbench_path": d_rec.get("path") if d_rec else None,
                     "opacus_hooks_examples_per_s": modes.get("hooks"),
                     "opacus_ghost_examples_per_s": modes.get("ghost"),
                     "opacus_best_mode": max(modes, key=modes.get) if modes else None,
                     "ratio": ratio, "target": target,
                     "meets_target": None if ratio is None else bool(ratio >= target)})
    return rows


def _num(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def format_comparison(rows: list[dict], markdown: bool = False) -> str:
    """A table of `compare` rows: plain text, or a markdown table (`markdown=True`, the table of docs/speed.md)."""
    if not rows:
        return "(no comparison rows)"
    header = ["model", "B", "dpbench ex/s", "dpbench path", "Opacus hooks ex/s", "Opacus ghost ex/s",
              "dpbench / Opacus", "target"]
    body = []
    for r in rows:
        ratio = r.get("ratio")
        target = r.get("target", TARGET_RATIO)
        verdict = "" if r.get("meets_target") is None else ("met" if r["meets_target"] else "NOT met")
        body.append([r["model"], str(r["batch_size"]), _num(r.get("dpbench_examples_per_s")),
                     r.get("dpbench_path") or "-", _num(r.get("opacus_hooks_examples_per_s")),
                     _num(r.get("opacus_ghost_examples_per_s")), "-" if ratio is None else f"{ratio:,.1f}x",
                     f">= {target:g}x {verdict}".rstrip()])
    numeric = {1, 2, 4, 5, 6}
    if markdown:
        lines = ["| " + " | ".join(header) + " |",
                 "|" + "|".join("---:" if i in numeric else "---" for i in range(len(header))) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(header[i]), *(len(row[i]) for row in body)) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(header), *(line(row) for row in body)])
