"""A benchmark of real, publicly reported library precision bugs (``configs/known-bugs.json``).

Each bug is a release of a library that computes something wrong and a release that does
not (``fixed``; older than ``buggy`` for a regression), a link to its public report, a
standalone verification script (``benchmarks/known_bugs/<id>.py``: the library and numpy
only, prints ``RESULT <relative error>`` and exits 0 when the bug shows), the model that
exercises it (an ordinary small model built deterministically in
``benchmarks/known_bugs/models.py``), and where the bug is known to be (library,
operator). The file also lists the bugs tried that did not reproduce here and those out of
reach (a GPU, ARM), each with the reason.

Scoring (:func:`score_bug`) reads two runs of the model: participants = the installed
libraries plus ``LIB@BUGGY``, and the same with ``LIB@FIXED``; it asks what the injected
faults are asked (:mod:`anpred.evaluation.scoring`): detected, library blamed, stage,
operator named by the drill-down, false findings on the fixed release, and, for every
output-level baseline, whether it fails the buggy release where it passes the fixed one.
Nothing here imports a DL library.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anpred.errors import UsageError
from anpred.store.summary import Summary

#: The top-level key that marks a known-bugs file (``anpred eval`` dispatches on it).
KEY = "known_bugs"
#: Keys every bug entry must have.
REQUIRED = ("id", "link", "library", "buggy", "fixed", "script", "model", "where")
#: Directions of a bug: fixed in a later release, or a regression (the good release older).
DIRECTIONS = ("fix", "regression")


@dataclass(frozen=True)
class KnownBug:
    """One entry of ``configs/known-bugs.json``.

    Attributes:
        id: Short unique name (``onnxruntime-29629``), also the results' row key.
        link: The public issue or pull request.
        library: anpred's name of the library (``onnxruntime``, ``torch``, ``ncnn``...).
        buggy: The release that shows the bug.
        fixed: A release that does not (older than ``buggy`` for a regression).
        script: The standalone verification script, relative to the repository root.
        model: What ``anpred run`` gets: ``path/models.py:function`` (a torch module) or
            ``onnx:NAME`` (an ONNX file written by ``onnx_models.write_onnx``).
        where: What is known about the bug's place: ``operator`` (the ONNX op type the
            drill-down should name), ``stage`` (the anchor key, optional), ``kernel``.
        configuration: The participant's configuration (``bf16`` for ``torch@2.0.1[bf16]``).
        libs: The installed participants beside the release (default ``all``).
        direction: ``fix`` or ``regression``.
        needs: CPU features the bug needs (``amx_bf16``); informational.
        title: One line on what goes wrong.
        run_options: Extra ``anpred run`` arguments (``["--images", "1"]``).
    """

    id: str
    link: str
    library: str
    buggy: str
    fixed: str
    script: str
    model: str
    where: dict[str, str]
    configuration: str = ""
    libs: str = "all"
    direction: str = "fix"
    needs: tuple[str, ...] = ()
    title: str = ""
    run_options: tuple[str, ...] = ()

    def participant(self, version: str) -> str:
        """The participant spec of this bug's library at ``version``: ``LIB@VERSION[config]``,
        or plain ``LIB[config]`` when ``version`` is the installed release (its own
        environment would be a copy of the main one).
        """
        config = f"[{self.configuration}]" if self.configuration else ""
        if version == installed_version(self.library):
            return f"{self.library}{config}"
        return f"{self.library}@{version}{config}"

    @property
    def buggy_participant(self) -> str:
        """``LIB@BUGGY[config]``."""
        return self.participant(self.buggy)

    @property
    def fixed_participant(self) -> str:
        """``LIB@FIXED[config]``."""
        return self.participant(self.fixed)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KnownBug:
        """Read and check one entry.

        Raises:
            UsageError: A missing or malformed key (one line naming the entry).
        """
        name = data.get("id", "?") if isinstance(data, Mapping) else "?"
        if not isinstance(data, Mapping):
            raise UsageError(f"known bugs: entry {name!r} is not an object")
        missing = [k for k in REQUIRED if not data.get(k)]
        if missing:
            raise UsageError(f"known bugs: entry {name!r} lacks {', '.join(missing)}")
        for key in ("id", "link", "library", "buggy", "fixed", "script", "model"):
            if not isinstance(data[key], str):
                raise UsageError(f"known bugs: {name}: {key!r} must be a string")
        if not str(data["link"]).startswith("https://"):
            raise UsageError(f"known bugs: {name}: link {data['link']!r} is not a URL")
        where = data["where"]
        if not isinstance(where, Mapping) or not isinstance(where.get("operator"), str):
            raise UsageError(f"known bugs: {name}: 'where' needs an 'operator' (ONNX op type)")
        direction = data.get("direction", "fix")
        if direction not in DIRECTIONS:
            raise UsageError(f"known bugs: {name}: direction must be one of {DIRECTIONS}")
        if data["buggy"] == data["fixed"]:
            raise UsageError(f"known bugs: {name}: buggy and fixed are the same release")
        model = str(data["model"])
        if not (model.startswith("onnx:") or ".py:" in model):
            raise UsageError(f"known bugs: {name}: model must be FILE.py:FUNCTION or onnx:NAME")
        return cls(
            id=str(data["id"]),
            link=str(data["link"]),
            library=str(data["library"]),
            buggy=str(data["buggy"]),
            fixed=str(data["fixed"]),
            script=str(data["script"]),
            model=model,
            where={str(k): str(v) for k, v in where.items()},
            configuration=str(data.get("configuration", "")),
            libs=str(data.get("libs", "all")),
            direction=str(direction),
            needs=tuple(str(n) for n in data.get("needs", ())),
            title=str(data.get("title", "")),
            run_options=tuple(str(o) for o in data.get("run_options", ())),
        )


@dataclass(frozen=True)
class KnownBugs:
    """The whole file: the benchmark's bugs plus the ones tried and left out.

    Attributes:
        bugs: The verified bugs, in file order.
        not_reproduced: Tried here, did not show (``id``, ``link``, ``tried``).
        out_of_reach: Need what this machine lacks (``id``, ``link``, ``reason``).
        source: The file read.
    """

    bugs: tuple[KnownBug, ...]
    not_reproduced: tuple[dict[str, Any], ...] = ()
    out_of_reach: tuple[dict[str, Any], ...] = ()
    source: Path | None = field(default=None, compare=False)

    def get(self, bug_id: str) -> KnownBug:
        """The bug ``bug_id``.

        Raises:
            UsageError: No such bug (the known ids listed).
        """
        for bug in self.bugs:
            if bug.id == bug_id:
                return bug
        raise UsageError(f"known bugs: no bug {bug_id!r} (known: {', '.join(self.ids)})")

    @property
    def ids(self) -> list[str]:
        """The bugs' ids, in file order."""
        return [b.id for b in self.bugs]


