"""Streaming pass over a run's captures: align, assess, isolate — one input at a time.

Each (participant, input) capture file is opened lazily (``np.load`` on ``.npz`` reads one
array per access), so memory holds one anchor of every participant at a time, never a
whole run. The pass returns small records only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from anpred.analysis import onepass
from anpred.analysis.alignment import AlignmentError, align
from anpred.analysis.oracle import AnchorEvidence, OracleParams, assess
from anpred.errors import UsageError
from anpred.library.precision import ideal_class
from anpred.localization._plain import plain_float
from anpred.localization.dimension import (
    difference_profile,
    dimension_profile,
    elementwise_error,
)
from anpred.localization.stage_error import IntroducedErrors
from anpred.participants import REFERENCE32, REFERENCE64, precision_classes
from anpred.progress import Say
from anpred.store import CAPTURE, ISOLATED, CaptureFile, RunStore


@dataclass
class RunEvidence:
    """What the streaming pass collects (all small)."""

    evidence: dict[str, list[AnchorEvidence]] = field(default_factory=dict)
    baselines: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    introduced: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    dimension: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    alignment: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    unaligned: list[dict[str, str]] = field(default_factory=list)
    observer: dict[str, dict[str, Any]] = field(default_factory=dict)


def _dimension_record(x: np.ndarray, ref: np.ndarray) -> dict[str, Any] | None:
    """The dimension-profile numbers the analysis keeps of one aligned capture.

    The fields of :meth:`DimensionProfile.to_dict` it keeps, read off the profile without
    converting its per-channel array (measured: a third of this function's time went to
    that conversion and to checking the error tensor four times).
    """
    if x.ndim < 2 or x.shape[1] < 2:
        return None
    axis = 1 if x.ndim != 3 or x.shape[1] > x.shape[2] or x.ndim == 4 else -1
    loops = onepass.kernels()  # the compiled loops when this pass uses them
    try:
        if loops is None:
            profile = dimension_profile(elementwise_error(x, ref), channel_axis=axis)
        else:
            profile = difference_profile(x, ref, loops, channel_axis=axis)
    except UsageError:  # x (or the reference) not finite: no profile
        return None
    return {
        "top_channel_share": plain_float(profile.top_channel_share),
        "border_interior_ratio": plain_float(profile.border_interior_ratio),
        "top_channels": list(profile.top_channels),
    }


def collect(
    run_dir: Path,
    participants: Sequence[str],
    reference64: str,
    reference32: str,
    anchors: Sequence[str],
    input_ids: Sequence[str],
    params: OracleParams,
    say: Say,
    own: frozenset[str] | None = None,
    known: RunEvidence | None = None,
) -> RunEvidence:
    """Align and assess every (anchor, input); gather stage-isolation and dimension data.

    Every participant is judged within its declared precision class
    (:func:`~anpred.participants.precision_classes`); the ideal references of the reduced
    classes (``torch[ideal-bf16]``) are among ``participants`` and give those classes'
    floors. The output-level baselines judge the participants, not the ideal references.

    ``own`` (``None``: every participant): the participants whose own records (dimension
    records, introduced errors, baseline verdicts: each a function of the participant's
    captures and the references' alone) this pass computes; the others' are ``known``'s,
    which must hold them (a fault run's clean run, whose files the other participants'
    captures are, :mod:`anpred.evaluation.fault_analysis`). Their isolated captures are
    not read.
    """
    result = RunEvidence(evidence={a: [] for a in anchors})
    classes = precision_classes(participants)
    store = RunStore(run_dir)
    # the compiled loops read float32 captures as they are: no float64 copy to round back
    narrow = onepass.kernels() is not None
    ref_folder = store.participant(reference64)
    for index, input_id in enumerate(input_ids):
        say(f"  analyse input {index + 1}/{len(input_ids)}: {input_id}")
        ref = ref_folder.open_capture(input_id, CAPTURE)
        if ref is None:
            result.unaligned.append({"input": input_id, "reason": "no fp64 reference capture"})
            continue
        opened: dict[str, CaptureFile | None] = {
            p: store.participant(p).open_capture(input_id, CAPTURE) for p in participants
        }
        isolated = {
            p: store.participant(p).open_capture(input_id, ISOLATED)
            for p in participants
            if own is None or p in own
        }
        present = {p: c for p, c in opened.items() if c is not None}
        files = _file_keys(present, ref, own)  # once per input, not per anchor
        for p, c in present.items():
            result.observer.setdefault(p, {})[input_id] = c.meta.get("observer")
        try:
            for anchor in anchors:
                fp64 = np.asarray(ref[anchor], dtype=np.float64)  # read fresh: no copy
                aligned: dict[str, np.ndarray] = {}
                introduced: IntroducedErrors | None = None  # the reference's norm, once
                for p, c in present.items():
                    try:
                        a = align(
                            c[anchor],
                            fp64.shape,
                            c.layout(anchor),
                            reference=fp64,
                            keep_float32=narrow,
                        )
                    except AlignmentError as err:
                        result.unaligned.append(
                            {
                                "participant": p,
                                "anchor": anchor,
                                "input": input_id,
                                "reason": str(err),
                            }
                        )
                        continue
                    aligned[p] = a.values
                    result.alignment.setdefault(p, {}).setdefault(anchor, list(a.steps))
                    if own is not None and p not in own:
                        _known_records(result, known, p, anchor, input_id)
                        continue
                    dim = _dimension_record(a.values, fp64)
                    if dim is not None:
                        result.dimension[(p, anchor, input_id)] = dim
                    iso = isolated.get(p)
                    if iso is not None:
                        # float32 kept: the introduced error is summed in float64 by blocks
                        xi = align(
                            iso[anchor], fp64.shape, iso.layout(anchor), keep_float32=True
                        ).values
                        introduced = introduced or IntroducedErrors(fp64)
                        result.introduced.setdefault((p, input_id), {})[anchor] = introduced(xi)
                if reference32 not in aligned or len(aligned) < 2:
                    result.unaligned.append(
                        {
                            "anchor": anchor,
                            "input": input_id,
                            "reason": "fewer than two participants or no fp32 reference",
                        }
                    )
                    continue
                stages = {p: result.introduced.get((p, input_id), {}) for p in aligned}
                result.evidence[anchor].append(
                    assess(
                        anchor,
                        input_id,
                        aligned,
                        aligned[reference32],
                        fp64,
                        params=params,
                        classes=classes,
                        introduced={p: s[anchor] for p, s in stages.items() if anchor in s},
                        sort_keys=None
                        if files is None
                        else {p: (*k, anchor) for p, k in files.items()},
                    )
                )
                if anchor == anchors[-1]:
                    judged = {p: x for p, x in aligned.items() if ideal_class(p) is None}
                    if own is None:
                        verdicts = _judge_baselines(judged, aligned[reference32], fp64)
                    else:
                        verdicts = _own_baselines(
                            judged, aligned[reference32], fp64, own, known, input_id
                        )
                    result.baselines[input_id] = verdicts
        finally:
            ref.close()
            for c in list(present.values()) + [i for i in isolated.values() if i is not None]:
                c.close()
    return result


def _file_keys(
    present: Mapping[str, CaptureFile], ref: CaptureFile, own: frozenset[str] | None
) -> dict[str | None, tuple[str, int]] | None:
    """In a fault run's pass (``own`` given: the others' captures are the clean run's
    files), what identifies the others' and the fp64 reference's (``None``) capture files:
    their real path and version. With an anchor, the key under which their sorted values
    there are kept from one fault run to the next (:mod:`anpred.analysis.sorted_cache`).
    """
    if own is None:
        return None

    def key(capture: CaptureFile) -> tuple[str, int]:
        return (os.path.realpath(capture.path), capture.path.stat().st_mtime_ns)

    keys: dict[str | None, tuple[str, int]] = {
        p: key(c) for p, c in present.items() if p not in own
    }
    keys[None] = key(ref)
    return keys


def _known_records(
    result: RunEvidence, known: RunEvidence | None, p: str, anchor: str, input_id: str
) -> None:
    """``p``'s dimension record and introduced error at ``anchor`` on ``input_id`` from
    ``known`` into ``result``, where the pass would have put them.
    """
    if known is None:
        raise ValueError(f"no known records of {p}")
    dim = known.dimension.get((p, anchor, input_id))
    if dim is not None:
        result.dimension[(p, anchor, input_id)] = dim
    value = known.introduced.get((p, input_id), {}).get(anchor)
    if value is not None:
        result.introduced.setdefault((p, input_id), {})[anchor] = value


def _own_baselines(
    judged: Mapping[str, np.ndarray],
    fp32: np.ndarray,
    fp64: np.ndarray,
    own: frozenset[str],
    known: RunEvidence | None,
    input_id: str,
) -> dict[str, dict[str, Any]]:
    """:func:`_judge_baselines` of ``judged``, in its order: ``own``'s judged, the others'
    verdicts ``known``'s (each baseline judges each participant's output on its own).
    """
    verdicts = _judge_baselines({p: x for p, x in judged.items() if p in own}, fp32, fp64)
    if len(own.intersection(judged)) == len(judged):
        return verdicts
    if known is None:
        raise ValueError(f"no known verdicts on {input_id}")
    theirs = known.baselines[input_id]
    return {m: {p: v[p] if p in own else theirs[m][p] for p in judged} for m, v in verdicts.items()}


@dataclass(frozen=True)
class Collection:
    """What a streaming pass collects, but the inputs: two passes of equal collections give
    the same records for an input (:func:`collect` is a function of these and the input).

    Attributes:
        run_dir: The run directory (resolved: the pass may run in other processes).
        participants: The judged participants.
        anchors: Anchor keys in topological order.
        params: Oracle parameters.
        reference64: The fp64 reference participant.
        reference32: The fp32 reference participant.
        own: The participants whose own records the pass computes (``None``: all).
        known: The others' records (:func:`collect`).
    """

    run_dir: Path
    participants: tuple[str, ...]
    anchors: tuple[str, ...]
    params: OracleParams
    reference64: str = REFERENCE64
    reference32: str = REFERENCE32
    own: frozenset[str] | None = None
    known: RunEvidence | None = field(default=None, hash=False)

    @classmethod
    def of(
        cls,
        run_dir: Path,
        participants: Sequence[str],
        anchors: Sequence[str],
        params: OracleParams,
    ) -> Collection:
        """The collection of a run's judged ``participants`` against anpred's references."""
        return cls(Path(run_dir).resolve(), tuple(participants), tuple(anchors), params)

    @property
    def names(self) -> list[str]:
        """Every participant whose captures the pass reads: the fp64 reference first."""
        return [self.reference64, *self.participants]

    def collect(self, input_ids: Sequence[str], say: Say) -> RunEvidence:
        """:func:`collect` of ``input_ids``."""
        return collect(
            self.run_dir, self.participants, self.reference64, self.reference32, self.anchors,
            input_ids, self.params, say, self.own, self.known,
        )  # fmt: skip


def _judge_baselines(
    outputs: Mapping[str, np.ndarray], fp32: np.ndarray, fp64: np.ndarray
) -> dict[str, dict[str, Any]]:
    """Output-level baselines on one input: {method: {participant: statistics}}.

    Judged inside the streaming pass so that no input's outputs outlive it; by
    :func:`~anpred.analysis.baselines.judge_baselines`: ``judge_with_all``'s numbers, what
    several baselines compute of the same outputs computed once.
    """
    from anpred.analysis.baselines import judge_baselines
    from anpred.analysis.methods import method_names

    names = [n for n in method_names() if n != ORACLE_METHOD]
    judged = judge_baselines(outputs, fp32, fp64, names)
    return {m: {p: dict(v.statistics()) for p, v in per.items()} for m, per in judged.items()}


#: Name of the oracle in the method registry (the baselines are all the others).
ORACLE_METHOD = "anpred_oracle"


def observer_summary(records: Mapping[str, Any]) -> dict[str, Any]:
    """Aggregate per-input observer records of one participant."""
    valid = [r for r in records.values() if r]
    diffs = [r["max_abs_diff"] for r in valid if r.get("max_abs_diff") is not None]
    return {
        "inputs": len(valid),
        "identical": all(r.get("identical") for r in valid),
        "max_abs_diff": max(diffs) if diffs else None,
    }
