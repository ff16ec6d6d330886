"""What an audit runs (`AuditSetup`) and its validation (`check_setup`), without running anything.

The spec (dpbench.spec.audits) builds setups from an experiment's `audits:` block and the CLI from its
options; both validate through `check_setup`, which checks names and values against the
registries' declarations (algorithm hyperparameters, data set and model options, canary recipes),
the same declarations a spec's grid is checked against, and the other fields against the
validation vocabulary (dpbench.core.validation) and dpbench.privacy.checks (delta: `checks.DELTA`,
as a spec's delta). Running audits is dpbench.audit.multi_run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping

from dpbench.audit.canaries import CANARIES, Recipe
from dpbench.core.errors import DpbenchError
from dpbench.core.keys import content_keyed, digest
from dpbench.core.validation import InvalidValue, StrOptions, validate
from dpbench.privacy import checks
from dpbench.privacy.audit_bounds import THRESHOLD_RULES

AUDIT_SCHEMA = 1  # bump when the meaning of a stored chunk changes
#: what the adversary sees (docs/audits.md): the trained model only, or every noisy step
THREATS = ("final_model", "all_updates")


class AuditError(DpbenchError):
    """An audit is mis-specified (unknown algorithm, dataset, canary, parameter) or a chunk failed."""


def _user_code_and_data(setup: "AuditSetup") -> dict:
    """The parts of an identity that only plugins, user files, revised data sets and the all-updates
    threat have (absent otherwise, so that the keys of final-model audits of built-ins do not change)."""
    return {**({"plugin": setup.plugin_digest} if setup.plugin_digest is not None else {}),
            **({"data_files": setup.dataset_files} if setup.dataset_files is not None else {}),
            **({"dataset_revision": setup.dataset_revision} if setup.dataset_revision else {}),
            **({"threat": setup.threat} if setup.threat != "final_model" else {}),
            **({"canaries": setup.canaries, "guesses": setup.guesses} if setup.canaries is not None else {})}


def _pairs(mapping: Mapping[str, Any] | tuple | None) -> tuple:
    if mapping is None:
        return ()
    items = mapping.items() if isinstance(mapping, Mapping) else mapping
    return tuple(sorted((str(k), v) for k, v in items))


@dataclass(frozen=True)
class AuditSetup:
    """One audit: algorithm (+ params) x data (dataset or a self-contained canary recipe) x model x target.

    params, dataset_options and model_options are sorted tuples of (name, value) pairs (use
    `AuditSetup.create` to pass dicts). trials: runs per side (half choose the test, half
    count). rows: base size (None: the recipe's default). label is for display only. threat:
    final_model (the score is a function of the trained model) or all_updates (the white-box
    statistic of every noisy step, `dpbench.audit.whitebox`). threshold: the rule that chooses the
    test (`audit_bounds.THRESHOLD_RULES`; None: empirical for final_model, gaussian for all_updates).
    canaries: set for a one-run audit (Steinke, Nasr, Jagielski 2023; `dpbench.audit.one_run`): one
    training with that many canaries, each in with probability 1/2 (trials is then unused).
    """

    algorithm: str
    params: tuple = ()
    dataset: str | None = None
    dataset_options: tuple = ()
    model: str = "logreg"
    model_options: tuple = ()
    epsilon: float | None = 1.0  # None only for a non-private algorithm
    delta: float = 1e-5
    trials: int = 1000
    canary: str = "spare_feature"
    rows: int | None = None
    alpha: float = 0.05
    seed: int = 0
    label: str = ""
    plugin_digest: str | None = None  # digest of a plugin algorithm's source: part of the identity (edits rerun)
    plugin: str | None = field(default=None, compare=False)  # where that plugin is loaded from (dpbench.run.plugins)
    dataset_files: str | None = None  # content digest of the files dataset_options name: part of the identity
    dataset_base: str = field(default="", compare=False)  # folder relative paths in dataset_options start from
    # the options naming files: with dataset_files set, their content stands for them (core.keys.content_keyed)
    dataset_path_keys: tuple = field(default=(), compare=False)
    # the data set's revision (dpbench.data.DatasetInfo.revision): part of the identity when nonzero; `create`
    # fills it in from the registry
    dataset_revision: int = 0
    threat: str = "final_model"
    threshold: str | None = None
    canaries: int | None = None  # one-run audit (dpbench.audit.one_run): m canaries in one training; None: multi-run
    guesses: int | None = None  # one-run: guesses r (None: privacy.one_run.default_k)

    @classmethod
    def create(cls, algorithm: str, *, params: Mapping | None = None, dataset_options: Mapping | None = None,
               model_options: Mapping | None = None, **fields: Any) -> "AuditSetup":
        """A setup from dicts; `dataset_revision` defaults to the named data set's (0 for an unknown one,
        which `check_setup` refuses)."""
        if fields.get("dataset") is not None and "dataset_revision" not in fields:
            from dpbench import data

            try:
                fields["dataset_revision"] = data.DATASETS.lookup(fields["dataset"]).revision
            except ValueError:
                pass
        return cls(algorithm=algorithm, params=_pairs(params), dataset_options=_pairs(dataset_options),
                   model_options=_pairs(model_options), **fields)

    def identity(self) -> dict:
        return {"schema": AUDIT_SCHEMA, "algorithm": self.algorithm, "params": dict(self.params),
                "dataset": self.dataset, "dataset_options": self.data_options, "model": self.model,
                "model_options": dict(self.model_options), "epsilon": self.epsilon, "delta": self.delta,
                "trials": self.trials, "canary": self.canary, "rows": self.rows, "alpha": self.alpha,
                "seed": self.seed, **_user_code_and_data(self),
                **({"threshold": self.threshold} if self.threshold is not None else {})}

    @property
    def data_options(self) -> dict:
        """The dataset options as they identify the data (`dpbench.core.keys.content_keyed`)."""
        return content_keyed(self.dataset_options, self.dataset_path_keys, self.dataset_files)

    @cached_property
    def key(self) -> str:
        return digest(self.identity())

    @property
    def display_label(self) -> str:
        return self.label or self.algorithm

    @property
    def threshold_rule(self) -> str:
        """The rule that chooses the test: as given, else gaussian for all_updates, empirical otherwise."""
        if self.threshold is not None:
            return self.threshold
        return "gaussian" if self.threat == "all_updates" else "empirical"


@dataclass(frozen=True)
class ResolvedAudit:
    """A validated setup with the recipe's recommendations merged in (what the fits actually use)."""

    setup: AuditSetup
    recipe: Recipe
    params: dict  # the recipe's params (by role, then by algorithm name), overridden by the setup's, each checked
    model_options: dict
    rows: int
    private: bool

    def game_identity(self) -> dict:
        """Everything the fits depend on (not trials, alpha or label: more trials reuse chunks;
        not epsilon or delta for a non-private algorithm, whose fits ignore them)."""
        s = self.setup
        return {"schema": AUDIT_SCHEMA, "algorithm": s.algorithm, "params": self.params, "dataset": s.dataset,
                "dataset_options": dict(s.dataset_options), "model": s.model, "model_options": self.model_options,
                "epsilon": s.epsilon if self.private else None, "delta": s.delta if self.private else None,
                "canary": s.canary, "rows": self.rows, "seed": s.seed, **_user_code_and_data(s)}

    @cached_property
    def game_key(self) -> str:
        return digest(self.game_identity())


