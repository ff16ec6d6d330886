"""dpbench.core.ledger: the stored (flat) form of a fit's privacy ledger, and reading it back.

The round trip of a full ledger and the refusals are in tests/core/test_registry.py; these tests
pin what the stored form leaves out, the mapping view over it, and the records of every age that
`from_dict` must read.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from dpbench.core.ledger import CLAIMS, Adjacency, Ledger


def _ledger(**named) -> Ledger:
    return Ledger(**{"private": True, "mechanism": "Gaussian", "claim": "valid", "target_epsilon": 1.0,
                     "delta": 1e-5, "epsilon_spent": {"rdp": 0.9, "pld": 0.8}, **named})


def test_the_stored_form_holds_the_set_fields_then_the_details_at_the_top_level():
    ledger = _ledger(adjacency=Adjacency.ADD_REMOVE, details={"steps": 30, "noise_multiplier": 1.1})
    assert ledger.as_dict() == {"private": True, "mechanism": "Gaussian", "claim": "valid", "target_epsilon": 1.0,
                                "delta": 1e-5, "epsilon_spent": {"rdp": 0.9, "pld": 0.8},
                                "adjacency": "add/remove-one", "steps": 30, "noise_multiplier": 1.1}


def test_unset_fields_and_a_spent_adjacency_equal_to_the_claim_are_left_out():
    stored = _ledger(adjacency="replace-one", spent_adjacency="replace-one").as_dict()
    assert "spent_adjacency" not in stored and "sensitivity" not in stored and "claim_reason" not in stored
    assert "adjacency" not in _ledger().as_dict()
    stored = _ledger(adjacency="replace-one", spent_adjacency="add/remove-one", sensitivity=0.5,
                     claim_reason="why").as_dict()
    assert (stored["spent_adjacency"], stored["sensitivity"], stored["claim_reason"]) == ("add/remove-one", 0.5, "why")


def test_the_mapping_view_is_the_stored_form():
    ledger = _ledger(adjacency="replace-one", details={"steps": 3})
    assert list(ledger) == list(ledger.as_dict()) and len(ledger) == len(ledger.as_dict())
    assert ledger["adjacency"] == "replace-one" and ledger["steps"] == 3 and "steps" in ledger
    assert "sensitivity" not in ledger and ledger.get("sensitivity", "unset") == "unset"
    with pytest.raises(KeyError):
        ledger["sensitivity"]


def test_the_stored_form_survives_json_and_reads_back_equal():
    ledger = _ledger(adjacency="replace-one", spent_adjacency="add/remove-one", sensitivity=2.0,
                     claim_reason="r", details={"sampling": {"kind": "poisson", "rate": 0.01}, "steps": 7})
    again = Ledger.from_dict(json.loads(json.dumps(ledger.as_dict())))
    assert again == ledger and again.adjacency is Adjacency.REPLACE_ONE
    assert again.spent_adjacency is Adjacency.ADD_REMOVE and again.details == ledger.details
    assert Ledger.from_dict(ledger) is ledger


def test_a_record_with_only_some_fields_reads_with_the_non_private_defaults():
    ledger = Ledger.from_dict({"noise": 1.5})
    assert (ledger.private, ledger.mechanism, ledger.claim) == (False, "", "none")
    assert ledger.target_epsilon is None and ledger.epsilon_spent == {} and ledger.details == {"noise": 1.5}
    assert ledger.audited_adjacency is Adjacency.ADD_REMOVE


@pytest.mark.parametrize("stored, claim, spent", [
    ("replace-one", Adjacency.REPLACE_ONE, None),
    ("add/remove-one", Adjacency.ADD_REMOVE, None),
    ("paper: replace-one; epsilon_spent: add/remove-one", Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE),
    ("replace-one; epsilon_spent: add/remove-one", Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE),
])
def test_free_text_adjacencies_of_old_records_are_parsed(stored, claim, spent):
    ledger = Ledger.from_dict({"private": True, "mechanism": "m", "claim": "paper-only", "adjacency": stored})
    assert ledger.adjacency is claim and ledger.spent_adjacency is spent
    assert ledger.audited_adjacency is claim


def test_changes_make_new_ledgers():
    ledger = _ledger(claim_reason="first", details={"steps": 3})
    assert ledger.with_claim("paper-only").claim_reason == "first"  # no new reason keeps the old one
    assert ledger.with_claim("none", "not convex").claim_reason == "not convex"
    more = ledger.with_details(steps=4, rounds=2)
    assert more.details == {"steps": 4, "rounds": 2} and ledger.details == {"steps": 3}
    with pytest.raises(ValueError, match="repeat named fields: delta"):
        ledger.with_details(delta=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ledger.claim = "none"


def test_adjacency_parsing():
    assert Adjacency.parse(None) is None
    assert Adjacency.parse(Adjacency.REPLACE_ONE) is Adjacency.REPLACE_ONE
    assert Adjacency.parse("add/remove-one") is Adjacency.ADD_REMOVE
    with pytest.raises(ValueError, match="expected 'add/remove-one' or 'replace-one'"):
        Adjacency.parse("add-one")
    assert CLAIMS == ("valid", "declared", "none", "paper-only")
