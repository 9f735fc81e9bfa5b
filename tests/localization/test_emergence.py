import json

import pytest

from anpred.errors import UsageError
from anpred.localization import (
    collect_findings,
    emergence_anchor,
    emergence_distribution,
    emergences,
    library_blame,
)

ANCHORS = ("stem", "layer1", "layer2", "layer3", "out")


def test_emergence_anchor_is_first_in_topological_order_not_in_given_order():
    assert emergence_anchor(ANCHORS, ["layer3", "layer1", "out"]) == "layer1"
    assert emergence_anchor(ANCHORS, []) is None


def test_emergence_anchor_rejects_unknown_anchor_and_duplicate_names():
    with pytest.raises(UsageError, match="unknown anchor 'nope'"):
        emergence_anchor(ANCHORS, ["nope"])
    with pytest.raises(UsageError, match="unique"):
        emergence_anchor(("a", "a"), [])


def test_collect_findings_keeps_clean_pairs_with_empty_tuple():
    records = [
        ("tf", "stem", "i0", False),
        ("tf", "layer2", "i0", True),
        ("tf", "out", "i0", True),
        ("jax", "stem", "i0", False),
        ("jax", "out", "i0", False),
    ]
    assert collect_findings(records) == {("tf", "i0"): ("layer2", "out"), ("jax", "i0"): ()}


def test_emergences_and_distribution_per_participant():
    findings = {
        ("tf", "i0"): ["layer2", "out"],
        ("tf", "i1"): ["layer2"],
        ("tf", "i2"): ["layer1", "layer2"],
        ("tf", "i3"): [],
        ("jax", "i0"): [],
        ("jax", "i1"): [],
    }
    em = emergences(ANCHORS, findings)
    assert [(e.participant, e.input_id, e.anchor, e.position) for e in em] == [
        ("tf", "i0", "layer2", 2),
        ("tf", "i1", "layer2", 2),
        ("tf", "i2", "layer1", 1),
        ("tf", "i3", None, None),
        ("jax", "i0", None, None),
        ("jax", "i1", None, None),
    ]
    dist = emergence_distribution(ANCHORS, findings)
    tf = dist["tf"]
    assert tf.counts == {"stem": 0, "layer1": 1, "layer2": 2, "layer3": 0, "out": 0}
    assert (tf.n_inputs, tf.n_clean, tf.most_common, tf.earliest) == (4, 1, "layer2", "layer1")
    jax = dist["jax"]
    assert (jax.n_inputs, jax.n_clean, jax.most_common, jax.earliest) == (2, 2, None, None)
    json.dumps(tf.to_dict(), allow_nan=False)


def test_most_common_breaks_ties_by_anchor_order():
    findings = {("tf", "i0"): ["layer3"], ("tf", "i1"): ["layer1"]}
    assert emergence_distribution(ANCHORS, findings)["tf"].most_common == "layer1"


def test_blame_names_participants_flagged_at_the_earliest_anchor():
    findings = {
        # i0: only tf deviates from the consensus, first at layer1
        ("tf", "i0"): ["layer1", "layer2"],
        ("jax", "i0"): [],
        ("paddle", "i0"): [],
        # i1: tf and paddle both deviate at layer2; jax only later, at out
        ("tf", "i1"): ["layer2"],
        ("jax", "i1"): ["out"],
        ("paddle", "i1"): ["layer2", "out"],
        # i2: clean
        ("tf", "i2"): [],
        ("jax", "i2"): [],
        ("paddle", "i2"): [],
        # i3: paddle alone at stem
        ("tf", "i3"): ["layer3"],
        ("jax", "i3"): [],
        ("paddle", "i3"): ["stem"],
    }
    blame = library_blame(ANCHORS, findings)
    assert blame.participants == ("tf", "jax", "paddle")
    assert [(r.input_id, r.anchor, r.participants) for r in blame.records] == [
        ("i0", "layer1", ("tf",)),
        ("i1", "layer2", ("paddle", "tf")),
        ("i2", None, ()),
        ("i3", "stem", ("paddle",)),
    ]
    assert blame.records[1].later == {"jax": "out"}
    assert blame.records[3].later == {"tf": "layer3"}
    assert blame.counts == {"tf": 2, "jax": 0, "paddle": 2}
    assert blame.sole_counts == {"tf": 1, "jax": 0, "paddle": 1}
    assert blame.anchor_counts == {
        "tf": {"layer1": 1, "layer2": 1},
        "jax": {},
        "paddle": {"stem": 1, "layer2": 1},
    }
    assert (blame.n_inputs, blame.n_clean, blame.n_joint) == (4, 1, 1)
    data = blame.to_dict()
    json.dumps(data, allow_nan=False)
    assert data["records"][1]["participants"] == ["paddle", "tf"]