def _checked(check: Callable[..., Any], name: str, value: Any, *args, **kwargs) -> Any:
    """A dpbench.privacy.checks function, its ValueError as a one-line AuditError `name: must be ...`."""
    try:
        return check(name, value, *args, **kwargs)
    except ValueError as exc:
        raise AuditError(str(exc).replace(f"{name} must", f"{name}: must", 1)) from None


def _allowed(name: str, value: Any, constraints: Any) -> Any:
    """`validate(name, value, constraints)` (dpbench.core.validation), its error as an AuditError."""
    try:
        return validate(name, value, constraints)
    except InvalidValue as exc:
        raise AuditError(str(exc)) from None


def _declared(what: str, validate: Callable[[dict], dict], given: dict, *, coerce: bool) -> dict:
    """`given` checked by a registry entry's `validate` (errors as AuditError `what.key: ...`): the
    coerced values (coerce=True, hyperparameters as a spec's grid holds them) or the values as
    given (options, which key the data split and the game as written)."""
    try:
        checked = validate(given)
    except ValueError as exc:
        raise AuditError(f"{what}.{exc}") from None
    return {k: checked[k] if coerce else v for k, v in given.items()}


def check_setup(setup: AuditSetup) -> ResolvedAudit:
    """Validate a setup without running anything; one-line AuditError naming the bad field."""
    from dpbench import algorithms, data, models
    from dpbench.run import plugins

    try:
        if setup.plugin is not None:
            plugins.load(setup.plugin)
        info = algorithms.get(setup.algorithm)
    except (ValueError, DpbenchError) as exc:
        raise AuditError(f"algorithm: {exc}") from None
    try:
        recipe = CANARIES.lookup(setup.canary)
    except ValueError as exc:
        raise AuditError(f"canary: {exc}") from None
    if recipe.needs_dataset and setup.dataset is None:
        raise AuditError(f"dataset: canary {setup.canary!r} takes its base rows from a dataset; give one of "
                         f"{', '.join(sorted(data.DATASETS))}")
    if not recipe.needs_dataset and setup.dataset is not None:
        raise AuditError(f"dataset: canary {setup.canary!r} builds its own data; give no dataset "
                         f"(got {setup.dataset!r})")
    if setup.dataset is not None:
        try:
            dataset = data.DATASETS.lookup(setup.dataset)
        except ValueError as exc:
            raise AuditError(f"dataset: {exc}") from None
        _declared("dataset_options", dataset.validate, dict(setup.dataset_options), coerce=False)
    elif setup.dataset_options:
        raise AuditError("dataset_options: given without a dataset")
    try:
        model = models.MODELS.lookup(setup.model)
    except ValueError as exc:
        raise AuditError(f"model: {exc}") from None
    model_options = _declared("model_options", model.validate,
                              {**dict(recipe.model_options), **dict(setup.model_options)}, coerce=False)
    by_role = {p.name: recipe.roles[p.role] for p in info.params if p.role in recipe.roles}
    params = _declared("params", info.validate,
                       {**by_role, **dict(recipe.params.get(setup.algorithm, {})), **dict(setup.params)}, coerce=True)
    if setup.epsilon is None:
        if info.private:
            raise AuditError(f"epsilon: {setup.algorithm} is private: give the target epsilon to audit")
    else:
        _checked(checks.positive, "epsilon", setup.epsilon)
    _allowed("threat", setup.threat, StrOptions(THREATS))
    if setup.threat == "all_updates" and not info.updates:
        raise AuditError(f"threat: {setup.algorithm} releases only its final model (it reports no noisy steps); "
                         f"audit it with threat final_model")
    _allowed("threshold", setup.threshold, [StrOptions(THRESHOLD_RULES), None])
    if (setup.threat == "all_updates" or setup.canaries is not None) and not recipe.spare_coordinate:
        needs = "the all-updates statistic" if setup.canaries is None else "a one-run audit"
        raise AuditError(f"canary: {needs} needs a canary on a coordinate no base row touches; recipe "
                         f"{setup.canary!r} has none (use one of "
                         f"{', '.join(sorted(n for n, r in CANARIES.items() if r.spare_coordinate))})")
    if setup.canaries is not None:
        _checked(checks.integer, "canaries", setup.canaries, 2)
        if setup.threat == "all_updates" and not model.linear:
            raise AuditError(f"model: the all-updates one-run statistic needs a linear model (its canaries' "
                             f"contributions in closed form), got {setup.model}")
        if setup.guesses is not None:
            _checked(checks.integer, "guesses", setup.guesses, 1)
            if setup.guesses > setup.canaries:
                raise AuditError(f"guesses: at most one per canary ({setup.canaries}), got {setup.guesses}")
    elif setup.guesses is not None:
        raise AuditError("guesses: given without canaries (guesses belong to a one-run audit)")
    _checked(checks.unit_interval, "delta", setup.delta)  # checks.DELTA, as a spec's delta
    _checked(checks.unit_interval, "alpha", setup.alpha)
    if setup.canaries is None:  # a one-run audit trains once
        _checked(checks.integer, "trials", setup.trials, 4)  # some runs choose the test, the others count its errors
    rows = _checked(checks.integer, "rows", recipe.default_rows if setup.rows is None else setup.rows, 2)
    _checked(checks.integer, "seed", setup.seed, 0)
    return ResolvedAudit(setup=setup, recipe=recipe, params=dict(sorted(params.items())),
                         model_options=dict(sorted(model_options.items())), rows=int(rows), private=info.private)


__all__ = ["AUDIT_SCHEMA", "THREATS", "AuditError", "AuditSetup", "ResolvedAudit", "check_setup"]
