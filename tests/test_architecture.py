"""The layer contracts of pyproject.toml ([tool.importlinter]): kept by the package, and enforced.

`lint-imports` (import-linter) reads the import graph with grimp, imports inside functions
included. The package must keep both contracts: layers import only downward, and no two modules
of one subpackage import each other, directly or through others. A copy of the package with an
upward import, and another with a cycle, must break the contract concerned, so a checker that
reads the wrong tree or a contract that checks nothing fails here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = {c["id"]: c["name"] for c in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
             ["contracts"]}

pytestmark = pytest.mark.skipif(not LINT_IMPORTS.is_file(),
                                reason=f"lint-imports not found at {LINT_IMPORTS}: pip install -e '.[test]'")


def _lint(root: Path, config: Path) -> subprocess.CompletedProcess:
    """lint-imports on the package under `root` (first on the path, before any installed copy)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)], cwd=root, env=env,
                          capture_output=True, text=True)


def test_the_package_keeps_its_layer_contracts():
    done = _lint(REPO, REPO / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(CONTRACTS) == {"layers", "acyclic"}
    for name in CONTRACTS.values():
        assert f"{name} KEPT" in done.stdout, done.stdout
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in done.stdout


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """A copy of dpbench and pyproject.toml under tmp_path (no byte code)."""
    shutil.copytree(REPO / "dpbench", tmp_path / "dpbench", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _append(path: Path, code: str) -> int:
    """Append `code` to `path` on a line of its own; the line number of its first line."""
    text = path.read_text()
    text += "" if text.endswith("\n") else "\n"
    line = text.count("\n") + 1
    path.write_text(text + code)
    return line


def test_an_upward_import_inside_a_function_breaks_the_layers(package_copy):
    line = _append(package_copy / "dpbench" / "core" / "keys.py",
                   "def _planted():\n    from dpbench.cli import main\n    return main\n") + 1
    done = _lint(package_copy, package_copy / "pyproject.toml")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{CONTRACTS['layers']} BROKEN" in done.stdout, done.stdout
    assert "dpbench.core is not allowed to import dpbench.cli" in done.stdout
    assert f"dpbench.core.keys -> dpbench.cli.main (l.{line})" in done.stdout, done.stdout  # the copy was read


def test_a_cycle_between_modules_of_a_subpackage_breaks_acyclicity(package_copy):
    core = package_copy / "dpbench" / "core"
    _append(core / "errors.py", "\n\ndef _planted():\n    from dpbench.core import ledger\n    return ledger\n")
    _append(core / "ledger.py", "\nfrom dpbench.core import errors  # noqa: E402\n")
    done = _lint(package_copy, package_copy / "pyproject.toml")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{CONTRACTS['acyclic']} BROKEN" in done.stdout, done.stdout
    assert f"{CONTRACTS['layers']} KEPT" in done.stdout  # a cycle within one layer breaks only acyclicity
    assert "No cycles are allowed in dpbench.core." in done.stdout, done.stdout