def installed_version(library: str) -> str | None:
    """The release of ``library`` installed in this environment (``None``: not installed or
    unknown), read from its distribution's metadata: nothing is imported.
    """
    from importlib.metadata import PackageNotFoundError, version

    from anpred.library.descriptor import get_library

    try:
        distributions = get_library(library).distributions
    except UsageError:
        return None
    for dist in distributions:
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def is_known_bugs_file(path: str | Path | None) -> bool:
    """Whether ``path`` is a known-bugs file (a JSON object with :data:`KEY`), not a grid."""
    if not path:
        return False
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError, RecursionError):
        return False  # the grid reader says what is wrong with it
    return isinstance(data, dict) and KEY in data


def parse_known_bugs(data: Any, source: Path | None = None) -> KnownBugs:
    """Check and read a known-bugs document (the parsed JSON).

    Raises:
        UsageError: Not a known-bugs document, a bad entry, or a repeated id.
    """
    if not isinstance(data, dict) or not isinstance(data.get(KEY), list) or not data[KEY]:
        raise UsageError(f"known bugs: expected an object with a non-empty {KEY!r} list")
    bugs = tuple(KnownBug.from_dict(entry) for entry in data[KEY])
    seen: set[str] = set()
    for bug in bugs:
        if bug.id in seen:
            raise UsageError(f"known bugs: id {bug.id!r} appears twice")
        seen.add(bug.id)
    others = []
    for key in ("not_reproduced", "out_of_reach"):
        entries = data.get(key, [])
        if not isinstance(entries, list) or not all(
            isinstance(e, dict) and e.get("id") and e.get("link") for e in entries
        ):
            raise UsageError(f"known bugs: {key!r} must be a list of objects with id and link")
        others.append(tuple(entries))
    return KnownBugs(bugs, others[0], others[1], source)


