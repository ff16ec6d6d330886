"""An algorithm entry's `tuning:` mapping: private selection of its hyperparameters instead of
selection on validation data (Papernot and Steinke 2022, random stopping: K ~ a truncated
negative binomial number of runs, each a random grid combination with its own noise, the best by
a noisy validation score; docs/selection.md)."""

from __future__ import annotations

from typing import Any

from dpbench.core.errors import SpecError
from dpbench.core.validation import Interval, Mapping, Real, StrOptions, unknown_key, validate
from dpbench.privacy.checks import POSITIVE

#: the settings of an algorithm's `tuning:` mapping and their defaults (PS22 random stopping)
TUNING_DEFAULTS: dict[str, Any] = {"mean_runs": 10.0, "eta": 0.0, "score": "val_accuracy", "score_noise": 10.0,
                                   "loss_bound": 1.0}
TUNING_SCORES = ("val_accuracy", "val_loss")
#: each setting's constraints and what the message adds to say why
TUNING_SETTINGS: dict[str, tuple[Any, str]] = {
    "mean_runs": (Interval(Real, 1, 1000, closed="right"), "the expected number of runs; K >= 1"),
    "eta": (Interval(Real, 0, None, closed="left"), "0: logarithmic, 1: geometric number of runs"),
    "score": (StrOptions(TUNING_SCORES), ""),
    "score_noise": (POSITIVE, "the score's noise multiplier is score_noise / epsilon"),
    "loss_bound": (POSITIVE, "the per-row clip of a val_loss score"),
}


def tuning(value: Any, path: str, private: bool, grid_size: int) -> tuple[tuple[str, Any], ...] | None:
    """An algorithm's `tuning:` mapping checked, defaults filled in, plus the grid size (None:
    no private selection)."""
    if value is None:
        return None
    if not private:
        raise SpecError(f"{path}: private selection needs a private algorithm; a non-private baseline is "
                        f"selected on validation data (remove `tuning`)")
    validate(path, value, Mapping("a mapping such as {mean_runs: 10, eta: 0, score: val_accuracy, score_noise: 10}"))
    unknown = sorted(set(value) - set(TUNING_DEFAULTS))
    if unknown:
        raise unknown_key(path, unknown[0], TUNING_DEFAULTS)
    settings = {**TUNING_DEFAULTS, **value}
    for key, (constraint, why) in TUNING_SETTINGS.items():
        settings[key] = validate(f"{path}.{key}", settings[key], constraint, note=why)
    return tuple(sorted({**settings, "grid_size": grid_size}.items()))


__all__ = ["TUNING_DEFAULTS", "TUNING_SCORES", "TUNING_SETTINGS", "tuning"]
