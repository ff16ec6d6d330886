"""dpbench.figures.style: a colour per label, a line style per guarantee, dashes for non-private curves."""

from __future__ import annotations

import pandas as pd

import matplotlib

from dpbench.figures.style import (
    AXIS_LABELS,
    CLAIM_STYLES,
    REFERENCE_STYLES,
    STYLE_MEANINGS,
    axis_label,
    claim_line,
    claim_meaning,
    claim_status,
    colours_for,
    label_order,
    legend_name,
    nonprivate_styles,
)
from dpbench.run.metrics import METRICS


def test_colours_are_distinct_for_ten_labels_then_cycle():
    labels = [f"a{i}" for i in range(11)]
    colours = colours_for(labels)
    assert len(set(colours[label] for label in labels[:10])) == 10
    assert colours["a10"] == colours["a0"]


def test_labels_follow_the_spec_then_the_table_once_each_and_only_those_drawn():
    part = pd.DataFrame({"label": ["c", "b", "c", "x"]})
    assert label_order(part, ["b", "absent", "c"]) == ["b", "c", "x"]
    assert label_order(part, None) == ["c", "b", "x"]


def test_one_nonprivate_curve_is_plain_dashed_several_get_their_own_markers():
    one = pd.DataFrame({"label": ["dp", "gd"], "epsilon": [1.0, None]})
    assert nonprivate_styles(one, ["dp", "gd"]) == {"gd": {"linestyle": "--", "linewidth": 1.5, "zorder": 2.2}}
    two = pd.DataFrame({"label": ["dp", "gd", "gd mb"], "epsilon": [1.0, None, None]})
    styles = nonprivate_styles(two, ["dp", "gd", "gd mb"])
    assert set(styles) == {"gd", "gd mb"}
    assert styles["gd"]["marker"] != styles["gd mb"]["marker"]
    # the first is wider and drawn below, so the second stays visible where they coincide
    assert styles["gd"]["linewidth"] > styles["gd mb"]["linewidth"]
    assert styles["gd"]["zorder"] < styles["gd mb"]["zorder"]


def test_claim_line_styles_markers_and_names_by_guarantee():
    valid = pd.DataFrame({"label": ["A"], "dp_claim": ["valid"]})
    kwargs, name = claim_line(valid, "o", "red")
    assert kwargs == {"linestyle": CLAIM_STYLES["valid"][0], "marker": "o", "markerfacecolor": "red"}
    assert name == "A"
    per_run = pd.DataFrame({"label": ["A"], "dp_claim": ["valid per run; selection not private (3 candidates)"]})
    kwargs, name = claim_line(per_run, "o", "red", name="A, ε = 1")
    assert kwargs["markerfacecolor"] == "white" and name == "A, ε = 1 — selected among 3 (not private)"
    # over iterations (no marker of its own): sparse open markers only where solid cannot tell it apart
    assert claim_line(valid, None, "red")[0] == {"linestyle": "-"}
    assert claim_line(per_run, None, "red")[0] == {"linestyle": "-", "marker": "o", "markevery": 0.1,
                                                   "markerfacecolor": "white"}
    none = pd.DataFrame({"label": ["A"], "dp_claim": ["none"]})
    assert claim_line(none, None, "red") == ({"linestyle": ":"}, "A — ε not certified")


def test_axis_labels_fall_back_to_the_metric_description_then_its_name(monkeypatch):
    assert axis_label("accuracy") == AXIS_LABELS["accuracy"]
    monkeypatch.setitem(METRICS, "plugin_metric", ("what a plugin measures",))
    assert axis_label("plugin_metric") == "what a plugin measures"
    assert axis_label("no_such_metric") == "no_such_metric"


def _pattern(style) -> tuple:
    """A line style as its dash pattern (named styles by matplotlib's own patterns; solid: ())."""
    named = {"-": (), "--": "lines.dashed_pattern", "-.": "lines.dashdot_pattern", ":": "lines.dotted_pattern"}
    if isinstance(style, str):
        return tuple(matplotlib.rcParams[named[style]]) if named[style] else ()
    return tuple(style[1])