def load_known_bugs(path: str | Path) -> KnownBugs:
    """Read ``configs/known-bugs.json`` (or another file of the same form).

    Raises:
        UsageError: Missing file, bad JSON, or a bad document (one line).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise UsageError(f"known bugs: cannot read {path}: {err.strerror}") from None
    except ValueError as err:
        raise UsageError(f"known bugs: {path} is not JSON: {err}") from None
    return parse_known_bugs(data, path)


def _flagged_anchors(summary: Summary, participant: str) -> list[str]:
    """The anchors where ``participant`` has findings, in topological order."""
    flagged = {f.anchor for f in summary.findings if f.participant == participant}
    return [a for a in summary.anchor_keys if a in flagged]


def _named_operator(summary: Summary, participant: str) -> tuple[str | None, str | None]:
    """The op type and node the drill-down named for ``participant`` (first flagged stage)."""
    if summary.drill is None:
        return None, None
    for target in summary.drill.targets:
        if target.participant == participant and target.named_op is not None:
            return target.named_op.op_type, target.named_op.node
    return None, None


def score_bug(bug: KnownBug, buggy: Summary, fixed: Summary) -> dict[str, Any]:
    """One row of the known-bugs table: how anpred and each baseline did on ``bug``.

    Args:
        bug: The bug.
        buggy: Summary of the run with ``LIB@BUGGY`` among the participants.
        fixed: Summary of the run with ``LIB@FIXED`` instead.

    Returns:
        ``judged`` (the buggy release was compared with the fp64 reference at all: not when
        the reference failed), ``failed_participants`` (``name: message``), ``detected``
        (the buggy release has findings), ``library_blamed`` (blamed alone by
        consensus on at least half the inputs, as for injected faults), ``blamed_jointly``
        (blamed on at least half, possibly with another participant that deviates the same
        way: two libraries may share a bug), ``first_anchor``
        (its first flagged anchor), ``stage_ok`` (that anchor is ``where.stage``; ``None``
        when the entry names no stage), ``operator`` / ``node`` (what the drill-down named),
        ``operator_ok``, ``false_findings_fixed`` (anchors flagged for the fixed release),
        ``others_flagged`` (other participants flagged beside the buggy one), output errors
        against fp64, and per baseline ``baseline:<name>`` (fails the buggy release on an
        input where it passes the fixed one) and ``baseline_fp:<name>`` (fails the fixed one).
    """
    bp, fp = bug.buggy_participant, bug.fixed_participant
    flagged = _flagged_anchors(buggy, bp)
    blame = buggy.localization.blame
    op_type, node = _named_operator(buggy, bp)
    expected_stage = bug.where.get("stage")
    output = buggy.anchor_keys[-1] if buggy.anchor_keys else None
    judged = any(v is not None for v in buggy.deviation.vs_fp64.get(bp, {}).values())
    failed = [f"{p.participant}: {p.message}" for p in buggy.participants
              if p.status.value != "ok"]  # fmt: skip
    row: dict[str, Any] = {
        "id": bug.id,
        "judged": judged,
        "failed_participants": failed,
        "library": bug.library,
        "buggy": bp,
        "fixed": fp,
        "model": bug.model,
        "operator_known": bug.where["operator"],
        "detected": bool(flagged),
        "library_blamed": blame.sole_counts.get(bp, 0) / max(1, blame.n_inputs) >= 0.5,
        "blamed_jointly": blame.counts.get(bp, 0) / max(1, blame.n_inputs) >= 0.5,
        "first_anchor": flagged[0] if flagged else None,
        "flagged_anchors": flagged,
        "stage_ok": (flagged[0] == expected_stage) if expected_stage and flagged else None,
        "operator": op_type,
        "node": node,
        "operator_ok": op_type == bug.where["operator"] if op_type else False,
        "false_findings_fixed": len(_flagged_anchors(fixed, fp)),
        "others_flagged": sorted({f.participant for f in buggy.findings} - {bp}),
        "output_rel_l2_buggy": buggy.deviation.vs_fp64.get(bp, {}).get(output),
        "output_rel_l2_fixed": fixed.deviation.vs_fp64.get(fp, {}).get(output),
    }
    for name in sorted(set(buggy.baselines) | set(fixed.baselines)):
        failed_buggy = buggy.failed_inputs(name, bp)
        failed_fixed = fixed.failed_inputs(name, fp)
        row[f"baseline:{name}"] = bool(failed_buggy - failed_fixed)
        row[f"baseline_fp:{name}"] = bool(failed_fixed)
    return row


def bug_outcome(row: Mapping[str, Any]) -> str:
    """A row in a few words (the campaign's progress line)."""
    if row.get("judged") is False:
        first = (row.get("failed_participants") or ["?"])[0]
        verdict = f"no verdict (not judged: {first})"
    elif not row.get("detected"):
        verdict = "missed by anpred"
    else:
        verdict = (
            f"detected at {row['first_anchor']} (library blamed "
            f"{'yes' if row['library_blamed'] else 'no'}, operator "
            f"{row['operator'] or 'not named'})"
        )
    baselines = [v for k, v in row.items() if k.startswith("baseline:")]
    false = row.get("false_findings_fixed", 0)
    return (
        f"{verdict}; {sum(bool(v) for v in baselines)}/{len(baselines)} baselines flag it; "
        f"{false} false finding(s) on the fixed release"
    )
