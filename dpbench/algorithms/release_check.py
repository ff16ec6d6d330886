"""dpbench's release check: the steps a fit declared (`releases.Tally`) against what its ledger claims.

A fit writes its own ledger; its releases (`releases.release`, `releases.released_steps`) say step
by step what it did: each step's kind, noise std, sampling rate, clip norm and weight. The runner
tallies every fit (`releases.tallying`, a dictionary increment per step) and compares the tally
with the ledger here (`check`); `dpbench verify` compares each observed run the same way
(`dpbench.audit.verify.check_stream`), so the rule lives in this one place. What is compared, only
where both sides state it:

* **steps**: the number of steps reported against the ledger's `steps` (PIDP-SGD's noise-free steps
  are steps: they count);
* **noise multiplier**: a noisy "gradient_sum" step declares z = noise_std / (f clip_norm), f = 2
  when the ledger's epsilon is computed under replace-one adjacency (a replaced record moves a
  clipped sum by up to 2 clip_norm), else 1; a "noisy_statistic" step z = weight noise_std /
  sensitivity (the ledger's sensitivity of the released statistic); each against the ledger's
  `noise_multiplier` (relative `REL_TOL`). A step with noise std 0 is a noise-free step: allowed
  where the ledger counts them (`noise_free_steps`, or `noise_free_fraction` of its steps: PIDP-SGD)
  and then counted against it, a mismatch where the ledger states a noise multiplier > 0 and no
  noise-free steps;
* **sampling rate**: each step's declared rate against the ledger's `sampling.rate`;
* **clip norm**: a "gradient_sum" step without a clip norm where the ledger states a sensitivity or
  a noise multiplier is a mismatch ("steps not clipped"); a clipped step's f clip_norm (the
  sensitivity of the sum) or weight f clip_norm (of the weighted statistic, e.g. DP-GD's mean)
  must equal the ledger's `sensitivity`. "noisy_statistic" steps (robust GD, Bun-Steinke) have no
  clip norm.

An algorithm that reports no steps (output perturbation, objective perturbation, ...) is "not
checked", and so is a fit whose ledger states none of these numbers. What the check cannot see is a
stream that lies (a step declaring noise it did not add, a rate it did not sample at): that is
`dpbench verify`'s measured checks. Transforms after the release (DP-LSSGD's smoothing, an Adam
direction) are post-processing and change nothing here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from dpbench.algorithms.releases import Declared, Tally
from dpbench.core.ledger import Adjacency, Ledger, sampling_rate

#: relative tolerance of a declared noise multiplier and clip-based sensitivity against the ledger's
#: (the same numbers computed in another order)
REL_TOL = 1e-6
#: relative tolerance of a declared sampling rate against the ledger's
RATE_TOL = 1e-9
#: the comparisons, in their order, and their names in the text of a result
ASPECTS = {"steps": "steps", "noise": "noise multiplier", "rate": "sampling rate", "clip": "clip norm"}
#: the ledger detail the runner stores the result in
DETAIL = "release_check"


class Comparison(NamedTuple):
    """One aspect (`ASPECTS`) of the check: "ok", "mismatch" or "not compared", and what it saw."""

    aspect: str
    status: str
    detail: str


@dataclass(frozen=True)
class ReleaseCheck:
    """The comparisons of one fit's tally with its ledger; `status` and `text` sum them up."""

    comparisons: tuple[Comparison, ...] = ()
    reason: str | None = None  # why nothing was compared (the algorithm reports no steps, ...)

    @cached_property
    def status(self) -> str:
        """"mismatch" if any comparison is one, else "consistent" if any was made, else "not checked"."""
        statuses = {c.status for c in self.comparisons}
        if "mismatch" in statuses:
            return "mismatch"
        return "consistent" if "ok" in statuses else "not checked"

    @property
    def problems(self) -> list[str]:
        """What did not match, one sentence each ([] unless a mismatch)."""
        return [c.detail for c in self.comparisons if c.status == "mismatch"]

    @cached_property
    def text(self) -> str:
        """What the record stores: "consistent: 20 steps, z 1.23, q 0.0071, clip 1" (and what was
        not compared), "mismatch: <problems>" or "not checked: <why>"."""
        status = self.status
        if status == "mismatch":
            return "mismatch: " + "; ".join(self.problems)
        if status == "not checked":
            return "not checked: " + (self.reason or "the ledger states no steps, noise multiplier, sampling "
                                                     "rate or sensitivity")
        skipped = [ASPECTS[c.aspect] for c in self.comparisons if c.status == "not compared"]
        return ("consistent: " + ", ".join(c.detail for c in self.comparisons if c.status == "ok")
                + (f"; not compared: {', '.join(skipped)}" if skipped else ""))


def sensitivity_factor(ledger: Ledger) -> float:
    """2 where the ledger's epsilon is computed under replace-one adjacency, else 1: the sensitivity
    of a clipped sum in clip norms."""
    return 2.0 if (ledger.spent_adjacency or ledger.audited_adjacency) is Adjacency.REPLACE_ONE else 1.0


