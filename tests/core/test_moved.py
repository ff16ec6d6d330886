"""Old module names (`dpbench.ledger`, ...) import the module at its layered place, with a
DeprecationWarning that names it (dpbench.core.moved)."""

import importlib
import importlib.util
import subprocess
import sys
import warnings

import pytest

from dpbench.core.moved import MOVED


def test_an_old_name_is_the_new_module_and_says_where_it_went():
    """One fresh interpreter for all of MOVED: each old name gives the module at its new place
    (the same object, its own __spec__) and a DeprecationWarning naming that place."""
    code = (
        "import importlib, sys, warnings\n"
        "from dpbench.core.moved import MOVED\n"
        "for old, new in sorted(MOVED.items()):\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        module = importlib.import_module(old)\n"
        "    target = importlib.import_module(new)\n"
        "    assert module is target, (old, module, target)\n"
        "    assert target.__spec__.name == target.__name__ == new, (new, target.__spec__)\n"
        "    said = [str(w.message) for w in caught if w.category is DeprecationWarning]\n"
        "    print(old, '|'.join(said))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert sorted(said) == sorted(MOVED)
    for old, new in MOVED.items():
        assert f"{old} moved to {new}" in said[old], (old, said[old])


def test_a_plugin_written_against_the_old_names_still_imports_what_it_used():
    with pytest.warns(DeprecationWarning, match="dpbench.ledger moved to dpbench.core.ledger"):
        sys.modules.pop("dpbench.ledger", None)
        from dpbench.ledger import Adjacency
    from dpbench.core.ledger import Adjacency as Current

    assert Adjacency is Current


def test_names_that_never_existed_are_not_answered():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("dpbench.no_such_module")
    assert all(importlib.util.find_spec(new) is not None for new in MOVED.values())


def test_the_old_names_of_modules_that_are_now_spread_or_packages_are_found_where_they_went():
    code = (
        "import warnings\n"
        "warnings.simplefilter('error')\n"
        "try:\n"
        "    from dpbench.audit import run_audit\n"
        "except DeprecationWarning as w:\n"
        "    print(w)\n"
        "warnings.simplefilter('ignore')\n"
        "from dpbench.audit import run_audit, one_run\n"
        "from dpbench.audit.multi_run import run_audit as current\n"
        "import dpbench.audit.one_run as sub\n"
        "assert run_audit is current and one_run is sub\n"
        "from dpbench.plots import claim_status, audit_figure\n"
        "from dpbench.figures.style import claim_status as style_status\n"
        "assert claim_status is style_status\n"
        "from dpbench.pipeline import render, run_experiments, output_folder\n"
        "from dpbench.experiment.layout import output_folder as folder\n"
        "assert output_folder is folder\n"
        "from dpbench.spec import load\n"
        "import dpbench.spec.experiment as spec\n"
        "assert load is spec.load\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "dpbench.audit.run_audit moved to dpbench.audit.multi_run.run_audit" in done.stdout
    with warnings.catch_warnings(), pytest.raises(ImportError):
        warnings.simplefilter("ignore", DeprecationWarning)
        exec("from dpbench.plots import no_such_name", {})
