"""Plugins (dpbench/plugins.py): references, loading, fingerprints and errors; the example plugin
examples/my_algorithm/my_method.py (DP-Adam built from DP-SGD's public blocks) and its experiment."""

from __future__ import annotations

import hashlib
import itertools
import os
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dpbench.algorithms import PrivacyTarget
from dpbench.algorithms.base import REGISTRY, AlgorithmInfo
from dpbench.core.errors import DpbenchError
from dpbench.core.ledger import Adjacency
from dpbench.core.registry import BUILT_IN
from dpbench.run import plugins
from tests.conftest import REPO
from tests.problems import logistic_problem

EXAMPLE = REPO / "examples" / "my_algorithm"
EXAMPLE_REF = "examples/my_algorithm/my_method.py:fit_dpadam"

_names = itertools.count()


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch):
    """Each test's plugins are forgotten after it: later test modules see the built-ins only
    (`dpbench list`, docs/reference/components.md and the registry-wide checks enumerate the registry)."""
    monkeypatch.setattr(REGISTRY, "_entries", dict(REGISTRY._entries))
    monkeypatch.setattr(plugins, "_IMPORTED", dict(plugins._IMPORTED))


def unique(prefix: str = "plugin_algo") -> str:
    """A name no other test registered (the registry lives as long as the test process)."""
    return f"{prefix}_{os.getpid()}_{next(_names)}"


def plugin_source(name: str, steps: int = 3) -> str:
    return textwrap.dedent(f'''\
        from typing import Annotated

        import numpy as np

        from dpbench.algorithms import Fit, Param, algorithm, ledger


        @algorithm("{name}", title="a test plugin", citation="none", private=False)
        def fit(problem, privacy, rng, *,
                steps: Annotated[int, Param("how many steps", minimum=1)] = {steps},
                lr: Annotated[float, Param("step size", minimum=0, exclusive_minimum=True)] = 0.5):
            theta = np.zeros(problem.model.n_params)
            return Fit(theta=theta, privacy=ledger(private=False, mechanism="none", claim="none"))


        helper = 42
        ''')


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---- resolve ---------------------------------------------------------------------------------
def test_resolve_file_form_relative_to_base_cwd_and_home(tmp_path, monkeypatch):
    path = write(tmp_path / "sub" / "mine.py", "x = 1\n")
    canonical = f"{os.path.realpath(path)}:fit"
    assert plugins.resolve("sub/mine.py:fit", base=tmp_path) == canonical
    assert plugins.resolve("mine.py:fit", base=str(tmp_path / "sub")) == canonical
    assert plugins.resolve(f"{path}:fit", base="/elsewhere") == canonical  # absolute: base ignored
    assert plugins.resolve(canonical) == canonical  # canonical is a fixed point
    monkeypatch.chdir(tmp_path / "sub")
    assert plugins.resolve("mine.py:fit") == canonical
    assert plugins.resolve("./mine.py:fit") == canonical
    monkeypatch.setenv("HOME", str(tmp_path))
    assert plugins.resolve("~/sub/mine.py:fit") == canonical
    assert plugins.resolve("mine.py:Class.method") == f"{os.path.realpath(path)}:Class.method"


def test_resolve_module_form_is_checked_and_unchanged():
    assert plugins.resolve("my_pkg.my_method:fit_dpadam") == "my_pkg.my_method:fit_dpadam"
    assert plugins.resolve("toplevel:fit", base="/anywhere") == "toplevel:fit"


@pytest.mark.parametrize("reference, says", [
    ("my_method.py", "no ':object'"),
    ("my_pkg.my_method", "no ':object'"),
    ("my_method.py:", "empty object"),
    (":fit", "empty file or module"),
    ("my_method.py:1fit", "not a Python name"),
    ("my_method.py:fit-it", "not a Python name"),
    ("my pkg.mod:fit", "neither a .py file nor a dotted module name"),
    ("pkg..mod:fit", "neither a .py file nor a dotted module name"),
    ("folder/module:fit", "must be a .py file"),
])
def test_resolve_refuses_malformed_references(reference, says):
    with pytest.raises(plugins.PluginError, match=says) as err:
        plugins.resolve(reference)
    assert "\n" not in str(err.value) and isinstance(err.value, DpbenchError)


