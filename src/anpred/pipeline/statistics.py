"""A run's per-anchor sufficient statistics: the streaming pass's records, on disk.

:func:`~anpred.pipeline.evidence.collect` reads every capture once and returns small
records (:class:`~anpred.pipeline.evidence.RunEvidence`). Everything the analysis does
after that pass (judging, localization, characterization, baselines' verdicts) needs only
those records, so a run whose captures were pruned (``--keep-captures needed``) is judged
again from them, with the same numbers. What they cannot give: metrics the run did not
compute, another alignment, or anything a changed metric implementation would measure
differently; those need the captures (``--keep-captures all``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from anpred.analysis.oracle import AnchorEvidence, Deviation
from anpred.errors import DamagedRunError
from anpred.library.precision import FP32
from anpred.pipeline.evidence import RunEvidence
from anpred.store import RunStore
from anpred.store.pruning import (
    read_chunk_statistics,
    read_statistics,
    statistics_path,
    write_chunk_statistics,
    write_statistics,
)


def _plain(value: Any) -> Any:
    """JSON-ready: numpy scalars to Python (exactly: ``item()``), containers recursively."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        return value.item()
    return value


def _deviation_record(d: Deviation) -> dict[str, Any]:
    record = {
        "participant": d.participant,
        "metrics": _plain(dict(d.metrics)),
        "vs_fp64": _plain(dict(d.vs_fp64)),
        "non_finite": int(d.non_finite),
    }
    if d.precision != FP32:  # fp32 records stay as they were before classes existed
        record["precision"] = d.precision
    return record


def _evidence_record(e: AnchorEvidence) -> dict[str, Any]:
    record = {
        "input": e.input_id,
        "participants": e.participants,
        "noise_floor": _plain(dict(e.noise_floor)),
        "consensus_vs_fp64": _plain(dict(e.consensus_vs_fp64)),
        "deviations": [_deviation_record(d) for d in e.deviations],
    }
    if e.class_floors:
        record["class_floors"] = _plain({c: dict(f) for c, f in e.class_floors.items()})
    return record


def _evidence(anchor: str, record: Mapping[str, Any]) -> AnchorEvidence:
    input_id = record["input"]
    return AnchorEvidence(
        anchor,
        input_id,
        tuple(
            Deviation(
                d["participant"],
                anchor,
                input_id,
                d["metrics"],
                d["vs_fp64"],
                d["non_finite"],
                d.get("precision", FP32),
            )
            for d in record["deviations"]
        ),
        record["noise_floor"],
        record["participants"],
        record["consensus_vs_fp64"],
        record.get("class_floors", {}),
    )


def to_record(ev: RunEvidence) -> dict[str, Any]:
    """The streaming pass's records as JSON-ready data (tuple keys become lists)."""
    return {
        "evidence": {a: [_evidence_record(e) for e in es] for a, es in ev.evidence.items()},
        "baselines": _plain(ev.baselines),
        "introduced": [[p, i, _plain(v)] for (p, i), v in ev.introduced.items()],
        "dimension": [[p, a, i, _plain(v)] for (p, a, i), v in ev.dimension.items()],
        "alignment": _plain(ev.alignment),
        "unaligned": _plain(ev.unaligned),
        "observer": _plain(ev.observer),
    }


def from_record(record: Mapping[str, Any]) -> RunEvidence:
    """The inverse of :func:`to_record`."""
    return RunEvidence(
        evidence={a: [_evidence(a, e) for e in es] for a, es in record["evidence"].items()},
        baselines=record["baselines"],
        introduced={(p, i): v for p, i, v in record["introduced"]},
        dimension={(p, a, i): v for p, a, i, v in record["dimension"]},
        alignment=record["alignment"],
        unaligned=record["unaligned"],
        observer=record["observer"],
    )


def save(
    store: RunStore,
    ev: RunEvidence,
    metrics: Sequence[str],
    participants: Sequence[str],
    input_ids: Sequence[str],
) -> None:
    """Write the run's statistics: the pass's records, the metrics it computed, and the
    participants and inputs it covered.
    """
    write_statistics(store, _file_record(ev, metrics, participants, input_ids))


def _file_record(
    ev: RunEvidence,
    metrics: Sequence[str],
    participants: Sequence[str],
    input_ids: Sequence[str],
) -> dict[str, Any]:
    return {
        "metrics": list(metrics),
        "participants": list(participants),
        "inputs": list(input_ids),
        **to_record(ev),
    }


def merge(parts: Sequence[RunEvidence], input_ids: Sequence[str]) -> RunEvidence:
    """One run's records from those of disjoint sets of its inputs, as one streaming pass
    over all of them in ``input_ids``' order would have gathered them (it handles one
    input at a time: records are per input, and the first alignment seen is kept).
    """
    order = {i: k for k, i in enumerate(input_ids)}

    def first_input(ev: RunEvidence) -> int:
        inputs = [e.input_id for es in ev.evidence.values() for e in es]
        inputs += [str(u.get("input")) for u in ev.unaligned] + list(ev.baselines)
        return min((order.get(i, len(order)) for i in inputs), default=len(order))

    merged = RunEvidence()
    for ev in sorted(parts, key=first_input):
        for anchor, records in ev.evidence.items():
            merged.evidence.setdefault(anchor, []).extend(records)
        merged.baselines.update(ev.baselines)
        merged.introduced.update(ev.introduced)
        merged.dimension.update(ev.dimension)
        for participant, anchors in ev.alignment.items():
            for anchor, steps in anchors.items():
                merged.alignment.setdefault(participant, {}).setdefault(anchor, steps)
        merged.unaligned.extend(ev.unaligned)
        for participant, records in ev.observer.items():
            merged.observer.setdefault(participant, {}).update(records)
    for records in merged.evidence.values():
        records.sort(key=lambda e: order.get(e.input_id, len(order)))
    return merged


def save_chunk(
    store: RunStore,
    ev: RunEvidence,
    metrics: Sequence[str],
    participants: Sequence[str],
    input_ids: Sequence[str],
) -> None:
    """Write the statistics of one chunk of a run's inputs (see :func:`save`)."""
    write_chunk_statistics(store, input_ids, _file_record(ev, metrics, participants, input_ids))


def load_chunks(store: RunStore) -> list[tuple[RunEvidence, tuple[str, ...], list[str], list[str]]]:
    """The statistics of every chunk of the run analysed so far, as :func:`load` gives them.

    Raises:
        DamagedRunError: A chunk's file is unreadable.
    """
    return [_parts(record, store) for record in read_chunk_statistics(store)]


def _parts(
    record: Mapping[str, Any], store: RunStore
) -> tuple[RunEvidence, tuple[str, ...], list[str], list[str]]:
    try:
        return (
            from_record(record),
            tuple(record["metrics"]),
            list(record["participants"]),
            list(record["inputs"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise DamagedRunError(
            statistics_path(store), f"not the statistics of a run ({err.__class__.__name__})"
        ) from None


def load(store: RunStore) -> tuple[RunEvidence, tuple[str, ...], list[str], list[str]]:
    """The run's statistics: records, metrics, participants and inputs covered.

    Raises:
        DamagedRunError: The file is unreadable.
    """
    return _parts(read_statistics(store), store)