def noise_multipliers(steps: Tally | Mapping[Declared, int], ledger: Ledger) -> dict[float, int]:
    """Steps per declared noise multiplier (module docstring), for the noisy steps whose multiplier
    the declaration and the ledger determine (a clipped gradient sum; a noisy statistic where the
    ledger states its sensitivity)."""
    factor, sensitivity = sensitivity_factor(ledger), ledger.sensitivity
    out: dict[float, int] = {}
    for d, count in _declared(steps).items():
        if not d.noise_std > 0:
            continue
        if d.kind == "gradient_sum" and d.clip_norm:
            z = d.noise_std / (factor * d.clip_norm)
        elif d.kind == "noisy_statistic" and sensitivity:
            z = d.weight * d.noise_std / float(sensitivity)
        else:
            continue
        out[z] = out.get(z, 0) + count
    return out


def compare(steps: Tally | Mapping[Declared, int], ledger: Ledger) -> list[Comparison]:
    """The four comparisons of the module docstring, in the order of `ASPECTS`; only the steps where
    no step was reported (0 against the ledger's steps: `check` calls that "not checked", `dpbench
    verify`, which knows the algorithm reports its steps, a mismatch)."""
    declared = _declared(steps)
    total = sum(declared.values())
    stated = ledger.as_dict()  # read once (a Ledger's mapping builds this on every lookup)
    if not total:
        return [_steps(declared, total, stated)]
    return [_steps(declared, total, stated), _noise(declared, total, ledger, stated), _rate(declared, stated),
            _clip(declared, ledger, stated)]


#: results of `check` by what it reads (the steps as declared, the ledger's numbers): a grid's seeds
#: repeat one tally against one ledger's numbers, so the runner compares each such pair once
_MEMO: dict[tuple, ReleaseCheck] = {}
MEMO_SIZE = 4096


def check(steps: Tally | Mapping[Declared, int], ledger: Ledger) -> ReleaseCheck:
    """The release check of one fit: its tally (or steps per declaration) against its ledger."""
    declared = _declared(steps)
    if not sum(declared.values()):
        return ReleaseCheck(reason="the algorithm reports no steps")
    stated = ledger.as_dict()
    key = (tuple(declared.items()), ledger.sensitivity, sensitivity_factor(ledger), sampling_rate(stated),
           *(stated.get(name) for name in ("steps", "noise_multiplier", "noise_free_steps", "noise_free_fraction")))
    try:
        return _MEMO[key]
    except KeyError:
        pass
    except TypeError:  # a number that is not hashable: compared, not memoised
        return ReleaseCheck(tuple(compare(declared, ledger)))
    if len(_MEMO) >= MEMO_SIZE:
        _MEMO.clear()
    result = _MEMO[key] = ReleaseCheck(tuple(compare(declared, ledger)))
    return result


def mismatches(steps: Tally | Mapping[Declared, int], ledger: Ledger) -> list[str]:
    """What in the declared steps contradicts the ledger, one sentence each ([]: nothing, or nothing
    to compare; `check` says which)."""
    return check(steps, ledger).problems


def with_release_check(ledger: Ledger, steps: Tally | Mapping[Declared, int] | None) -> Ledger:
    """The ledger with the check's `text` in its details (`DETAIL`); on a mismatch, a "valid" claim
    turned "paper-only" with the reason ("dpbench's release check: ..."); a "valid" whose ledger
    composes more than one noisy step (`composed_steps`) while the fit reported none turned
    "declared" ("not checked" is never the strongest word for a composition); unchanged for None
    (nothing was tallied)."""
    if steps is None:
        return ledger
    result = check(steps, ledger)
    out = ledger.with_details(**{DETAIL: result.text})
    if result.status == "mismatch" and out.claim == "valid":
        out = out.with_claim("paper-only", "dpbench's release check: " + "; ".join(result.problems))
    composed = composed_steps(ledger)
    if result.status == "not checked" and composed > 1 and out.claim == "valid":
        out = out.with_claim("declared", f"dpbench's release check: the ledger composes {composed} noisy steps and "
                                         "the algorithm reported none, so nothing dpbench saw holds the claim")
    return out


def composed_steps(ledger: Ledger) -> int:
    """How many noisy mechanisms the ledger's event composes (a `SelfComposedDpEvent`'s count, the
    events of a `ComposedDpEvent`, recursively; 1 for a single mechanism), else its `steps` where it
    states a noise multiplier; 0 when it states neither."""
    event = ledger.event
    if isinstance(event, Mapping):
        return _event_count(event)
    stated = ledger.as_dict()
    if stated.get("noise_multiplier") is not None and stated.get("steps") is not None:
        return int(stated["steps"])
    return 0


def _event_count(event: Mapping) -> int:
    kind = event.get("type")
    if kind == "SelfComposedDpEvent":
        return int(event.get("count", 1)) * _event_count(event.get("event") or {})
    if kind == "ComposedDpEvent":
        return sum(_event_count(e) for e in event.get("events") or [] if isinstance(e, Mapping))
    if kind in ("PoissonSampledDpEvent", "SampledWithReplacementDpEvent", "SampledWithoutReplacementDpEvent"):
        return _event_count(event.get("event") or {})
    if kind in ("NoOpDpEvent", None):
        return 0
    return 1


