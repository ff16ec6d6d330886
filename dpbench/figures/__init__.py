"""Figure kinds: the registry of what an experiment's `figures:` entries may draw (`kinds`) and
the built-in static PNG/PDF drawings (`static`). Plugins declare a kind with
`dpbench.figures.figure_kind`."""

from dpbench.figures.kinds import FIGURES, FigureKind, View, figure_kind

__all__ = ["FIGURES", "FigureKind", "View", "figure_kind"]