def test_resolve_names_the_path_of_a_missing_file(tmp_path):
    with pytest.raises(plugins.PluginError) as err:
        plugins.resolve("nope/mine.py:fit", base=tmp_path)
    message = str(err.value)
    assert str(tmp_path / "nope" / "mine.py") in message and "not found" in message and "\n" not in message


# ---- load ------------------------------------------------------------------------------------
def test_load_registers_the_plugin_with_its_source_and_declared_params(tmp_path):
    name = unique()
    path = write(tmp_path / "mine.py", plugin_source(name))
    info = plugins.load("mine.py:fit", base=tmp_path)
    canonical = plugins.resolve("mine.py:fit", base=tmp_path)
    assert isinstance(info, AlgorithmInfo) and info.name == name
    assert info.source == canonical == f"{os.path.realpath(path)}:fit"
    assert REGISTRY[name] is info
    assert [(p.name, p.kind, p.default) for p in info.params] == [("steps", int, 3), ("lr", float, 0.5)]
    assert info.param("steps").minimum == 1
    assert plugins.load(canonical) is info  # loaded once: the same object, not imported again
    assert plugins.load("mine.py:fit", base=tmp_path) is info
    assert not (tmp_path / "__pycache__").exists()  # nothing written beside the user's file


def test_an_edited_plugin_changes_its_fingerprint_and_is_imported_anew(tmp_path):
    name = unique()
    path = write(tmp_path / "mine.py", plugin_source(name, steps=3))
    reference = f"{path}:fit"
    first = plugins.load(reference)
    digest = plugins.fingerprint(reference)
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()[:16] and len(digest) == 16
    assert plugins.fingerprint(reference) == digest  # stable while the file is unchanged
    path.write_text(plugin_source(name, steps=7))  # same size, same second: content decides
    assert plugins.fingerprint(reference) != digest
    second = plugins.load(reference)
    assert second is not first and second.defaults()["steps"] == 7
    assert REGISTRY[name] is second and second.source == first.source  # same source: re-registration allowed
    assert plugins.load(reference) is second


def test_two_algorithms_of_one_file_are_loaded_from_one_import(tmp_path):
    first, second = unique(), unique()
    text = plugin_source(first) + plugin_source(second).replace("def fit(", "def fit_two(").split("\n\n\n", 1)[1]
    path = write(tmp_path / "two.py", text)
    one = plugins.load(f"{path}:fit")
    two = plugins.load(f"{path}:fit_two")
    assert (one.name, two.name) == (first, second)
    assert one.source == two.source == plugins.resolve(f"{path}:fit")  # the reference the file was loaded under
    assert REGISTRY[first] is one and REGISTRY[second] is two


def test_module_form_loads_by_import_and_fingerprints_without_importing(tmp_path, monkeypatch):
    package = unique("dpbench_test_pkg")
    name = unique()
    write(tmp_path / package / "__init__.py", "")
    module_file = write(tmp_path / package / "method.py", plugin_source(name))
    monkeypatch.syspath_prepend(str(tmp_path))
    reference = f"{package}.method:fit"
    digest = plugins.fingerprint(reference)
    assert digest == hashlib.sha256(module_file.read_bytes()).hexdigest()[:16]
    assert f"{package}.method" not in sys.modules  # found with find_spec, not imported
    info = plugins.load(reference)
    assert info.name == name and info.source == reference and REGISTRY[name] is info
    with pytest.raises(plugins.PluginError, match="not found"):
        plugins.fingerprint(f"{package}.missing:fit")
    with pytest.raises(plugins.PluginError, match="no_such_package_xyz.method not found"):
        plugins.load("no_such_package_xyz.method:fit")


def one_line_error(reference: str, base=None) -> plugins.PluginError:
    with pytest.raises(plugins.PluginError) as err:
        plugins.load(reference, base)
    assert "\n" not in str(err.value)
    return err.value


