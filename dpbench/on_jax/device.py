"""Where the optional JAX path runs: the `--device` choices and the switch the JAX twins read.

  cpu      the numpy/numba path (the default; what CI's references and every stored curve use)
  gpu      the JAX path (`dpbench.on_jax.twins`) on the first GPU JAX sees, for the families
           that have a JAX twin; every other algorithm runs on the CPU path in the same run
  jax-cpu  the same JAX path on JAX's CPU build: its results are the GPU's up to float rounding
           (JAX's counter-based random numbers are the same on every platform), so tests and
           machines without a GPU run and check it

The JAX path computes in float64 (JAX's x64 mode, switched on by `activate`), draws its own random
numbers (its cells are keyed by backend, `dpbench.core.keys.Cell.backend`) and never runs the
accounting: every calibration and ledger is the numpy path's own, computed on the CPU before the
loop starts. Importing this module does not import JAX.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from typing import Iterator

from dpbench.core.errors import DpbenchError

DEVICES = ("cpu", "gpu", "jax-cpu")
#: `--device` value -> the JAX platform its twins run on (None: the numpy path, no JAX)
PLATFORMS = {"cpu": None, "gpu": "gpu", "jax-cpu": "cpu"}
INSTALL_HINT = ("pip install 'dpbench[jax]' (JAX's CPU build); for an NVIDIA GPU also "
                "pip install 'jax[cuda12]' (https://docs.jax.dev/en/latest/installation.html)")

_CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("dpbench_device", default="cpu")


def uses_jax(device: str) -> bool:
    """Whether `device` runs the JAX path."""
    _known(device)
    return PLATFORMS[device] is not None


def _known(device: str) -> None:
    if device not in PLATFORMS:
        raise DpbenchError(f"--device: unknown device {device!r}; choose one of {', '.join(DEVICES)}")


def prepare_environment(device: str) -> None:
    """Before any worker starts: on a GPU, JAX must not take 75 % of its memory in every worker
    process (its default), so each allocates what it uses (XLA_PYTHON_CLIENT_PREALLOCATE=false,
    inherited by the workers)."""
    if PLATFORMS.get(device) == "gpu":
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def activate(device: str):
    """Import JAX, switch on float64 and return the jax.Device that `device` runs on; a
    DpbenchError saying what is missing when JAX is not installed or sees no GPU."""
    _known(device)
    platform = PLATFORMS[device]
    if platform is None:
        raise DpbenchError("--device cpu runs the numpy path; the JAX path needs --device gpu or jax-cpu")
    prepare_environment(device)
    try:
        import jax
    except ImportError:
        raise DpbenchError(f"--device {device} needs JAX, which is not installed: {INSTALL_HINT}") from None
    jax.config.update("jax_enable_x64", True)
    try:
        found = jax.devices(platform)
    except RuntimeError:
        found = []
    if not found:
        seen = ", ".join(str(d) for d in jax.devices()) or "none"
        raise DpbenchError(f"--device {device}: JAX sees no {platform.upper()} (its devices: {seen}); "
                           f"{INSTALL_HINT}; or run with --device jax-cpu (the JAX path on the CPU) or cpu")
    return found[0]


def compilation_cache(folder: str | None) -> None:
    """Keep JAX's compiled loops in `folder` (JAX's persistent compilation cache; results/.cache/jax for
    a run), so the workers of a run and later runs reuse them instead of compiling each shape again.
    A process that runs into another results folder moves its cache there; None leaves it as it is."""
    if folder is None:
        return
    import jax

    if jax.config.jax_compilation_cache_dir == str(folder):
        return
    try:
        from jax.experimental.compilation_cache import compilation_cache
    except ImportError:  # an older JAX: the folder is taken when the cache is first used
        compilation_cache = None
    if compilation_cache is not None:
        compilation_cache.reset_cache()  # the next compilation opens the cache in the new folder
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # the loops compile in ~0.5 s each


def current() -> str:
    """The device the JAX twins run on in this context (`on`); "cpu" outside of `on`."""
    return _CURRENT.get()


@contextlib.contextmanager
def on(device: str) -> Iterator[None]:
    """Run the enclosed JAX twins on `device` (gpu or jax-cpu)."""
    token = _CURRENT.set(device)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def describe(device: str) -> str:
    """What `device` is, for records and benchmark tables: e.g. "gpu: NVIDIA H100 80GB HBM3 (jax 0.10.2)"."""
    if not uses_jax(device):
        return "cpu: numpy/numba"
    found = activate(device)  # a DpbenchError first where JAX is missing
    import jax

    kind = getattr(found, "device_kind", "") or found.platform
    return f"{device}: {kind} (jax {jax.__version__})"


__all__ = ["DEVICES", "INSTALL_HINT", "PLATFORMS", "activate", "compilation_cache", "current", "describe", "on",
           "prepare_environment", "uses_jax"]
