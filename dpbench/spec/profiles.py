"""Profiles: named overrides of an experiment's top-level keys (`profiles: {ci: {seeds: 2}}`),
applied before the spec is validated. Mappings merge, lists and scalars replace."""

from __future__ import annotations

import copy
from typing import Any

from dpbench.core.errors import SpecError
from dpbench.core.validation import Mapping, validate
from dpbench.spec.sections import TOP_KEYS

DEFAULT_PROFILE = "full"


def apply_profile(raw: dict, profile: str) -> dict:
    """`raw` with the overrides of `profile` merged in (the default profile needs no entry). A
    profile that sets `seeds:` drops the base's `extra_seeds:` unless it sets its own (a `ci`
    profile's two seeds are not to grow with the curves `dpbench decide` extended)."""
    profiles = validate("profiles", raw.get("profiles") or {}, Mapping("a mapping of profile name -> overrides"))
    if profile not in profiles:
        if profile == DEFAULT_PROFILE:
            return raw
        known = ", ".join(sorted(set(profiles) | {DEFAULT_PROFILE}))
        raise SpecError(f"--profile: unknown profile {profile!r}; this experiment has {known}")
    overrides = validate(f"profiles.{profile}", profiles[profile],
                         [Mapping("a mapping of top-level keys to new values"), None])
    if overrides is None:
        return raw
    for key in overrides:
        if key not in TOP_KEYS or key == "profiles":
            raise SpecError(f"profiles.{profile}.{key}: not an overridable key; use one of "
                            f"{', '.join(k for k in TOP_KEYS if k != 'profiles')}")
    if "seeds" in overrides and "extra_seeds" not in overrides:
        # a profile that sets its own seeds does not inherit the curves `dpbench decide` extended
        raw = {k: v for k, v in raw.items() if k != "extra_seeds"}
    if isinstance(overrides.get("seeds"), dict) and not isinstance(raw.get("seeds"), dict):
        # a per-dataset seeds mapping merges with the base's seeds: a count or list there is its default
        raw = {**raw, "seeds": {"default": raw.get("seeds", 1)}}
    return merge(raw, overrides)  # an int or list `seeds` replaces a base mapping: every dataset gets it


def merge(base: Any, over: Any) -> Any:
    """`over` on top of `base`: mappings merge key by key, anything else is replaced (copied)."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(base.get(k), v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


__all__ = ["DEFAULT_PROFILE", "apply_profile", "merge"]
