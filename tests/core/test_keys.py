"""dpbench.core.keys: stable digests and seeds, the delta expression, and the identity of a cell.

The expected digests and seeds are computed here with hashlib from the canonical JSON text written
out by hand (sorted keys, no spaces), so a change of the canonical form, of the hash or of the
truncation shows up as a failure instead of silently renaming every stored record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from dpbench.core.keys import CELL_SCHEMA, Cell, canonical_json, compile_delta, digest, evaluate_delta, seed_from


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ---- digests and seeds -----------------------------------------------------------------------------
def test_canonical_json_sorts_keys_without_spaces_and_writes_other_objects_as_text():
    assert canonical_json({"b": 1, "a": [1, 2.5, "x"]}) == '{"a":[1,2.5,"x"],"b":1}'
    assert canonical_json({"z": {"y": None, "x": True}}) == '{"z":{"x":true,"y":null}}'
    assert canonical_json({"path": Path("data/x.csv")}) == '{"path":"data/x.csv"}'


def test_digest_is_the_truncated_sha256_of_the_canonical_text():
    obj = {"b": 1, "a": [1, 2.5, "x"]}
    assert digest(obj) == _sha('{"a":[1,2.5,"x"],"b":1}')[:16]
    assert digest(obj, length=40) == _sha('{"a":[1,2.5,"x"],"b":1}')[:40]
    assert digest({"a": [1, 2.5, "x"], "b": 1}) == digest(obj)  # key order does not matter
    assert digest({"a": [1, 2.5, "x"], "b": 2}) != digest(obj)


def test_seed_from_is_the_first_64_bits_of_the_sha256_of_its_parts():
    assert seed_from("data", 0, 1, "iris", {}) == int(_sha('["data",0,1,"iris",{}]')[:16], 16)
    assert seed_from("algorithm", 3, None, 0.5) == int(_sha('["algorithm",3,null,0.5]')[:16], 16)
    assert 0 <= seed_from("x") < 2**64
    assert seed_from("a", "b") != seed_from("b", "a")  # the order of the parts counts


# ---- delta expressions ----------------------------------------------------------------------------
@pytest.mark.parametrize("expression, n, expected, uses_n", [
    ("1/n", 200, 1 / 200, True),
    ("1/n**1.1", 1000, 1 / 1000**1.1, True),
    ("1e-5", 10, 1e-5, False),
    (1e-5, 10, 1e-5, False),
    (0, 10, 0.0, False),
    ("log(n)/n**2", 50, math.log(50) / 50**2, True),
    ("sqrt(1/n) * exp(-2)", 400, math.sqrt(1 / 400) * math.exp(-2), True),
    ("-(-1)/(2*n + 1)", 10, 1 / 21, True),
    ("(1/2)**3 - 0.1", 7, 0.125 - 0.1, False),
])
def test_compile_delta_evaluates_arithmetic_of_n(expression, n, expected, uses_n):
    function = compile_delta(expression)
    assert function.uses_n is uses_n
    assert function.of(n) == pytest.approx(expected, rel=1e-15)
    assert evaluate_delta(expression, n) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("expression, reason", [
    ("__import__('os')", "__import__(...) is not allowed"),
    ("__import__('os').getcwd()", "this call(...) is not allowed"),
    ("sin(n)", "sin(...) is not allowed (only log, sqrt, exp of one argument)"),
    ("log(n, 2)", "log(...) is not allowed"),
    ("m/2", "unknown name 'm' (only n is allowed)"),
    ("n.real", "attribute is not allowed"),
    ("True", "constant is not allowed"),
    ("'1e-5'", "constant is not allowed"),
    ("n if n else 1", "ifexp is not allowed"),
    ("n % 7", "binop is not allowed"),
    ("[n]", "list is not allowed"),
])
def test_compile_delta_refuses_anything_else_naming_it(expression, reason):
    with pytest.raises(ValueError) as info:
        compile_delta(expression)
    assert reason in str(info.value) and repr(expression) in str(info.value)


def test_compile_delta_refuses_text_that_is_not_an_expression():
    with pytest.raises(ValueError, match="cannot read delta expression '1/'"):
        compile_delta("1/")


@pytest.mark.parametrize("expression, n, message", [
    ("1/(n - 100)", 100, "divides by zero at n = 100"),
    ("log(1 - n)", 5, "cannot evaluate delta expression 'log(1 - n)' at n = 5"),
    ("(-n)**0.5", 4, "is not a real number at n = 4"),
    ("10.0**1000", 4, "cannot evaluate delta expression '10.0**1000': "),
])
def test_evaluate_delta_says_why_an_expression_has_no_value(expression, n, message):
    with pytest.raises(ValueError) as info:
        evaluate_delta(expression, n)
    assert message in str(info.value)


# ---- the cell -----------------------------------------------------------------------------------
BASE = Cell(algorithm="dpsgd", params=(("lr", 0.5),), dataset="iris", dataset_options=(("n", 100),),
            model="logreg", model_options=(("l2", 1e-4),), epsilon=1.0, delta="1/n", rep=0, seed=7,
            draw=1, tuning=(("mean_runs", 4),), plugin_digest="abc", dataset_files="def")
#: a different value for every field of the cell's identity
CHANGED = {"algorithm": "dp_gd", "params": (("lr", 1.0),), "dataset": "adult", "dataset_options": (("n", 200),),
           "model": "mlp", "model_options": (("l2", 1e-3),), "epsilon": 2.0, "delta": 1e-5, "rep": 1, "seed": 8,
           "optimum": (("maxiter", 100), ("restarts", 2)), "draw": 2, "tuning": (("mean_runs", 8),),
           "plugin_digest": "abd", "dataset_files": "deg", "dataset_revision": 1, "backend": "jax"}
#: fields that name or locate the cell but are not part of its identity
NOT_IDENTITY = {"plugin": "/elsewhere/plugin.py:fit", "dataset_base": "/elsewhere", "label": "DP-SGD",
                "dataset_label": "Iris", "model_label": "LR", "dataset_panel": "panel",
                "dataset_path_keys": ("path",)}  # names which options are files (BASE has none): content_keyed


def test_every_field_is_either_identity_or_a_label():
    assert set(CHANGED) | set(NOT_IDENTITY) == {f.name for f in dataclasses.fields(Cell)}
    assert not set(CHANGED) & set(NOT_IDENTITY)


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_the_key_changes_with_each_identity_field(name):
    changed = dataclasses.replace(BASE, **{name: CHANGED[name]})
    assert changed.key != BASE.key and changed != BASE


@pytest.mark.parametrize("name", sorted(NOT_IDENTITY))
def test_the_key_ignores_labels_and_locations(name):
    changed = dataclasses.replace(BASE, **{name: NOT_IDENTITY[name]})
    assert changed.key == BASE.key and changed == BASE


def test_a_plain_cell_key_is_the_digest_of_its_identity_without_optional_fields():
    """No tuning, plugin or data files: those keys are absent from the identity, so adding the
    optional fields to the cell left the keys of every plain cell as they were."""
    cell = Cell(algorithm="nonprivate", params=(), dataset="iris", dataset_options=(), model="logreg",
                model_options=(), epsilon=None, delta="1/n", rep=2, seed=0, draw=5)
    text = ('{"algorithm":"nonprivate","dataset":"iris","dataset_options":{},"delta":"1/n","epsilon":null,'
            '"model":"logreg","model_options":{},"optimum":{"maxiter":500,"restarts":2},"params":{},"rep":2,'
            f'"schema":{CELL_SCHEMA},"seed":0}}')
    assert cell.key == _sha(text)[:16]


def test_a_data_set_revision_keys_the_cell_and_its_problem_only_when_nonzero():
    """Revision 0 adds nothing to the identity (the keys of data sets never revised stay as they
    were); a revision keys the cell and its L* problem but not the split, which it does not change."""
    plain = dataclasses.replace(BASE, dataset_revision=0)
    assert "dataset_revision" not in plain.identity()
    revised = dataclasses.replace(BASE, dataset_revision=1)
    assert revised.identity() == {**plain.identity(), "dataset_revision": 1}
    assert revised.key != plain.key and revised.problem_key != plain.problem_key
    assert revised.data_seed == plain.data_seed
    assert dataclasses.replace(BASE, dataset_revision=2).key != revised.key


def test_the_data_seed_is_shared_by_every_algorithm_and_model_of_a_repetition():
    expected = int(_sha('["data",7,0,"iris",{"n":100}]')[:16], 16) % 2**32
    assert BASE.data_seed == expected
    other = dataclasses.replace(BASE, algorithm="dp_gd", model="mlp", epsilon=4.0, params=())
    assert other.data_seed == expected and other.key != BASE.key
    assert dataclasses.replace(BASE, rep=1).data_seed != expected
    assert dataclasses.replace(BASE, dataset_options=(("n", 50),)).data_seed != expected


def test_a_file_named_by_an_option_is_identified_by_its_content_not_its_path():
    named = dataclasses.replace(BASE, dataset="csv", dataset_options=(("label", "y"), ("path", "data.csv")),
                                dataset_path_keys=("path",))
    moved = dataclasses.replace(named, dataset_options=(("label", "y"), ("path", "/abs/data.csv")))
    assert moved.key == named.key and moved.data_seed == named.data_seed and moved.problem_key == named.problem_key
    assert dataclasses.replace(moved, dataset_files="other").key != named.key  # other content: another cell
    unhashed = dataclasses.replace(named, dataset_files=None)  # no digest (file absent): the path is the identity
    assert dataclasses.replace(unhashed, dataset_options=moved.dataset_options).key != unhashed.key
    assert dataclasses.replace(BASE, model="mlp").problem_key != BASE.problem_key
    assert dataclasses.replace(BASE, algorithm="dp_gd").problem_key == BASE.problem_key


def test_the_algorithm_stream_ignores_hyperparameters_unless_a_private_search_draws_them():
    plain = dataclasses.replace(BASE, draw=None, tuning=None)
    other_lr = dataclasses.replace(plain, params=(("lr", 2.0),))
    seed = int(_sha('["algorithm",7,0,"dpsgd","iris",{"n":100},"logreg",{"l2":0.0001},1.0]')[:16], 16)
    expected = np.random.default_rng(np.random.SeedSequence(seed)).random(4)
    assert np.array_equal(plain.algorithm_rng().random(4), expected)
    assert np.array_equal(other_lr.algorithm_rng().random(4), expected)  # common random numbers
    assert not np.array_equal(dataclasses.replace(plain, epsilon=2.0).algorithm_rng().random(4), expected)
    drawn = [dataclasses.replace(BASE, draw=d, params=p).algorithm_rng().random(4)
             for d, p in ((1, (("lr", 0.5),)), (2, (("lr", 0.5),)), (1, (("lr", 2.0),)))]
    assert not any(np.array_equal(a, b) for i, a in enumerate(drawn) for b in drawn[i + 1:])
    assert not np.array_equal(BASE.score_rng().random(4), BASE.algorithm_rng().random(4))
