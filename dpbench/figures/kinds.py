"""Figure kinds: the registry `FIGURES` of what an experiment's `figures:` entries may draw.

A figure kind is a drawing function `draw(table, metric, stem, title="", algorithm_order=None,
*, <annotated options>) -> [paths]` declared with `figure_kind(...)`: its options (e.g. the
reference line of `metric_over_n`) are its annotated keyword-only arguments, so a spec's figure
entry is checked against them and nothing else lists them. `table` says which table it draws
(`curves`, or `traces`: the per-iteration curves) and `needs` what the grid must contain for the
figure not to be empty (an iterate trace, or a data set swept over n or d). The built-in kinds
are declared in the modules dpbench.figures.static imports (`epsilon`, `sweeps`, `traces`), which
the registry imports on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from dpbench.core.registry import BUILT_IN, Declared, Param, Registry, current_source, params_of


@dataclass(frozen=True)
class View:
    """How the interactive report (dpbench.report.charts) lays a figure kind's table out: `x` is the
    column on the x axis (`x_title` its label, log scale first when `x_log`), one panel per distinct
    value of the `panels` columns, and within a panel one line per algorithm label and distinct
    value of the `lines` columns. Non-private rows (epsilon empty) are a horizontal line when x is
    epsilon and are repeated in every panel when epsilon is a panel column."""

    x: str
    x_title: str
    panels: tuple[str, ...]
    lines: tuple[str, ...] = ()
    x_log: bool = True


@dataclass(frozen=True)
class FigureKind(Declared):
    name: str
    description: str
    draw: Callable[..., list]
    table: str = "curves"  # "curves" | "traces"
    needs: str | None = None  # None | "trace" | "n" | "d"
    view: View | None = None  # None: the report shows the static figure only
    params: tuple[Param, ...] = ()
    source: str = BUILT_IN

    def owner(self) -> str:
        return f"figure kind {self.name!r}"


FIGURES: Registry[FigureKind] = Registry("figure kind", builtins="dpbench.figures.static", group="dpbench.figures")


def figure_kind(name: str, *, description: str, table: str = "curves", needs: str | None = None,
                view: View | None = None) -> Callable[[Callable[..., list]], Callable[..., list]]:
    """Declare a drawing function as figure kind `name` (module docstring); `view` lays it out in
    the interactive report (without one the report shows the static PNG)."""
    if table not in ("curves", "traces"):
        raise ValueError(f"table must be curves or traces, got {table!r}")

    def declare(draw: Callable[..., Any]) -> Callable[..., Any]:
        FIGURES.register(FigureKind(name=name, description=description, draw=draw, table=table, needs=needs,
                                    view=view, params=params_of(draw), source=current_source()))
        return draw

    return declare


__all__ = ["FIGURES", "FigureKind", "View", "figure_kind"]
