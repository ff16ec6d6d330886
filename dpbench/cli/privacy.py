"""`dpbench privacy epsilon` and `dpbench privacy calibrate`: the DP-SGD accountant on its own."""

from __future__ import annotations

import math
import sys

import click

from dpbench.cli.exits import ErrorExitGroup
from dpbench.cli.options import Checked
from dpbench.core.errors import DpbenchError
from dpbench.core.validation import DELTA, POSITIVE, RATE, Integral, Interval, Real


@click.group(cls=ErrorExitGroup)
def privacy() -> None:
    """The accountant on its own: epsilon of DP-SGD settings, or the noise for a target."""


def _privacy_inputs(sampling_rate, batch_size, n, steps, epochs):
    if sampling_rate is None:
        if batch_size is None or n is None:
            raise DpbenchError("give --sampling-rate, or --batch-size together with --n")
        if batch_size > n:
            raise DpbenchError(f"--batch-size {batch_size:g} is larger than --n {n}: the sampling rate B/n must be "
                               f"at most 1")
        sampling_rate = batch_size / n
    if steps is None:
        if epochs is None:
            raise DpbenchError("give --steps, or --epochs (with --sampling-rate or --batch-size/--n)")
        steps = max(1, round(epochs / sampling_rate))
    return sampling_rate, steps


_common = [
    click.option("--delta", required=True, type=Checked(DELTA),
                 help="target delta of the (epsilon, delta) guarantee, in (0, 1)"),
    click.option("--sampling-rate", "-q", type=Checked(RATE),
                 help="Poisson sampling rate q = B/n"),
    click.option("--batch-size", type=Checked(Interval(Real, 1, None, closed="left")),
                 help="expected batch size B (with --n)"),
    click.option("--n", type=Checked(Interval(Integral, 1)), help="training set size (with --batch-size)"),
    click.option("--steps", "-T", type=Checked(Interval(Integral, 1)), help="number of noisy steps T"),
    click.option("--epochs", type=Checked(POSITIVE), help="instead of --steps: T = epochs / q"),
]


def _with_common(f):
    for option in reversed(_common):
        f = option(f)
    return f


@privacy.command()
@click.option("--noise-multiplier", "-z", required=True, type=Checked(POSITIVE),
              help="noise std / clipping norm")
@_with_common
def epsilon(noise_multiplier, delta, sampling_rate, batch_size, n, steps, epochs) -> None:
    """Epsilon spent by T steps of the Poisson-subsampled Gaussian (DP-SGD), by RDP and by PLD."""
    from dpbench.privacy import dpsgd_epsilon_report

    q, T = _privacy_inputs(sampling_rate, batch_size, n, steps, epochs)
    report = dpsgd_epsilon_report(noise_multiplier, q, T, delta)
    click.echo(f"q = {q:.6g}, T = {T}, z = {noise_multiplier:g}, delta = {delta:g} (add/remove-one adjacency)")
    for name, value in report.items():
        click.echo(f"  epsilon ({name.upper()}): {value:.6g}" + _infinite_note(value))


def _infinite_note(value: float) -> str:
    """What an infinite epsilon from an accountant means, said where it is printed."""
    if math.isfinite(value):
        return ""
    return ("  (no finite epsilon: at this noise the privacy loss exceeds what this accountant can represent "
            "at this delta; it certifies nothing, and a run it says this of is not labelled valid)")


@privacy.command()
@click.option("--epsilon", "target", required=True, type=Checked(POSITIVE), help="target epsilon")
@click.option("--accountant", default="rdp", show_default=True, type=click.Choice(["rdp", "pld"]))
@_with_common
def calibrate(target, accountant, delta, sampling_rate, batch_size, n, steps, epochs) -> None:
    """Smallest noise multiplier whose epsilon (by the chosen accountant) is within the target."""
    from dpbench.privacy import calibrate_dpsgd_noise, dpsgd_epsilon_report

    q, T = _privacy_inputs(sampling_rate, batch_size, n, steps, epochs)
    try:
        z = _with_elapsed(lambda: calibrate_dpsgd_noise(target, delta, q, T, accountant=accountant),
                          f"calibrating z by {accountant.upper()} (a small epsilon needs high RDP orders: minutes)")
    except ValueError as exc:
        raise DpbenchError(str(exc)) from None
    report = _with_elapsed(lambda: dpsgd_epsilon_report(z, q, T, delta), "epsilon of z by RDP and PLD")
    click.echo(f"q = {q:.6g}, T = {T}, target epsilon = {target:g}, delta = {delta:g}, "
               f"calibrated by {accountant.upper()}")
    click.echo(f"  noise multiplier z = {z:.6g}")
    for name, value in report.items():
        click.echo(f"  epsilon spent ({name.upper()}): {value:.6g}" + _infinite_note(value))


def _with_elapsed(work, what: str, quiet_seconds: float = 2.0):
    """Run `work()`; if it takes longer than `quiet_seconds`, show `what` and the elapsed seconds on
    stderr until it returns (the accountant's bisection has no step count to show)."""
    import threading

    from tqdm.auto import tqdm

    done = threading.Event()
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = work()
        except BaseException as exc:  # re-raised in this thread
            outcome["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    if not done.wait(quiet_seconds):
        with tqdm(desc=what, unit="s", bar_format="{desc}: {elapsed}", file=sys.stderr) as bar:
            while not done.wait(1.0):
                bar.update(1)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
