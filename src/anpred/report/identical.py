"""The report's note on library releases that gave bit-identical anchors.

The run records it on each participant (:mod:`anpred.pipeline.identical`); the terminal
summary and the HTML report's library section say it in one sentence per group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from anpred.pipeline.identical import BY_KEY, KEY

_HOW = {
    "captures": "every anchor of every input equal bit for bit",
    "deviations": "every deviation equal to the last bit; captures were pruned",
}


def identical_notes(participants: Any) -> list[str]:
    """One sentence per group of participants with bit-identical anchors (``participants``:
    the raw summary's participant records; anything else is skipped).
    """
    if not isinstance(participants, Iterable) or isinstance(participants, str | Mapping):
        return []
    groups: list[tuple[list[str], str]] = []
    seen: set[str] = set()
    for record in participants:
        if not isinstance(record, Mapping) or not isinstance(record.get(KEY), list):
            continue
        name = str(record.get("participant", "?"))
        if name in seen:
            continue
        members = [name, *(str(n) for n in record[KEY])]
        seen.update(members)
        groups.append((members, _HOW.get(str(record.get(BY_KEY)), "")))
    return [
        f"{_listed(members)} gave bit-identical anchors ({how}): the same kernels, "
        "one vote in the consensus, not independent ones"
        for members, how in groups
    ]


def _listed(names: list[str]) -> str:
    """``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
