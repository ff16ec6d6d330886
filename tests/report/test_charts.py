"""The chart JSON a page embeds (dpbench.report.charts) says what it draws: a mean <= 0 on a log
axis is a ▽ at the panel's floor, as in the PNG; the legend shows the markers the panels draw; a
point's hover lists only the settings its method uses; axis titles fit a panel and a log axis labels
decades (or full values), never a bare digit. Built from the committed quickstart results."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from dpbench.figures.style import PLAIN_AXIS_LABELS
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
    accuracy = figures["accuracy"]  # nothing at a floor: no triangle, no floor key
    assert not any(e.get("symbol") == "triangle-down-open" for e in accuracy["legend"])


def test_one_legend_entry_per_method_and_a_key_per_line_style(figures):
    """As in the PNG: each method once in the legend (no second entry for a caveat), and every line
    style the panels draw explained once by a grey key entry (figures.style.STYLE_MEANINGS)."""
    for fig in figures.values():
        methods = [e["name"] for e in fig["legend"] if not e.get("key")]
        labels = [name.split(" — ")[0] for name in methods]
        assert len(labels) == len(set(labels)), methods
        drawn = {t["line"]["dash"] for t in _line_traces(fig)}
        keyed = {e["dash"] for e in fig["legend"] if str(e.get("group", "")).startswith("style:")}
        assert drawn <= keyed, (drawn, keyed)
    legend: dict = {}
    first = charts.method_entry(legend, "Bolt-on", "#d62728", "solid", "circle-open")
    assert (first["dash"], first["symbol"]) == ("solid", "circle-open")
    charts.method_entry(legend, "Bolt-on", "#d62728", "solid", "circle-open")  # the same style again
    assert legend["Bolt-on"]["symbol"] == "circle-open"
    charts.method_entry(legend, "Bolt-on", "#d62728", "dot", "circle-open")  # another panel, not certified
    assert list(legend) == ["Bolt-on"] and (legend["Bolt-on"]["dash"], legend["Bolt-on"]["symbol"]) == ("none", "square")


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


def _label_value(text: str) -> float:
    """The number a log axis's label says (`charts.tick_label`: 0.01, 10<sup>−5</sup>, 2×10<sup>−5</sup>)."""
    text = text.replace("−", "-")
    found = re.fullmatch(r"(?:(\d)×)?10<sup>(-?\d+)</sup>", text)
    if found:
        return float(found.group(1) or 1) * 10.0 ** int(found.group(2))
    return float(text)


def _labelled(ticks: dict, lo: float, hi: float) -> list[tuple[float, str]]:
    return [(v, t) for v, t in zip(ticks["tickvals"], ticks["ticktext"]) if lo <= v <= hi]


def test_axis_titles_fit_a_panel():
    """Every plain axis label (figures.style.PLAIN_AXIS_LABELS) and the audit figure's y title break
    into lines of at most TITLE_CHARS characters, the words before the formula; nothing is lost."""
    for label in [*PLAIN_AXIS_LABELS.values(), "audited lower bound on ε (95%)", "privacy budget ε"]:
        lines = charts.axis_title(label).split("<br>")
        assert all(len(line) <= charts.TITLE_CHARS for line in lines), (label, lines)
        assert " ".join(lines) == label
    assert charts.axis_title(PLAIN_AXIS_LABELS["optimality_gap"]) == "optimality gap<br>L(θ; D_train) − L*"
    assert charts.axis_title("short") == "short"


def test_log_ticks_label_decades_and_never_a_bare_digit():
    """Over two decades or more a log axis labels only the powers of ten, with unlabelled minor ticks
    between them; a shorter range labels 1-2-5 or every digit, always with the full value, never the
    digit alone (plotly.js's "4 5 6 7 8 9 0.1 2 3")."""
    wide = charts.log_ticks([1e-5, 3e-3, 0.3])
    assert wide["tickmode"] == "array" and wide["minor"]["dtick"] == "D1" and "showgrid" in wide["minor"]
    shown = _labelled(wide, 1e-5, 0.3)
    assert [t for _, t in shown] == ["10<sup>−5</sup>", "10<sup>−4</sup>", "0.001", "0.01", "0.1"]
    for value, text in zip(wide["tickvals"], wide["ticktext"]):  # every label, zoomed out too
        assert math.log10(value) == round(math.log10(value)) and _label_value(text) == pytest.approx(value)
    assert [t for _, t in _labelled(charts.log_ticks([3, 40000]), 3, 40000)] == ["10", "100", "1000", "10<sup>4</sup>"]
    assert [t for _, t in _labelled(charts.log_ticks([0.04, 0.3]), 0.04, 0.3)] == ["0.05", "0.1", "0.2"]
    assert [t for _, t in _labelled(charts.log_ticks([0.62, 0.93]), 0.62, 0.93)] == ["0.7", "0.8", "0.9"]
    for values in ([0.04, 0.3], [0.62, 0.93], [0.012, 0.09], [2e-6, 3e-5]):
        ticks = charts.log_ticks(values)
        assert all(_label_value(t) == pytest.approx(v) for v, t in zip(ticks["tickvals"], ticks["ticktext"]))
    narrow = charts.log_ticks([0.80, 0.85])  # no two digits inside: plotly's linear steps, labelled in full
    assert narrow["tickmode"] == "linear" and narrow["dtick"].startswith("L")
    assert charts.log_ticks([0.0, -1.0, float("nan")]) == {"dtick": 1}  # nothing positive to place


def test_every_log_axis_of_a_figure_gets_its_ticks(figures):
    """The page's axis attributes: both scales per axis with the title in lines; each panel's log
    ticks over what it draws, decades only on quickstart's optimality gap (a gap spanning decades) and
    ε axes, full values elsewhere (accuracy switched to log)."""
    gap = figures["optimality_gap"]
    assert gap["y_log"] and gap["x_log"]
    for axis in ("x", "y"):
        assert gap["axes"][axis]["log"]["type"] == "log" and gap["axes"][axis]["linear"]["type"] == "linear"
        assert gap["axes"][axis]["log"]["automargin"] and gap["axes"][axis]["log"]["ticks"] == "outside"
    assert gap["axes"]["y"]["log"]["title"]["text"] == charts.axis_title(PLAIN_AXIS_LABELS["optimality_gap"])
    for fig in figures.values():
        for panel in fig["panels"]:
            for axis in ("x", "y"):
                ticks = panel["log_ticks"][axis]
                drawn = [v for t in panel["traces"] for v in t[axis] if v > 0]
                if ticks["tickmode"] == "array":
                    assert all(_label_value(t) == pytest.approx(v) for v, t in zip(ticks["tickvals"], ticks["ticktext"]))
                if axis == "x" or fig is gap:  # ε from 0.01 to 3, gaps over decades: decades only
                    shown = _labelled(ticks, min(drawn), max(drawn))
                    assert len(shown) >= 2 and all(math.log10(v) == round(math.log10(v)) for v, _ in shown), shown