def test_every_meaning_has_its_own_line_style_and_marker_fill_references_included():
    table = {**STYLE_MEANINGS, **REFERENCE_STYLES}
    looks = [(_pattern(style), filled) for style, filled, _ in table.values()]
    assert len(set(looks)) == len(looks)  # one (line style, marker fill) per meaning
    curve_patterns = {_pattern(style) for style, _, _ in STYLE_MEANINGS.values()}
    assert not curve_patterns & {_pattern(style) for style, _, _ in REFERENCE_STYLES.values()}
    assert len({text for _, _, text in table.values()}) == len(table)  # and the key says each differently
    # the styles claim_status gives (and the report draws) are those of the table
    for kind, (style, filled) in CLAIM_STYLES.items():
        assert STYLE_MEANINGS[kind][:2] == (style, filled)


def test_a_paper_only_curve_selected_without_privacy_has_its_own_meaning():
    selected = pd.DataFrame({"dp_claim": ["paper-only per run; selection not private (2 candidates)"]})
    assert claim_meaning(selected) == "paper-only selected"
    assert STYLE_MEANINGS["paper-only selected"][:2] == claim_status(selected)[:2]
    assert claim_meaning(pd.DataFrame({"dp_claim": ["paper-only"]})) == "paper-only"
    assert claim_meaning(pd.DataFrame({"dp_claim": ["none"]})) == "none"


def test_a_methods_legend_name_keeps_only_the_caveats_all_its_points_share():
    scaled = "feature scaling data-dependent (training min/max, not accounted)"
    rows = pd.DataFrame({"epsilon": [1.0, 1.0, 2.0],
                         "dp_claim": [f"valid per run; selection not private (2 candidates); {scaled}",
                                      f"valid per run; selection not private (6 candidates); {scaled}",
                                      "none"]})
    assert legend_name(rows, "Bolt-on") == "Bolt-on"  # certified on some panels, not on others: nothing shared
    assert legend_name(rows.iloc[:2], "WYX17") == "WYX17 — selected among 2/6 (not private); scaling data-dependent"
    paper = pd.DataFrame({"epsilon": [1.0, 2.0],
                          "dp_claim": ["paper-only per run; selection not private (3 candidates)"] * 2})
    assert legend_name(paper, "Alg. 3") == "Alg. 3 — ε claimed by the paper only; selected among 3 (not private)"
    assert legend_name(pd.DataFrame({"epsilon": [float("nan")], "dp_claim": [""]}), "GD") == "GD"


def test_a_declared_methods_legend_says_what_verify_found_and_at_how_many_of_its_points():
    declared = "ε declared by the algorithm, not dpbench's mechanism"
    ok, bad = "declared (verify consistent at these settings)", "declared (verify mismatch at these settings)"
    rows = pd.DataFrame({"epsilon": [0.1, 1.0, 3.0, 3.0], "dp_claim": [ok, "declared", ok, "declared"]})
    # the declared phrase is shared by every point; verify covered two of the four
    assert legend_name(rows, "peer") == f"peer — {declared}; verify consistent at 2 of 4 points"
    assert legend_name(rows.iloc[[0, 2]], "peer") == f"peer — {declared}; verify consistent"
    rows.loc[1, "dp_claim"] = bad  # the worst verdict wins, counted alone
    assert legend_name(rows, "peer") == f"peer — {declared}; verify mismatch at 1 of 4 points"
    assert claim_status(rows)[2] == f"{declared}; verify mismatch at 1 of 4 points"
    assert legend_name(rows.assign(dp_claim="declared"), "peer") == f"peer — {declared}"


def test_a_claim_with_a_caveat_after_its_kind_keeps_its_kind():
    """"declared; feature scaling data-dependent (...)" is declared, not valid per run: the kind is the
    first word without its punctuation, whatever caveat follows."""
    from dpbench.figures.style import claim_kind

    scaled = "feature scaling data-dependent (training min/max, not accounted)"
    for kind in ("declared", "paper-only", "none"):
        assert claim_kind(pd.DataFrame({"dp_claim": [f"{kind}; {scaled}"]})) == kind
    assert claim_kind(pd.DataFrame({"dp_claim": [f"valid; {scaled}"]})) == "selected"
