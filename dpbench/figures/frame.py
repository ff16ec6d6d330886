"""What frames the panels of every static figure: one legend entry per method shared by the
panels, a compact key of the line styles and markers used, a footer of at most two lines (bands,
seeds, where the details are), the title, the small notes in a panel's emptiest corner, the zero
marks of log axes; and the files: PNG and PDF written atomically, the same curves giving the same
bytes.

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
from dpbench.figures.bands import ZERO_STRIP, place_zero_marks  # noqa: E402
from dpbench.figures.ranges import place_outlier_note  # noqa: E402
from dpbench.figures.style import REFERENCE_COLOUR, STYLE_MEANINGS  # noqa: E402

BAND_NOTE = "bands: 95% confidence interval of the mean over seeds (Student t)"
DETAILS_NOTE = "what each line style's guarantee covers: docs/validity.md"
FOOTER_LINES = 2  # the footer's most lines
KEY_COLOUR = "0.25"  # the style key's swatches (the legend's colours are the methods')
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


def footer(width: float, *parts: str) -> str:
    """The footer: `parts` (empty ones left out) joined by " · " and wrapped to the figure's width,
    at most FOOTER_LINES lines (a longer text is wrapped wider, in smaller print: `finish`)."""
    text = " · ".join(p for p in parts if p)
    chars = int(width * 16)
    lines = textwrap.wrap(text, width=chars)
    while len(lines) > FOOTER_LINES:
        chars += 10
        lines = textwrap.wrap(text, width=chars)
    return "\n".join(lines)


def key_style(ax, meaning: str) -> None:
    """Show the line style of `meaning` (style.STYLE_MEANINGS) in the figure's style key."""
    ax.figure.__dict__.setdefault("_dpbench_styles", set()).add(meaning)


def key_entry(ax, name: str, **line: object) -> None:
    """A swatch of the figure's key besides the line styles: `name` drawn as a line with `line`'s
    keywords (e.g. a marker per epsilon, the claim marks)."""
    ax.figure.__dict__.setdefault("_dpbench_keys", {}).setdefault(name, line)


def style_key(fig) -> tuple[list, list[str]]:
    """(handles, names) of the style key: the line styles used (`key_style`), in STYLE_MEANINGS'
    order, in grey with a marker filled or open as the curves draw them, then the other swatches
    (`key_entry`)."""
    from matplotlib.lines import Line2D

    used = getattr(fig, "_dpbench_styles", set())
    handles, names = [], []
    for meaning, (style, filled, text) in STYLE_MEANINGS.items():
        if meaning in used:
            marker = {} if filled is None else {"marker": "o", "markersize": 4.5,
                                                "markerfacecolor": KEY_COLOUR if filled else "white"}
            handles.append(Line2D([], [], color=KEY_COLOUR, linestyle=style, linewidth=1.5, **marker))
            names.append(text)
    for name, line in getattr(fig, "_dpbench_keys", {}).items():
        handles.append(Line2D([], [], **{"color": KEY_COLOUR, "linestyle": "none", **line}))
        names.append(name)
    return handles, names


def _fitted_legend(fig, handles: list, names: list[str], width: float, most: int, **kwargs):
    """A figure legend at the bottom in the most columns (at most `most`) that fit the width."""
    renderer = fig.canvas.get_renderer()
    for ncol in range(min(len(names), most), 0, -1):
        legend = fig.legend(handles, names, loc="lower center", ncol=ncol, frameon=False, **kwargs)
        if legend.get_window_extent(renderer).width / fig.dpi <= width * 0.97 or ncol == 1:
            return legend
        legend.remove()
    return None


def finish(fig, axes, width: float, title: str, stem: str | Path, note: str | None = None,
           extra: str = "", order: list[str] | None = None, log: bool = True) -> list[Path]:
    """Legend, style key, footer and title below/above the panels; save png and pdf (`save`).

    The legend has one entry per name (`merged_legend`: one per method, reference lines last), its
    swatch the method's line where all its curves look alike, else a patch of its colour; the
    style key (`style_key`) says what the line styles and markers mean. `note`: the footer (default:
    the bands and where the guarantees are explained); `extra`: what goes before it (seeds per
    point, ...); at most FOOTER_LINES lines. `log` is accepted for the figure kinds' calls (a log
    axis's zero marks explain themselves, `bands.place_zero_marks`). The panels keep their height:
    the figure grows by the legend, key, footer and title.
    """
    for ax in axes.flat:
        place_zero_marks(ax)
        place_outlier_note(ax)
    place_corner_notes(fig, axes)
    handles, names = method_legend(axes, order or [])
    key_handles, key_names = style_key(fig)
    note = " · ".join((BAND_NOTE, DETAILS_NOTE)) if note is None else note
    text = footer(width, extra, note)
    lines = text.count("\n") + 1 if text else 0
    footer_in = 0.13 * lines + 0.12
    key = _fitted_legend(fig, key_handles, key_names, width, len(key_names), fontsize=8, handlelength=3,
                         columnspacing=1.4) if key_names else None
    legend = _fitted_legend(fig, handles, names, width, 4, fontsize=9, handlelength=3) if names else None
    renderer = fig.canvas.get_renderer()
    key_in = key.get_window_extent(renderer).height / fig.dpi if key else 0.0
    legend_in = legend.get_window_extent(renderer).height / fig.dpi if legend else 0.0
    bottom_in = footer_in + key_in + legend_in + 0.2
    if title:
        title = textwrap.fill(title, width=int(width * 11))
    title_in = 0.2 * (title.count("\n") + 1) if title else 0.0  # the panels keep their height
    height = fig.get_figheight() + bottom_in + title_in
    fig.set_figheight(height)
    if key:
        key.set_bbox_to_anchor((0.5, (footer_in + 0.02) / height), transform=fig.transFigure)
    if legend:
        legend.set_bbox_to_anchor((0.5, (footer_in + key_in + 0.05) / height), transform=fig.transFigure)
    if text:
        fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=7, color="0.3", linespacing=1.25)
    if title:
        fig.suptitle(title, fontsize=11, y=1 - 0.08 / height, va="top")
    fig.tight_layout(rect=(0, bottom_in / height, 1, 1))  # tight_layout makes room for the suptitle itself
    return save(fig, stem)