# ---------------------------------------------------------------------------------------------
def _declared(steps: Tally | Mapping[Declared, int]) -> dict[Declared, int]:
    if isinstance(steps, Tally):
        return steps.declared()
    return steps if type(steps) is dict else dict(steps)


def _close(a: float, b: float, tol: float) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=1e-300)


def _values(values) -> str:
    return "/".join(f"{v:.4g}" for v in sorted(set(values)))


def _steps(declared: dict[Declared, int], total: int, stated: dict) -> Comparison:
    said = stated.get("steps")
    if said is None:
        return Comparison("steps", "not compared", "the ledger states no steps")
    free = sum(c for d, c in declared.items() if not d.noise_std > 0)
    if total != int(said):
        return Comparison("steps", "mismatch", f"{total} noisy steps observed, the ledger says {int(said)}")
    return Comparison("steps", "ok", f"{total} steps" + (f" ({free} noise-free)" if 0 < free < total else ""))


def _noise_free_said(stated: dict) -> int | None:
    """The noise-free steps the ledger counts (`noise_free_steps`, or `noise_free_fraction` x steps)."""
    if stated.get("noise_free_steps") is not None:
        return int(stated["noise_free_steps"])
    fraction, steps = stated.get("noise_free_fraction"), stated.get("steps")
    if fraction is not None and steps is not None:
        return round(float(fraction) * int(steps))
    return None


def _noise(declared: dict[Declared, int], total: int, ledger: Ledger, stated: dict) -> Comparison:
    z_said = stated.get("noise_multiplier")
    zs = noise_multipliers(declared, ledger)
    free = sum(c for d, c in declared.items() if not d.noise_std > 0)
    free_said = _noise_free_said(stated)
    problems, seen = [], []
    if z_said is not None and zs:
        wrong = [z for z in zs if not _close(z, float(z_said), REL_TOL)]
        if wrong:
            problems.append(f"steps declare noise multiplier {_values(wrong)}, the ledger {float(z_said):.4g}")
        seen.append(f"z {_values(zs)}")
    if free_said is not None:
        if free != free_said:
            problems.append(f"{free} steps without noise, the ledger says {free_said}")
        seen.append(f"{free} noise-free")
    elif free and z_said is not None and float(z_said) > 0:
        problems.append(f"{free} of {total} steps without noise, the ledger's noise multiplier is "
                        f"{float(z_said):.4g}")
    if problems:
        return Comparison("noise", "mismatch", "; ".join(problems))
    if seen and (z_said is not None or free_said is not None):
        return Comparison("noise", "ok", seen[0])
    return Comparison("noise", "not compared", "no noise multiplier both sides state")


def _rate(declared: dict[Declared, int], stated: dict) -> Comparison:
    said = sampling_rate(stated)
    rates = {d.rate for d in declared}
    if said is None:
        return Comparison("rate", "not compared", "the ledger states no sampling rate")
    wrong = [r for r in rates if not _close(r, said, RATE_TOL)]
    if wrong:
        return Comparison("rate", "mismatch", f"steps declare sampling rate {_values(wrong)}, the ledger {said:.4g}")
    return Comparison("rate", "ok", f"q {said:.4g}")


def _clip(declared: dict[Declared, int], ledger: Ledger, stated: dict) -> Comparison:
    sums = {d: c for d, c in declared.items() if d.kind == "gradient_sum"}
    sensitivity, z_said = ledger.sensitivity, stated.get("noise_multiplier")
    if not sums or (sensitivity is None and z_said is None):
        return Comparison("clip", "not compared", "no clipped gradient sums, or no sensitivity in the ledger")
    unclipped = sum(c for d, c in sums.items() if d.clip_norm is None)
    if unclipped:
        basis = f"sensitivity {float(sensitivity):.4g}" if sensitivity is not None else \
            f"noise multiplier {float(z_said):.4g}"
        return Comparison("clip", "mismatch", f"{unclipped} steps not clipped (the ledger's {basis} rests on "
                                              "clipping)")
    clips = {d.clip_norm for d in sums}
    if sensitivity is None:
        return Comparison("clip", "not compared", f"clip {_values(clips)}; the ledger states no sensitivity")
    factor, s = sensitivity_factor(ledger), float(sensitivity)
    wrong = [d.clip_norm for d in sums if not (_close(s, factor * d.clip_norm, REL_TOL)
                                               or _close(s, d.weight * factor * d.clip_norm, REL_TOL))]
    if wrong:
        return Comparison("clip", "mismatch", f"steps clip at {_values(wrong)} (sensitivity {factor:g} x that), "
                                              f"the ledger's sensitivity is {s:.4g}")
    return Comparison("clip", "ok", f"clip {_values(clips)}")


__all__ = ["ASPECTS", "DETAIL", "RATE_TOL", "REL_TOL", "Comparison", "ReleaseCheck", "check", "compare", "composed_steps",
           "mismatches", "noise_multipliers", "sampling_rate", "sensitivity_factor", "with_release_check"]
