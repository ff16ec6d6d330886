"""The `audits:` block of a spec: one `AuditSetup` per (audited algorithm entry, epsilon), the
distinguishing games of dpbench.audit.multi_run (and a one-run audit each with `one_run:`).
Block-level keys are defaults an entry may override; every setup is then checked by
dpbench.audit.setup.check_setup, the check the CLI's audits go through too."""

from __future__ import annotations

import dataclasses
from typing import Any

from dpbench.core.errors import DpbenchError, SpecError
from dpbench.core.validation import Anything, Interval, Mapping, Real, Sequence, missing, unknown_key, validate
from dpbench.privacy.checks import DELTA
from dpbench.spec.algorithms import algorithm_of, param_axes
from dpbench.spec.components import components, dataset_check, dataset_revision, entry, model_check, options, path_keys
from dpbench.spec.sections import epsilons, integer

AUDIT_KEYS = ("dataset", "rows", "model", "trials", "alpha", "delta", "epsilons", "canary", "threat", "threshold",
              "one_run", "algorithms")
AUDIT_ENTRY_KEYS = ("name", "plugin", "label", "params", "canary", "model", "trials", "epsilons", "threat", "threshold",
                    "one_run")
ONE_RUN_KEYS = ("canaries", "guesses")
#: 1 - the confidence of the audits' bounds
ALPHA = Interval(Real, 0, 1, closed="neither")


def one_run(value: Any, path: str) -> tuple[int, int | None] | None:
    """`one_run: {canaries: m, guesses: r}` -> (m, r); false or absent -> None (no one-run audit)."""
    if value is None or value is False:
        return None
    validate(path, value, Mapping("a mapping {canaries: m, guesses: r} or false"))
    for key in value:
        if key not in ONE_RUN_KEYS:
            raise unknown_key(path, key, ONE_RUN_KEYS)
    if "canaries" not in value:
        raise missing(f"{path}.canaries", "how many canaries the one training holds, e.g. 1000")
    canaries = integer(value["canaries"], f"{path}.canaries", minimum=2)
    guesses = None if value.get("guesses") is None else integer(value["guesses"], f"{path}.guesses", minimum=1)
    return canaries, guesses


def audits(value: Any, seed: int, base: str = "") -> tuple:
    """`audits:` -> one AuditSetup per (algorithm entry, epsilon). Hyperparameters take single
    values (an audit tests one mechanism, no selection); a canary recipe's recommended ones fill
    the rest."""
    if value is None:
        return ()
    from dpbench.audit.canaries import CANARIES
    from dpbench.audit.setup import AuditSetup, check_setup

    validate("audits", value, Mapping(f"a mapping with {', '.join(AUDIT_KEYS)}"))
    for key in value:
        if key not in AUDIT_KEYS:
            raise unknown_key("audits", key, AUDIT_KEYS)
    dataset = components([value.get("dataset", "breast_cancer")], "audits.dataset", dataset_check, base=base)[0]
    rows = None if value.get("rows") is None else integer(value["rows"], "audits.rows", minimum=2)  # None: the recipe's
    alpha = validate("audits.alpha", value.get("alpha", 0.05), ALPHA, note="1 - confidence")
    delta = validate("audits.delta", value.get("delta", 1e-5), DELTA)
    entries = validate("audits.algorithms", value.get("algorithms"),
                       Sequence(Anything(), what="a non-empty list of {name, label, params, canary}"))
    out = []
    for i, item in enumerate(entries):
        path = f"audits.algorithms[{i}]"
        spec = entry(item, path, AUDIT_ENTRY_KEYS)
        info, plugin, plugin_digest = algorithm_of(spec, path, base)
        name = info.name
        given = options(spec.get("params"), f"{path}.params")
        axes = param_axes(info, given, f"{path}.params")
        if any(len(axis) > 1 for axis in axes):
            raise SpecError(f"{path}.params: an audit tests one setting; give single values, not lists")
        # only the given hyperparameters: the canary recipe's recommended ones fill the rest
        params = tuple(sorted(axis[0] for axis in axes if axis[0][0] in given))
        canary = spec.get("canary", value.get("canary", "spare_feature"))
        try:
            recipe = CANARIES.lookup(canary)
        except ValueError as exc:
            raise SpecError(f"{path}.canary: {exc}") from None
        model = components([spec.get("model", value.get("model", "logreg"))], f"{path}.model", model_check)[0]
        trials = integer(spec.get("trials", value.get("trials", 500)), f"{path}.trials", minimum=20)
        threat = spec.get("threat", value.get("threat", "final_model"))
        threshold = spec.get("threshold", value.get("threshold"))
        one = one_run(spec["one_run"], f"{path}.one_run") if "one_run" in spec else \
            one_run(value.get("one_run"), "audits.one_run")
        budgets = epsilons(spec.get("epsilons", value.get("epsilons")), required=info.private,
                           path=f"{path}.epsilons" if "epsilons" in spec else "audits.epsilons")
        own_data = not recipe.needs_dataset  # e.g. pidp_constant builds its own rows
        for eps in budgets if info.private else (None,):
            setup = AuditSetup(algorithm=name, params=params, dataset=None if own_data else dataset.name,
                               dataset_options=() if own_data else dataset.options, model=model.name,
                               model_options=model.options, epsilon=eps, delta=delta, trials=trials,
                               canary=canary, rows=None if own_data else rows, alpha=alpha, seed=seed,
                               label=str(spec.get("label") or name), plugin=plugin, plugin_digest=plugin_digest,
                               dataset_base="" if own_data else dataset.base,
                               dataset_files=None if own_data else dataset.files_digest, threat=threat,
                               dataset_path_keys=() if own_data else path_keys(dataset.name),
                               dataset_revision=0 if own_data else dataset_revision(dataset.name),
                               threshold=threshold)
            variants = [setup] if one is None else \
                [setup, dataclasses.replace(setup, canaries=one[0], guesses=one[1])]  # + the one-run audit
            for variant in variants:
                try:
                    check_setup(variant)
                except DpbenchError as exc:
                    raise SpecError(f"{path}: {exc}") from None
                out.append(variant)
    return tuple(out)


__all__ = ["ALPHA", "AUDIT_ENTRY_KEYS", "AUDIT_KEYS", "ONE_RUN_KEYS", "audits", "one_run"]
