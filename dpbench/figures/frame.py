"""What frames the panels of every static figure: one legend shared by the panels, a footer that
says how to read them, the title, the small notes in a panel's emptiest corner; and the files:
PNG and PDF written atomically, the same curves giving the same bytes.

The backend is Agg (files only, never a window): every figure is finished here, so importing this
module sets it before any figure is drawn.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pandas as pd

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from dpbench.core.store import atomic_write_bytes_via  # noqa: E402
from dpbench.figures.style import REFERENCE_COLOUR  # noqa: E402

BAND_NOTE = "bands: 95% confidence interval of the mean over seeds (Student t; curves.csv ci_low, ci_high), kept " \
            "inside the metric's range"
LOG_NOTE = ("log axes: ▽ = a mean ≤ 0, drawn at the panel's floor (a decade below its smallest positive mean); "
            "a band's lower edge is clipped to a decade below its mean (an interval reaching 0 has no log)")
CLAIM_NOTE = ("line style = what the DP guarantee covers (the legend says it too): solid, filled markers: valid "
              "for the curve as drawn (one hyperparameter setting, or private selection drawn at its end-to-end ε) · "
              "solid, open markers: valid per run only (hyperparameters selected among k on validation data with no "
              "ε for the selection, δ ≥ 1/n, or features scaled with the data's own ranges) · dash-dot: ε claimed by the paper only (proof unsound; open markers: "
              "also selected among k) · dotted: ε not certified for this model · dashed: non-private · " + BAND_NOTE)
DPI = 130
FORMATS = (".png", ".pdf")


def seeds_note(curves: pd.DataFrame) -> str:
    """A footer line naming the curves whose points have another seed count than most (curves.csv
    `count`, e.g. curves `dpbench decide` extended for an undecided claim): "seeds per point: 20;
    DP-SGD 20-40"; "" when every point has the same count (each band is its own curve's interval
    either way)."""
    if "count" not in curves:
        return ""
    counts = curves["count"].dropna().astype(int)
    if counts.nunique() <= 1:
        return ""
    common = int(counts.mode().iloc[0])
    spans = curves.dropna(subset=["count"]).groupby("label", sort=False)["count"].agg(["min", "max"]).astype(int)
    spans = spans[(spans["min"] != common) | (spans["max"] != common)]
    parts = [f"{label} {lo}" + (f"-{hi}" if hi != lo else "") for label, lo, hi in spans.itertuples()]
    return f"seeds per point: {common}; " + ", ".join(parts)


def claim_note(log: bool) -> str:
    """The default footer: the line styles and the bands, and the log-axis floor when a panel has one."""
    return CLAIM_NOTE + (" · " + LOG_NOTE if log else "")


def finish(fig, axes, width: float, title: str, stem: str | Path, note: str | None = None,
           extra: str = "", order: list[str] | None = None, log: bool = True) -> list[Path]:
    """Shared legend, footer and title below/above the panels; save png and pdf (`save`).

    Legend entries that differ only in a candidate count ("selected among 2" / "among 6", the same
    line style) are merged into one ("among 2/6"); entries follow `order` (the labels), reference
    lines last, in as many columns as fit the width. `note`: the footer (default: the claim styles
    and the bands, `log` saying whether a panel has a log axis); `extra`: a first footer line
    (what a figure's reference line is). The panels keep their height: the figure grows by the
    legend, footer and title.
    """
    place_corner_notes(fig, axes)
    handles, names = merged_legend(axes, order or [])
    note = claim_note(log) if note is None else note
    text = "\n".join(textwrap.fill(t, width=int(width * 15)) for t in (extra, note) if t)
    lines = text.count("\n") + 1 if text else 0
    footer_in = 0.125 * lines + 0.12
    legend_in = 0.0
    if names:
        renderer = fig.canvas.get_renderer()
        for ncol in range(min(len(names), 4), 0, -1):  # the most columns that fit the width
            legend = fig.legend(handles, names, loc="lower center", ncol=ncol, frameon=False, fontsize=9)
            box = legend.get_window_extent(renderer)
            if box.width / fig.dpi <= width * 0.97 or ncol == 1:
                break
            legend.remove()
        legend_in = box.height / fig.dpi
    bottom_in = footer_in + legend_in + 0.2
    if title:
        title = textwrap.fill(title, width=int(width * 11))
    title_in = 0.2 * (title.count("\n") + 1) if title else 0.0  # the panels keep their height
    height = fig.get_figheight() + bottom_in + title_in
    fig.set_figheight(height)
    if names:
        legend.set_bbox_to_anchor((0.5, (footer_in + 0.05) / height), transform=fig.transFigure)
    if text:
        fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=7, color="0.3", linespacing=1.25)
    if title:
        fig.suptitle(title, fontsize=11, y=1 - 0.08 / height, va="top")
    fig.tight_layout(rect=(0, bottom_in / height, 1, 1))  # tight_layout makes room for the suptitle itself
    return save(fig, stem)


def save(fig, stem: str | Path) -> list[Path]:
    """Write <stem>.png and <stem>.pdf atomically (store.atomic_write_bytes_via: a file whose bytes
    do not change is left alone) and close the figure; returns the two paths. The PDF carries no
    creation date, so the same figure gives the same bytes."""
    stem = Path(stem)
    paths = []
    for suffix in FORMATS:
        path = stem.with_suffix(suffix)
        meta = {"CreationDate": None} if suffix == ".pdf" else {}
        atomic_write_bytes_via(path, lambda tmp, s=suffix, m=meta: fig.savefig(tmp, dpi=DPI, format=s[1:], metadata=m))
        paths.append(path)
    plt.close(fig)
    return paths


_AMONG = re.compile(r"among (\d+)")


def merged_legend(axes, order: list[str]) -> tuple[list, list[str]]:
    """(handles, names) of every panel, each name once, names equal but for "among <k>" merged, in
    the order of the labels they start with (`order`), the rest (reference lines) after. Names
    starting with "_" are matplotlib's hidden entries."""
    handles, names = [], []
    for ax in axes.flat:
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names and not n.startswith("_"):
                handles.append(h)
                names.append(n)
    groups: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        groups.setdefault(_AMONG.sub("among #", n), []).append(i)
    merged = []
    for key, members in groups.items():
        name = names[members[0]]
        if len(members) > 1 and "among #" in key:
            ks = sorted({int(k) for i in members for k in _AMONG.findall(names[i])})
            name = key.replace("among #", "among " + "/".join(map(str, ks)))
        merged.append((handles[members[0]], name))

    def rank(name: str) -> int:
        starts = [i for i, label in enumerate(order) if name == label or name.startswith((label + " — ", label + ", "))]
        return max(starts, key=lambda i: len(order[i])) if starts else len(order)

    merged.sort(key=lambda hn: rank(hn[1]))  # stable: a label's entries keep their order
    return [h for h, _ in merged], [n for _, n in merged]


def corner_note(ax, text: str, first: bool = False) -> None:
    """A small grey note placed by `finish` in the panel corner with the fewest data points
    (`place_corner_notes`); `first` puts it above the panel's other notes."""
    if not hasattr(ax, "_dpbench_notes"):
        ax._dpbench_notes = []
    ax._dpbench_notes.insert(0, text) if first else ax._dpbench_notes.append(text)


def place_corner_notes(fig, axes) -> None:
    """Each panel's notes (`corner_note`) in one grey box, in the corner of the four whose box
    (40% of the width, 18% of the height) holds the fewest of the panel's line points."""
    for ax in axes.flat:
        notes = getattr(ax, "_dpbench_notes", None)
        if not notes:
            continue
        ax.get_xlim(), ax.get_ylim()  # settle autoscaling before mapping data to the axes box
        points = [ax.transAxes.inverted().transform(ax.transData.transform(np.column_stack(line.get_data())))
                  for line in ax.get_lines() if len(line.get_xdata())]
        xy = np.concatenate(points) if points else np.zeros((0, 2))
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        corners = {(0.98, 0.97, "right", "top"): (0.6, 0.82), (0.02, 0.97, "left", "top"): (0.0, 0.82),
                   (0.98, 0.03, "right", "bottom"): (0.6, 0.0), (0.02, 0.03, "left", "bottom"): (0.0, 0.0)}

        def crowd(box: tuple[float, float]) -> int:
            x0, y0 = box
            return int(np.sum((xy[:, 0] >= x0) & (xy[:, 0] <= x0 + 0.4) & (xy[:, 1] >= y0) & (xy[:, 1] <= y0 + 0.18)))

        (x, y, ha, va), _ = min(corners.items(), key=lambda item: crowd(item[1]))
        ax.text(x, y, "\n".join(notes), transform=ax.transAxes, ha=ha, va=va, fontsize=7, color=REFERENCE_COLOUR,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1})
