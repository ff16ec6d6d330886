"""The options several verbs share are the same option on each: one name, one type, one wording.

A verb that reads a results folder (--results) does work a person waits for (cells, trials, pages),
so it takes --no-progress as well; --data is always a folder; the help of --no-progress is the one
of dpbench.cli.options.progress_option everywhere.
"""

from __future__ import annotations

import click

from dpbench.cli.main import main


def _verbs(group: click.Group, prefix: str = ""):
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _verbs(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def _options(command: click.Command) -> dict[str, click.Option]:
    return {p.opts[0]: p for p in command.params if isinstance(p, click.Option)}


VERBS = dict(_verbs(main))


def test_every_verb_is_walked():
    # the walk reaches the nested verbs too (data fetch, privacy calibrate), so the checks below see them
    assert {"run", "check", "plot", "claims", "decide", "report", "audit", "verify", "data fetch"} <= set(VERBS)


def test_a_verb_with_a_results_folder_takes_no_progress():
    with_results = [name for name, cmd in VERBS.items() if "--results" in _options(cmd)]
    assert len(with_results) >= 8, with_results
    lacking = [name for name in with_results if "--no-progress" not in _options(VERBS[name])]
    assert not lacking, f"verbs with --results but no --no-progress: {lacking}"


def test_no_progress_has_one_wording():
    helps = {name: _options(cmd)["--no-progress"].help for name, cmd in VERBS.items() if "--no-progress" in _options(cmd)}
    assert len(helps) >= 9, helps
    assert len(set(helps.values())) == 1, helps
    flags = [name for name, cmd in VERBS.items() if "--no-progress" in _options(cmd) and
             not _options(cmd)["--no-progress"].is_flag]
    assert not flags


def test_results_and_data_are_folders_named_alike():
    for name, cmd in VERBS.items():
        options = _options(cmd)
        if "--results" in options:
            assert options["--results"].metavar == "DIRECTORY", name
        if "--data" in options:
            data = options["--data"]
            assert data.name == "data_dir", name
            assert isinstance(data.type, click.Path) and not data.type.file_okay, name


def test_plot_claims_and_report_pass_no_progress_on(tmp_path, monkeypatch):
    # the flag reaches the code that draws the bars: plot's render, claims' verdicts, report's build
    from click.testing import CliRunner

    from dpbench.experiment import render, verdicts
    from dpbench.report import site

    seen = {}

    def fake_render(exp, **kwargs):
        seen["plot"] = kwargs["progress"]
        raise click.ClickException("stop")

    def fake_verdicts(exp, results, data_dir=None, progress=True):
        seen["claims"] = progress
        raise click.ClickException("stop")

    def fake_build(experiments, **kwargs):
        seen["report"] = kwargs["progress"]
        raise click.ClickException("stop")

    monkeypatch.setattr(render, "render", fake_render)
    monkeypatch.setattr(site, "build", fake_build)
    monkeypatch.setattr(verdicts, "claim_verdicts", fake_verdicts)
    runner = CliRunner()
    for verb in ("plot", "claims", "report"):
        runner.invoke(main, [verb, "experiments/quickstart.yaml", "--results", str(tmp_path), "--no-progress"])
    assert seen == {"plot": False, "claims": False, "report": False}