def test_a_syntax_error_names_the_file_and_line(tmp_path):
    path = write(tmp_path / "broken.py", "import numpy\n\ndef fit(:\n    pass\n")
    error = one_line_error("broken.py:fit", tmp_path)
    assert f"{os.path.realpath(path)}, line 3" in str(error) and "SyntaxError" in str(error)
    assert isinstance(error.__cause__, SyntaxError)


def test_an_error_while_importing_names_the_file_and_line(tmp_path):
    path = write(tmp_path / "raises.py", "x = 1\nraise RuntimeError('no GPU here')\n")
    error = one_line_error(f"{path}:fit")
    assert f"{os.path.realpath(path)}, line 2: RuntimeError: no GPU here" in str(error)
    assert isinstance(error.__cause__, RuntimeError)
    path = write(tmp_path / "needs.py", "import not_an_installed_module_xyz\n")
    error = one_line_error(f"{path}:fit")
    assert "line 1" in str(error) and "not_an_installed_module_xyz" in str(error)
    assert isinstance(error.__cause__, ImportError)


def test_a_missing_object_or_a_non_component_is_refused(tmp_path):
    name = unique()
    path = write(tmp_path / "mine.py", plugin_source(name))
    missing = one_line_error(f"{path}:fit_other")
    assert "has no object 'fit_other'" in str(missing) and os.path.realpath(path) in str(missing)
    assert "it declares fit" in str(missing)  # the components the file does declare
    for obj in ("helper", "np", "Annotated"):
        error = one_line_error(f"{path}:{obj}")
        assert "is not a dpbench component" in str(error) and "@dpbench.algorithms.algorithm" in str(error)
        assert os.path.realpath(path) in str(error)
    # a built-in imported into the plugin is not the plugin's own component
    write(tmp_path / "reexport.py", "from dpbench.algorithms.dpsgd import fit_dpsgd\n")
    error = one_line_error("reexport.py:fit_dpsgd", tmp_path)
    assert "'dpsgd' declared by built-in" in str(error)


def test_a_plugin_cannot_take_a_built_in_name(tmp_path):
    built_in = REGISTRY["dpsgd"]
    path = write(tmp_path / "impostor.py", plugin_source("dpsgd"))
    error = one_line_error(f"{path}:fit")
    assert "'dpsgd' registered twice" in str(error) and f"{os.path.realpath(path)}, line" in str(error)
    assert REGISTRY["dpsgd"] is built_in and built_in.source == BUILT_IN


# ---- the example plugin ----------------------------------------------------------------------
@pytest.fixture
def example():
    return plugins.load(EXAMPLE_REF, base=REPO)


