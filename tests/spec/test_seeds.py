"""Per-dataset seed counts: `seeds: {default: N, <dataset>: M}` (dpbench.spec.experiment._seed_plan)."""

from __future__ import annotations

from collections import Counter

import pytest

from dpbench.core.errors import SpecError
from dpbench.spec import experiment as spec

DATASETS = "datasets: [{name: breast_cancer, label: Breast Cancer}, iris]\n"
GRID = ("models: [logreg]\nalgorithms:\n  - name: nonprivate\n  - name: dpsgd\n"
        "    params: {epochs: 2, lr: [0.5, 1.0]}\nepsilons: [0.5, 4.0]\n")


def _load(tmp_path, seeds: str, extra: str = "", profile: str = spec.DEFAULT_PROFILE, name: str = "s"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: seeds\n{DATASETS}{GRID}seeds: {seeds}\n{extra}")
    return spec.load(path, profile=profile)


def _reps(exp) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for c in exp.cells():
        out.setdefault(c.dataset_label, set()).add(c.rep)
    return out


def test_mapping_gives_each_dataset_its_count_and_reuses_keys(tmp_path):
    exp = _load(tmp_path, "{default: 2, iris: 4}")
    assert _reps(exp) == {"Breast Cancer": {0, 1}, "iris": {0, 1, 2, 3}}
    assert exp.seeds == (0, 1) and exp.seeds_for("iris") == 4 and exp.seeds_for(exp.datasets[0]) == 2
    assert exp.seeds_summary() == "{default: 2, iris: 4}"
    cells = exp.cells()
    per = Counter((c.dataset_label, c.rep) for c in cells)
    assert per[("iris", 3)] == per[("Breast Cancer", 0)] == 1 + 2 * 2  # nonprivate + 2 lrs x 2 epsilons
    assert exp.n_cells() == len(cells)
    # reps 0-1 are exactly the cells of `seeds: 2`: stored cells are reused, only iris reps 2-3 are new
    plain = _load(tmp_path, "2", name="plain")
    assert plain.seeds_summary() == "2" and plain.dataset_seeds == ()
    assert {c.key for c in plain.cells()} == {c.key for c in cells if c.rep < 2}
    assert {c.key for c in cells} - {c.key for c in plain.cells()} == {c.key for c in cells if c.rep >= 2}


def test_keys_by_label_name_and_list_values(tmp_path):
    by_label = _load(tmp_path, "{default: 1, Breast Cancer: 3}")
    by_name = _load(tmp_path, "{default: 1, breast_cancer: 3}", name="n")
    assert _reps(by_label) == _reps(by_name) == {"Breast Cancer": {0, 1, 2}, "iris": {0}}
    # the label wins over the dataset name; a list gives the seed values themselves
    both = _load(tmp_path, "{default: 1, breast_cancer: 3, Breast Cancer: [5, 7]}", name="b")
    assert _reps(both)["Breast Cancer"] == {5, 7}
    assert both.seeds_summary() == "{default: 1, Breast Cancer: [5, 7]}"


def test_profile_int_replaces_the_mapping_and_a_mapping_merges(tmp_path):
    profiles = ("profiles:\n  ci: {seeds: 1}\n  more: {seeds: {iris: 6}}\n"
                "  again: {seeds: {default: 3}}\n")
    full = _load(tmp_path, "{default: 2, iris: 4}", profiles)
    assert _reps(full)["iris"] == set(range(4))
    ci = _load(tmp_path, "{default: 2, iris: 4}", profiles, profile="ci")
    assert _reps(ci) == {"Breast Cancer": {0}, "iris": {0}} and ci.resolved["seeds"] == 1
    more = _load(tmp_path, "{default: 2, iris: 4}", profiles, profile="more")
    assert _reps(more) == {"Breast Cancer": {0, 1}, "iris": set(range(6))}
    again = _load(tmp_path, "{default: 2, iris: 4}", profiles, profile="again")
    assert _reps(again) == {"Breast Cancer": {0, 1, 2}, "iris": set(range(4))}
    # over a base count, a profile's mapping keeps that count as its default
    over_int = _load(tmp_path, "2", profiles, profile="more", name="i")
    assert _reps(over_int) == {"Breast Cancer": {0, 1}, "iris": set(range(6))}
    assert over_int.resolved["seeds"] == {"default": 2, "iris": 6}


def test_private_selection_runs_use_the_dataset_seeds(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(f"{DATASETS}models: [logreg]\nalgorithms:\n  - name: dpsgd\n    params: {{epochs: 1, lr: [0.5, 1.0]}}\n"
                    "    tuning: {mean_runs: 2}\nepsilons: [1.0]\nseeds: {default: 1, iris: 3}\n")
    exp = spec.load(path)
    assert _reps(exp) == {"Breast Cancer": {0}, "iris": {0, 1, 2}} and exp.n_cells() == len(exp.cells())


def test_swept_entries_share_their_seeds(tmp_path):
    path = tmp_path / "w.yaml"
    sweep = ("datasets: [{name: synthetic_population, label: pool, sweep: {n: [250, 1000]}}, iris]\n"
             "models: [logreg]\nalgorithms: [nonprivate]\n")
    path.write_text(sweep + "seeds: {default: 1, pool: 3}\n")
    assert _reps(spec.load(path)) == {"pool n=250": {0, 1, 2}, "pool n=1000": {0, 1, 2}, "iris": {0}}
    path.write_text(sweep + "seeds: {default: 1, pool n=250: 3}\n")
    with pytest.raises(SpecError, match=r"^seeds\.pool n=250: the entries of the sweep 'pool' need the same seeds"):
        spec.load(path)


@pytest.mark.parametrize("seeds,message", [
    ("{default: 2, iris: 0}", "seeds.iris: must be >= 1, got 0"),
    ("{default: 2, iris: many}", "seeds.iris: must be an integer >= 1 or a non-empty list of distinct integers >= 0, "
                                "got 'many'"),
    ("{default: 2, iris: true}", "seeds.iris: must be an integer >= 1 or a non-empty list of distinct integers >= 0, "
                                "got True"),
    ("{default: 0}", "seeds.default: must be >= 1, got 0"),
    ("{default: 2, Irs: 3}", "seeds: unknown dataset 'Irs' (datasets: Breast Cancer, iris; names: breast_cancer)"),
    ("{iris: 3}", "seeds: a mapping needs 'default'"),
    ("{default: 2, iris: [1, 1]}", "seeds.iris: must be a non-empty list of distinct integers >= 0, got [1, 1]"),
    ("0", "seeds: must be >= 1, got 0"),
])
def test_validation_errors_are_one_line_with_the_path(tmp_path, seeds, message):
    with pytest.raises(SpecError) as info:
        _load(tmp_path, seeds)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_profile_mapping_is_validated_too(tmp_path):
    with pytest.raises(SpecError, match=r"^seeds\.iris: must be >= 1, got -1"):
        _load(tmp_path, "2", "profiles:\n  ci: {seeds: {iris: -1}}\n", profile="ci")