def method_legend(axes, order: list[str]) -> tuple[list, list[str]]:
    """`merged_legend`'s entries, each with one swatch: the first line of that name where every
    line of the name has the same line style, marker and fill, else a patch of its colour (the
    style key says what the styles mean)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles, names = merged_legend(axes, order)
    looks: dict[str, set] = {}
    for ax in axes.flat:
        for line in ax.get_lines():
            looks.setdefault(line.get_label(), set()).add(
                (str(line.get_linestyle()), line.get_marker(), str(line.get_markerfacecolor())))
    out = []
    for handle, name in zip(handles, names):
        if isinstance(handle, Line2D) and len(looks.get(name, ())) > 1:
            handle = Patch(color=handle.get_color())
        out.append(handle)
    return out, names


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


def line_points(ax, per_segment: int = 12) -> np.ndarray:
    """The points of every line of `ax` in axes coordinates, `per_segment` more between two points of
    a line drawn with a line style (a horizontal line of two points crowds the whole width)."""
    ax.get_xlim(), ax.get_ylim()  # settle autoscaling before mapping data to the axes box
    to_axes = ax.transAxes.inverted()
    out = []
    for line in ax.get_lines():
        data = np.column_stack([np.asarray(v, dtype=float) for v in line.get_data()])
        if not len(data):
            continue
        xy = to_axes.transform(line.get_transform().transform(data))
        if line.get_linestyle() not in ("None", "none", "") and len(xy) > 1:
            t = np.linspace(0, 1, per_segment, endpoint=False)
            xy = np.concatenate([a + t[:, None] * (b - a) for a, b in zip(xy[:-1], xy[1:])] + [xy[-1:]])
        out.append(xy)
    xy = np.concatenate(out) if out else np.zeros((0, 2))
    return xy[np.all(np.isfinite(xy), axis=1)]


def place_corner_notes(fig, axes) -> None:
    """Each panel's notes (`corner_note`) in one grey box, in the corner of the four whose box
    (40% of the width, 18% of the height; the bottom ones above the zero marks' strip of a log
    panel, bands.place_zero_marks) holds the fewest of the panel's line points (`line_points`).
    When every corner has a line in it, the notes go above the panel, right-aligned between its
    title and its top edge (the outlier note, ranges.place_outlier_note, is left-aligned there), so
    no note sits on a curve."""
    for ax in axes.flat:
        notes = getattr(ax, "_dpbench_notes", None)
        if not notes:
            continue
        xy = line_points(ax)
        low = ZERO_STRIP + 0.01 if getattr(ax, "_dpbench_zeros", None) else 0.0  # above the zero marks' strip
        corners = {(0.98, 0.97, "right", "top"): (0.6, 0.82), (0.02, 0.97, "left", "top"): (0.0, 0.82),
                   (0.98, low + 0.03, "right", "bottom"): (0.6, low), (0.02, low + 0.03, "left", "bottom"): (0.0, low)}

        def crowd(box: tuple[float, float]) -> int:
            x0, y0 = box
            return int(np.sum((xy[:, 0] >= x0) & (xy[:, 0] <= x0 + 0.4) & (xy[:, 1] >= y0) & (xy[:, 1] <= y0 + 0.18)))

        (x, y, ha, va), box = min(corners.items(), key=lambda item: crowd(item[1]))
        if crowd(box):
            ax.set_title(ax.get_title(), fontsize=ax.title.get_fontsize(), pad=16)
            ax.text(1.0, 1.015, " · ".join(notes), transform=ax.transAxes, ha="right", va="bottom", fontsize=7,
                    color=REFERENCE_COLOUR)
            continue
        ax.text(x, y, "\n".join(notes), transform=ax.transAxes, ha=ha, va=va, fontsize=7, color=REFERENCE_COLOUR,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1})