def kingma_ba(gradients, beta1, beta2, eps):
    """Algorithm 1 of Kingma & Ba (2015) written out, independently of the plugin: the update
    directions m_hat_t / (sqrt(v_hat_t) + eps) of a sequence of gradients g_1..g_T."""
    m = v = np.zeros_like(gradients[0])
    out = []
    for t, g in enumerate(gradients, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * np.square(g)
        out.append((m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps))
    return out


def test_example_adam_transform_is_kingma_and_ba_algorithm_1(example):
    adam = sys.modules[example.fit.__module__].adam
    rng = np.random.default_rng(0)
    gradients = list(rng.normal(size=(30, 5)) * 10.0 ** rng.uniform(-3, 3, size=(30, 1)))
    for beta1, beta2, eps in [(0.9, 0.999, 1e-8), (0.5, 0.9, 1e-3), (0.0, 0.0, 1e-6)]:
        direction = adam(beta1, beta2, eps)
        got = [direction(g) for g in gradients]
        assert all(np.allclose(a, b, rtol=1e-12, atol=0) for a, b in zip(got, kingma_ba(gradients, beta1, beta2, eps)))
    # with bias correction a constant gradient g gives g / (|g| + eps) from the first step on
    direction = adam(0.9, 0.999, 1e-8)
    g = np.array([3.0, -0.2, 1e-3])
    for _ in range(5):
        assert np.allclose(direction(g), g / (np.abs(g) + 1e-8), rtol=1e-12, atol=0)
    # each call of adam(...) is a fresh state: a second fit does not inherit the first one's moments
    fresh = adam(0.9, 0.999, 1e-8)
    assert np.allclose(fresh(-g), -g / (np.abs(g) + 1e-8), rtol=1e-12, atol=0)


def test_example_fit_keeps_its_claim_and_writes_the_dpsgd_ledger_fields(example):
    from dpbench.privacy.tuning import candidate_event

    assert example.name == "dpadam" and example.private and example.updates
    assert {p.name: p.role for p in example.params} == {
        "epochs": "", "batch_size": "", "lr": "", "clip_norm": "clip_norm", "beta1": "", "beta2": "", "eps_adam": ""}
    problem = logistic_problem(n=1000, d=5, seed=1)
    target = PrivacyTarget(epsilon=1.0, delta=1e-5)
    fit = example.fit(problem, target, np.random.default_rng(0), epochs=2.0, batch_size=50.0, lr=0.05, clip_norm=0.5)
    ledger = fit.privacy
    assert ledger.private and ledger.claim == "valid"
    assert set(ledger.epsilon_spent) == {"rdp", "pld"} and min(ledger.epsilon_spent.values()) <= 1.0
    assert ledger.epsilon_spent["rdp"] > 0.99  # calibrated to the target, not over-noised
    assert ledger.adjacency is Adjacency.ADD_REMOVE and ledger.sensitivity == 0.5
    assert ledger["sampling"] == {"kind": "poisson", "rate": 0.05, "expected_batch": 50.0}
    assert ledger["steps"] == 40 and ledger["noise_multiplier"] > 0
    assert ledger["privatiser"] == "noisy_sgd" and example.privatised and example.mechanism_owner == "dpbench"
    assert "dpbench's noisy SGD" in ledger.mechanism and "post-processing" in ledger.mechanism
    assert candidate_event(ledger.as_dict()) is not None  # private selection composes it like DP-SGD
    assert problem.model.loss(fit.theta, problem.X, problem.y) < np.log(2)  # it learnt something
    again = example.fit(problem, target, np.random.default_rng(0), epochs=2.0, batch_size=50.0, lr=0.05,
                        clip_norm=0.5)
    assert np.array_equal(again.theta, fit.theta)  # all randomness from the given generator


@pytest.mark.parametrize("n, epsilon, delta, epochs, batch_size, clip_norm", [
    (1000, 1.0, 1e-5, 2.0, 50.0, 0.5),
    (361, 4.0, 1e-6, 3.0, 32.0, 1.0),
    (200, 0.5, 1e-5, 5.0, 500.0, 2.0),  # B > n: full batch, q = 1, T = 5
])
def test_example_reports_its_ledger_s_steps_and_its_ledger_is_dpsgd_s(example, n, epsilon, delta, epochs,
                                                                         batch_size, clip_norm):
    """Every noisy step is reported (releases.observing) as the ledger says, the ledger is DP-SGD's
    for the same (epsilon, delta, q, T), and the iterates are Adam's moves on the released noisy
    gradients alone: post-processing of exactly what was reported."""
    from dpbench.algorithms import get, noisy_sgd_plan
    from dpbench.algorithms.releases import observing

    problem = logistic_problem(n=n, d=4, seed=2)
    target = PrivacyTarget(epsilon=epsilon, delta=delta)
    lr, betas, eps_adam = 0.05, (0.8, 0.99), 1e-6
    seen = []
    with observing(lambda r: seen.append((r.step, r.theta.copy(), r.released.copy(), r.noise_std, r.rate,
                                          r.clip_norm, r.weight, r.kind))):
        fit = example.fit(problem, target, np.random.default_rng(3), epochs=epochs, batch_size=batch_size, lr=lr,
                          clip_norm=clip_norm, beta1=betas[0], beta2=betas[1], eps_adam=eps_adam)
    ledger = fit.privacy

    # DP-SGD's ledger for the same (epsilon, delta, q, T): its plan's, and the built-in dpsgd's
    plan = noisy_sgd_plan(n, target, epochs=epochs, batch_size=batch_size, clip_norm=clip_norm, calibration="rdp",
                          paper_c=1.0)
    dpsgd = get("dpsgd").fit(problem, target, np.random.default_rng(3), epochs=epochs, batch_size=batch_size,
                             lr=0.5, clip_norm=clip_norm).privacy
    B = min(batch_size, float(n))
    assert ledger["steps"] == plan.steps == dpsgd["steps"] == round(epochs * n / B)
    assert ledger["sampling"]["rate"] == plan.rate == B / n
    for reference in (plan.ledger, dpsgd):
        ours, theirs = ledger.as_dict(), reference.as_dict()
        assert ours.pop("mechanism") != theirs.pop("mechanism")  # says the plugin's update; every number is DP-SGD's
        assert ours.pop("privatiser") == "noisy_sgd"  # the mechanism that ran it
        assert ours == theirs

    # exactly the ledger's steps, each declared as DP-SGD's step: noise z C on the sum, rate q, clip C
    assert [s[0] for s in seen] == list(range(1, ledger["steps"] + 1))
    assert {s[3:] for s in seen} == {(ledger["noise_multiplier"] * clip_norm, plan.rate, clip_norm, 1.0,
                                      "gradient_sum")}

    # the iterates: theta_{t+1} = theta_t - lr * Adam(released_t / B + l2 gradient), from the releases alone
    directions = kingma_ba([released / B + problem.model.reg_grad(theta) for _, theta, released, *_ in seen],
                           *betas, eps_adam)
    thetas = [theta for _, theta, *_ in seen] + [fit.theta]
    for t, direction in enumerate(directions):
        assert np.allclose(thetas[t + 1], thetas[t] - lr * direction, rtol=1e-9, atol=1e-12)
def test_example_data_is_what_make_data_writes(tmp_path):
    import runpy

    make_data = runpy.run_path(str(EXAMPLE / "make_data.py"))  # not as __main__: nothing written yet
    make_data["main"](tmp_path / "data.csv")
    assert (tmp_path / "data.csv").read_bytes() == (EXAMPLE / "data.csv").read_bytes()


def test_the_plugin_docs_show_the_example_as_shipped():
    """docs/contributing.md shows my_method.py as it is (its code after the docstring, verbatim) and
    the spec's algorithms, data set and audit as experiment.yaml has them; README names the same plugin."""
    import re

    import yaml

    text = (REPO / "docs" / "contributing.md").read_text()
    section = text[text.index("## Benchmark your own algorithm"):text.index("## Development")]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.DOTALL)
    shipped = (EXAMPLE / "my_method.py").read_text()
    python = [code for lang, code in blocks if lang == "python"]
    assert len(python) == 1 and python[0] in shipped
    assert python[0].startswith("from collections.abc import") and shipped.endswith(python[0])  # all the code
    for shown in ("updates=True", 'role="clip_norm"', "transform=adam(", "data.noisy_sgd(", "@privatised_algorithm("):
        assert shown in python[0]
    (snippet,) = [yaml.safe_load(code) for lang, code in blocks if lang == "yaml"]
    spec = yaml.safe_load((EXAMPLE / "experiment.yaml").read_text())
    assert snippet["datasets"] == spec["datasets"] and snippet["algorithms"] == spec["algorithms"]
    assert snippet["audits"]["algorithms"] == spec["audits"]["algorithms"]
    commands = "".join(code for lang, code in blocks if lang == "bash")
    assert EXAMPLE_REF in commands and "dpbench verify " + EXAMPLE_REF in commands
    assert "dpbench verify " + EXAMPLE_REF in (REPO / "README.md").read_text()


