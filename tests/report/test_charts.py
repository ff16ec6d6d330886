"""The chart JSON a page embeds (dpbench.report.charts) says what it draws: a mean <= 0 on a log
axis is a ▽ at the panel's floor, as in the PNG; the legend shows the markers the panels draw; a
point's hover lists only the settings its method uses. Built from the committed quickstart results."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpbench.report import charts
from dpbench.report import site as report
from dpbench.spec.experiment import load

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def figures(tmp_path_factory) -> dict:
    exp = load(ROOT / "experiments/quickstart.yaml")
    data = report.experiment_data(exp, ROOT / "results", tmp_path_factory.mktemp("page"), baseline=False)
    return {f["id"]: f for f in data["figures"] if f.get("panels")}


def _line_traces(fig: dict):
    for panel in fig["panels"]:
        for trace in panel["traces"]:
            if trace.get("meta") is None and "marker" in trace:
                yield trace


def _symbols(trace: dict) -> list[str]:
    symbol = trace["marker"]["symbol"]
    return symbol if isinstance(symbol, list) else [symbol] * len(trace["x"])


def test_a_zero_gap_is_a_triangle_at_the_floor_and_says_so(figures):
    """The non-private optimality gap is exactly 0: on the log axis it is drawn at the panel's
    floor with an open down-triangle (figures.bands.FLOOR_MARKER in the PNG), its hover says
    "0, drawn at the floor", and the legend explains the triangle."""
    fig = figures["optimality_gap"]
    assert fig["y_log"]
    nonprivate = [t for t in _line_traces(fig) if t["name"] == "nonprivate"]
    assert nonprivate
    for trace in nonprivate:
        assert set(_symbols(trace)) == {"triangle-down-open"}, trace["marker"]
        assert all("0, drawn at the floor" in text for text in trace["text"]), trace["text"][0]
    keys = [e for e in fig["legend"] if e.get("symbol") == "triangle-down-open"]
    assert len(keys) == 1 and "drawn at the floor" in keys[0]["name"] and keys[0].get("key")
    for trace in _line_traces(fig):  # a private gap > 0 keeps its circles
        if trace["name"] != "nonprivate":
            assert "triangle-down-open" not in _symbols(trace)
    accuracy = figures["accuracy"]  # nothing at a floor: no triangle, no key
    assert not any(e.get("key") for e in accuracy["legend"])


def test_the_legend_shows_the_markers_the_panels_draw(figures):
    """Every legend entry with markers names the plotly symbol of its line traces (the non-private
    line's open squares, not the circles every entry used to show); the floor ▽ is the key's."""
    checked = 0
    for fig in figures.values():
        for entry in fig["legend"]:
            if entry.get("marker") is False or entry.get("key"):
                continue
            group = entry.get("group", entry["name"])
            drawn = {s for t in _line_traces(fig) if t.get("legendgroup") == group for s in _symbols(t)}
            assert drawn, (fig["id"], entry)
            if drawn == {"triangle-down-open"}:  # every point at the floor (the non-private gap): the key says it
                assert any(e.get("key") for e in fig["legend"]), (fig["id"], entry)
                assert entry["symbol"] == "square-open", entry
                continue
            drawn.discard("triangle-down-open")
            assert drawn == {entry["symbol"]}, (fig["id"], entry["name"], drawn, entry.get("symbol"))
            checked += 1
    assert checked and any(e.get("symbol") == "square-open" for f in figures.values() for e in f["legend"])


def test_the_hover_lists_only_the_settings_the_method_uses(figures):
    """Non-private L-BFGS ignores the SGD settings its declaration marks "(sgd)": its hover shows
    method and restarts, not epochs or batch_size; DP-SGD's hover keeps them."""
    for fig in figures.values():
        for trace in _line_traces(fig):
            text = trace["text"][0]
            if trace["name"] == "nonprivate":
                assert "method=lbfgs" in text and "restarts=3" in text, text
                for unused in ("epochs=", "batch_size=", "lr=", "lr_schedule=", "trace_every="):
                    assert unused not in text, (unused, text)
            else:
                assert "epochs=" in text and "batch_size=" in text, text


def test_used_params_rule():
    given = {"batch_size": 64.0, "epochs": 5.0, "lr": 0.5, "lr_schedule": "constant", "method": "lbfgs",
             "restarts": 3, "trace_every": 0}
    assert charts.used_params("nonprivate", given) == {"method": "lbfgs", "restarts": 3}
    sgd = charts.used_params("nonprivate", {**given, "method": "sgd"})
    assert "restarts" not in sgd and sgd["epochs"] == 5.0 and sgd["method"] == "sgd"
    assert charts.used_params("dpsgd", {"epochs": 2.0, "method": "x"}) == {"epochs": 2.0, "method": "x"}
    assert charts.used_params("no-such-algorithm", given) == given
