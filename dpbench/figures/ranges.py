"""A panel's y range when one method lies far off the others: set from the others, the far one drawn
clipped with arrows at the panel's edge and a note saying where it is.

The rule (`find_outlier`), on the axis' scale (log10 of the values on a log axis): with at least
three methods in a panel, a method is far off when its curve reaches beyond the range of the other
methods' means (and the reference values the panel must show, e.g. the majority class) by more than
FAR times that range's span, the span taken as at least MIN_SPAN_LOG decades on a log axis or
MIN_SPAN_LINEAR of its largest magnitude on a linear one (so that curves that nearly coincide do
not make every other curve far off). The method reaching farthest, in spans, is the one; the range
is then the others' means and bands plus a margin (`fit_range`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


FAR = 1.0  # far off: reaching beyond the others' range by more than FAR times its span
MIN_SPAN_LOG = 0.5  # decades: the least span of the others' range on a log axis
MIN_SPAN_LINEAR = 0.05  # of the others' largest magnitude: the least span on a linear axis
MARGIN = 0.06  # of the others' span, above and below it
EDGE = 0.015  # where the arrows of a far curve's points sit, in axes fraction from the edge


def short(value: float) -> str:
    """A value for a note: two significant digits, a power of ten as "4e3" / "2e-5"."""
    text = f"{value:.2g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


@dataclass(frozen=True)
class Outlier:
    """A method far off the others (`find_outlier`): on which side, and its own curves' extent."""

    label: str
    side: str  # "below" | "above"
    low: float
    high: float

    def note(self) -> str:
        """The panel's note: "Bolt-on below, 0.48–0.82"."""
        return f"{self.label} {self.side}, {short(self.low)}–{short(self.high)}"


def _scale(values, log: bool) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    return np.log10(values) if log else values


def find_outlier(extents: dict[str, tuple[float, float]], log: bool,
                 fixed: tuple[float, ...] = ()) -> Outlier | None:
    """The method far off the others (module docstring), or None. `extents`: each method's lowest and
    highest mean in the panel (positive ones on a log axis); `fixed`: reference values the others'
    range includes."""
    if len(extents) < 3:
        return None
    best, best_score = None, FAR
    for label, (low, high) in extents.items():
        others = [v for other, ext in extents.items() if other != label for v in ext] + list(fixed)
        o_low, o_high = _scale([min(others), max(others)], log)
        least = MIN_SPAN_LOG if log else MIN_SPAN_LINEAR * max(abs(o_low), abs(o_high))
        span = max(o_high - o_low, least)
        below, above = o_low - _scale(low, log), _scale(high, log) - o_high
        score = max(below, above) / span
        if score > best_score:
            best, best_score = Outlier(label, "below" if below > above else "above", low, high), score
    return best


def fit_range(ax, curves: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]], colours: dict,
              log: bool, fixed: tuple[float, ...] = ()) -> Outlier | None:
    """Apply the rule to a drawn panel: `curves` maps each method to its curves as drawn (x, mean,
    band low, band high; NaN where nothing is drawn). With a far-off method, the y range is the
    others' means and bands (and `fixed`) plus MARGIN, the far method's points beyond it get an
    arrow at the edge in its colour, and the panel a note (`Outlier.note`, placed by
    `place_outlier_note`); returns the outlier."""
    extents = {}
    for label, lines in curves.items():
        means = np.concatenate([m for _, m, _, _ in lines]) if lines else np.array([])
        means = means[np.isfinite(means) & ((means > 0) if log else True)]
        if means.size:
            extents[label] = (float(means.min()), float(means.max()))
    outlier = find_outlier(extents, log, fixed)
    if outlier is None:
        return None
    values = [v for label, lines in curves.items() if label != outlier.label
              for _, m, lo, hi in lines for v in (*m, *lo, *hi)] + list(fixed)
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & ((values > 0) if log else True)]
    low, high = _scale([values.min(), values.max()], log)
    pad = MARGIN * max(high - low, 1e-12)
    limits = (low - pad, high + pad)
    ax.set_ylim(*(10 ** np.array(limits) if log else limits))
    bottom, top = ax.get_ylim()
    for xs, mean, _, _ in curves[outlier.label]:
        for beyond, y, marker in ((mean < bottom, EDGE, "v"), (mean > top, 1 - EDGE, "^")):
            if beyond.any():
                ax.plot(np.asarray(xs)[beyond], np.full(int(beyond.sum()), y), transform=ax.get_xaxis_transform(),
                        linestyle="none", marker=marker, markersize=6, color=colours[outlier.label], clip_on=False,
                        zorder=6, label="_beyond")
    ax.__dict__["_dpbench_outlier"] = (outlier.note(), colours[outlier.label])
    return outlier


def place_outlier_note(ax) -> None:
    """A panel's outlier note (`fit_range`) in the far method's colour between the panel's title and
    its top edge, left-aligned, where no curve is: the title moves up by a line (the right end of
    that line is for corner notes that find no free corner, frame.place_corner_notes)."""
    noted = getattr(ax, "_dpbench_outlier", None)
    if noted is None:
        return
    text, colour = noted
    marker = "▼" if " below, " in text else "▲"
    ax.set_title(ax.get_title(), fontsize=ax.title.get_fontsize(), pad=16)
    ax.text(0.0, 1.015, f"{marker} {text}", transform=ax.transAxes, ha="left", va="bottom", fontsize=7.5,
            color=colour)