# ---- end to end: the example through the CLI (needs the spec's `plugin:` and the csv data set) ----
def test_example_experiment_end_to_end(tmp_path, monkeypatch, data_dir):
    """run --profile ci, list --plugin, check --update, and an audit of the plugin (`make check` recomputes
    the ci profile and compares it with the committed reference)."""
    from click.testing import CliRunner

    from dpbench.cli.main import main

    monkeypatch.chdir(REPO)
    runner = CliRunner()
    spec = "examples/my_algorithm/experiment.yaml"
    results = str(tmp_path / "results")
    common = ["--profile", "ci", "--results", results, "--backend", "sequential", "--no-progress"]

    listed = runner.invoke(main, ["list", "algorithms", "--plugin", EXAMPLE_REF])
    assert listed.exit_code == 0, listed.output
    assert "dpadam" in listed.output and "plugin " + str(EXAMPLE / "my_method.py") in listed.output
    assert "reports every noisy step: threat all_updates" in listed.output
    assert "clip_norm (float, default 1.0, > 0, role clip_norm)" in listed.output

    ran = runner.invoke(main, ["run", spec, *common])
    assert ran.exit_code == 0, ran.output
    curves = (tmp_path / "results" / "my_algorithm" / "profiles" / "ci" / "curves.csv").read_text()
    assert "DP-Adam" in curves and "DP-SGD" in curves
    audits = (tmp_path / "results" / "my_algorithm" / "profiles" / "ci" / "audits.csv").read_text()
    assert audits.count("all_updates") == 2 and "gradient_canary" in audits  # the spec's audit sees every step

    updated = runner.invoke(main, ["check", spec, *common, "--update", "--reuse", "--no-envelope"])
    assert updated.exit_code == 0, updated.output
    reference = tmp_path / "results" / "my_algorithm" / "reference-ci.csv"
    assert "DP-Adam" in reference.read_text()  # a recomputed check against it: make check, on the committed one

    audited = runner.invoke(main, ["audit", "--algorithm", EXAMPLE_REF, "--dataset", "breast_cancer",
                                   "--eps", "1", "--trials", "60", "--param", "epochs=1", "--param", "batch_size=32",
                                   "--threat", "all_updates", "--canary", "gradient_canary",
                                   "--data", str(data_dir), "--results", results, "--backend", "sequential", "--no-progress"])
    assert audited.exit_code == 0, audited.output
    # the gradient canary's clip norm 0.1 reaches the plugin through its clip_norm role
    assert "audit: dpadam [batch_size=32, clip_norm=0.1, epochs=1]" in audited.output, audited.output
    assert "threat all_updates" in audited.output


