"""Figures drawn from the stored tables: the registry of figure kinds (`kinds`), what an
experiment's `figures:` entries may draw, and the built-in static PNG/PDF drawings (`static`,
which imports one module per family: `epsilon`, `sweeps`, `traces`, and the audit figure `audit`;
their shared pieces in `style`, `bands`, `references` and `frame`). Plugins declare a kind with
`dpbench.figures.figure_kind`."""

from dpbench.figures.kinds import FIGURES, FigureKind, View, figure_kind

__all__ = ["FIGURES", "FigureKind", "View", "figure_kind"]
