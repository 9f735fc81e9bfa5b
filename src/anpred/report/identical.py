"""The report's notes on library releases compared bit for bit.

The run records them on each participant (:mod:`anpred.pipeline.identical`, under the keys
of :mod:`anpred.store.summary_records`): releases that gave bit-identical anchors (one vote
in the consensus, not several), and for releases that differ, the first anchor where they
do. The terminal summary and the HTML report's library
section say each in one sentence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from anpred.store.summary_records import BY_KEY, DIFFERS_KEY, KEY

_HOW = {
    "captures": "every anchor of every input equal bit for bit",
    "deviations": "every deviation equal to the last bit; captures were pruned",
}


def identical_notes(participants: Any) -> list[str]:
    """One sentence per group of participants with bit-identical anchors, then one per pair
    of releases that differ (``participants``: the raw summary's participant records;
    anything else is skipped).
    """
    if not isinstance(participants, Iterable) or isinstance(participants, str | Mapping):
        return []
    records = [r for r in participants if isinstance(r, Mapping)]
    notes, seen = [], set()
    for record in records:
        name = str(record.get("participant", "?"))
        if not isinstance(record.get(KEY), list) or name in seen:
            continue
        members = [name, *(str(n) for n in record[KEY])]
        seen.update(members)
        how = _HOW.get(str(record.get(BY_KEY)), "")
        notes.append(
            f"{_listed(members)} gave bit-identical anchors ({how}): the same kernels, one "
            "vote in the consensus, not independent ones"
        )
    said = set()
    for record in records:
        name = str(record.get("participant", "?"))
        differing = record.get(DIFFERS_KEY)
        if not isinstance(differing, Mapping):
            continue
        for other, where in differing.items():
            if frozenset((name, other)) in said or not isinstance(where, Mapping):
                continue
            said.add(frozenset((name, other)))
            notes.append(_differs(name, str(other), where, record.get(BY_KEY)))
    return notes


def _differs(name: str, other: str, where: Mapping[str, Any], by: Any) -> str:
    anchor = where.get("anchor", "?")
    diff = where.get("max_abs_diff")
    size = f", max |Δ| {diff:.2g}" if isinstance(diff, int | float) else ""
    ops = where.get("stage_ops")
    held = ""
    if isinstance(ops, Mapping) and ops:
        held = f" ({', '.join(f'{op}×{n}' for op, n in ops.items())})"
    if where.get("index") == 0:
        return f"{name} and {other} differ from the first anchor on ({anchor}{held}{size})"
    basis = "anchors" if by == "captures" else "deviations"
    single = where.get("operator")
    what = (
        f"the operator whose numerics changed between them is {single}"
        if isinstance(single, str)
        else "what changed between them is in the stage that ends there"
    )
    return (
        f"{name} and {other}: {basis} bit-identical before {anchor}, first different at "
        f"{anchor}{held}{size}: {what}"
    )


def _listed(names: list[str]) -> str:
    """``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