def test_provenance_names_the_file_its_whole_sha256_and_a_module_s_version(tmp_path, monkeypatch):
    from importlib import metadata

    path = tmp_path / "prov_plugin.py"
    path.write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    found = plugins.provenance(f"{path}:fit")
    assert found == {"reference": "prov_plugin.py:fit", "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                     "version": None}
    assert plugins.fingerprint(f"{path}:fit") == found["sha256"][:16]  # the key's digest is its prefix
    module = plugins.provenance("dpbench.algorithms.dpsgd:fit_dpsgd")  # module form: the distribution's version
    assert module["reference"] == "dpbench.algorithms.dpsgd:fit_dpsgd"
    assert module["version"] == metadata.version("dpbench")


def test_the_records_runs_table_and_manifest_of_a_plugin_name_where_its_code_came_from(tmp_path, data_dir):
    import json

    import pandas as pd
    from click.testing import CliRunner

    from dpbench.cli.main import main

    plugin = REPO / "examples" / "my_algorithm" / "my_method.py"
    spec = tmp_path / "prov.yaml"
    spec.write_text(f"""
name: prov
seed: 0
seeds: 1
datasets: [breast_cancer]
models: [logreg]
algorithms:
  - {{plugin: {plugin}:fit_dpadam, params: {{epochs: 1}}}}
  - {{name: dpsgd, params: {{epochs: 1}}}}
epsilons: [1.0]
delta: 1.0e-5
metrics: [accuracy]
""")
    results = tmp_path / "results"
    out = CliRunner().invoke(main, ["run", str(spec), "--results", str(results), "--data", str(data_dir),
                                    "--no-progress"])
    assert out.exit_code == 0, out.output
    expected = plugins.provenance(f"{plugin}:fit_dpadam")
    records = [json.loads(p.read_text()) for p in (results / "prov" / "cells").glob("*.json")]
    assert sorted(str(r.get("plugin")) for r in records) == sorted([str(expected), "None"])
    runs = pd.read_csv(results / "prov" / "runs.csv.gz")
    assert {json.loads(p)["sha256"] for p in runs["plugin"].dropna()} == {expected["sha256"]}
    assert json.loads((results / "prov" / "manifest.json").read_text())["plugins"] == [expected]
