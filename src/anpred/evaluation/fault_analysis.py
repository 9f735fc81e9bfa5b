"""A fault run's analysis reads only what its fault changed.

A fault at stage ``k`` changes nothing its participant computes before ``k``: its anchors
before ``k`` and its stage-isolated anchors before ``k`` are those of the clean
participant it replaces, bit for bit (checked here on every fault run, not assumed: compared
array by array, or, when its worker resumed from the clean participant's captures, read
from its records that they are copies of them, :func:`_copied`). The
streaming pass's records of an anchor are a function of every participant's captures at
that anchor alone (:func:`~anpred.pipeline.evidence.collect`), so the fault run's records
before ``k`` are the clean run's, the clean participant's under the faulty name.
:func:`reuse_clean_records` writes them, with a pass over the anchors from ``k`` on, as
the run's statistics of one chunk covering every input; the run's analysis then merges
them instead of reading captures (:func:`~anpred.pipeline.chunks.chunk_statistics`, the
path a chunked run's analysis takes, whose records are those of one pass,
tests/pipeline/test_chunks.py).

From ``k`` on, a participant's own records (its dimension records and introduced errors,
against the fp64 reference; its output-level baselines' verdicts, against the references'
outputs: :mod:`anpred.analysis.baselines` judges each output on its own) are a function of
its captures and the references' alone: the other participants' are their clean run's
wherever their captures are the clean run's files (linked), so the pass computes the
faulty participant's only and reads no other isolated capture
(:func:`~anpred.pipeline.evidence.collect`'s ``own``). Measured on yolov8n (two inputs,
six libraries and the fp64 reference): the baselines took 0.25-0.37 of a 0.73 CPU s pass
from ``backbone.p5`` on, the dimension records and introduced errors ~12 % of a pass.

The pass runs in this process, whatever ``--parallel``: on yolov8n's two inputs (535 MB of
captures, six libraries and the fp64 reference, issue 41) a pass took 0.69 CPU s here
(after a one-time 0.5 s to load the compiled loops) against ~1.0 in two processes forked
from a kept fork server (fork, pickling and exits; 0.17 s less wall) and ~1.85 from a fork
server started for it. The grids run one or two inputs. A fault at the first stage takes
this path too: no records before it, but the other participants' own records.

Where anything differs (a capture before ``k``, the participants, the metrics or inputs
of the clean run's statistics, an unaligned capture), nothing is written and the analysis
reads every capture, as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from anpred.analysis.oracle import AnchorEvidence, Deviation, OracleParams
from anpred.calibration.stored import with_stored_calibration
from anpred.library.precision import FP32, ideal_class
from anpred.participants import REFERENCE32, REFERENCE64, precision_classes
from anpred.pipeline import statistics
from anpred.pipeline.analyse import participants_of
from anpred.pipeline.collect_pool import collect_inputs
from anpred.pipeline.evidence import Collection, RunEvidence
from anpred.progress import quiet
from anpred.store import CAPTURE, ISOLATED, ParticipantStore, RunStore
from anpred.store.pruning import has_statistics


def reuse_clean_records(base: Path, out: Path, clean: str, faulty: str, stage: str) -> bool:
    """Write the fault run ``out``'s records from the clean run ``base``'s before ``stage``
    and a pass over its captures from ``stage`` on; return whether it did.

    Args:
        base: The clean run.
        out: The fault run (its workers finished).
        clean: The clean participant the faulty one replaces (``onnxruntime``).
        faulty: The faulty participant (``onnxruntime!bf16@backbone.p3``).
        stage: The anchor key of the faulty stage.
    """
    base_store, store = RunStore.open(base), RunStore.open(out)
    if not has_statistics(base_store):
        return False
    anchors = [a["key"] for a in store.read_export()["anchors"]]
    input_ids = store.read_input_ids()
    if stage not in anchors:
        return False
    k = anchors.index(stage)
    params = with_stored_calibration(store, OracleParams())
    _records, names = participants_of(store)
    prior, metrics, covered, inputs = statistics.load(base_store)
    renamed = [faulty if n == clean else n for n in covered]
    if (
        faulty not in names
        or sorted(renamed) != sorted(names)
        or list(metrics) != list(params.metric_names())
        or list(inputs) != list(input_ids)
        or prior.unaligned
    ):
        return False
    before = anchors[:k]
    clean_store, faulty_store = base_store.participant(clean), store.participant(faulty)
    if (
        before
        and not _copied(clean_store, faulty_store, before, input_ids)
        and not _same_captures(clean_store, faulty_store, before, input_ids)
    ):
        return False
    collection = Collection.of(store.root, names, anchors[k:], params)
    if _others_are_clean(base_store, store, prior, clean, faulty, names, input_ids):
        collection = replace(collection, own=frozenset((faulty,)), known=prior)
    try:
        new = collect_inputs(collection, input_ids, quiet)  # here: see above
    except KeyError:  # the clean run judged a baseline that is not registered now
        return False
    if new.unaligned:
        return False
    ev = _spliced(prior, new, clean, faulty, names, anchors, k, input_ids)
    statistics.save_chunk(store, ev, metrics, names, input_ids)
    return True


def _others_are_clean(
    base: RunStore,
    store: RunStore,
    prior: RunEvidence,
    clean: str,
    faulty: str,
    names: Sequence[str],
    input_ids: Sequence[str],
) -> bool:
    """Whether the fault run's participants but ``faulty`` have their clean run's own
    records: their captures, and the fp64 reference's, are the clean run's files, the
    clean run judged the baselines on every input, and ``faulty`` replaces no reference
    (the fp32 reference's output is the baselines' reference).
    """
    if clean == REFERENCE32 or any(i not in prior.baselines for i in input_ids):
        return False
    for p in (REFERENCE64, *names):
        if p == faulty:
            continue
        here, there = store.participant(p).folder, base.participant(p).folder
        if not (here.exists() and there.exists() and os.path.samefile(here, there)):
            return False
    return True


def _copied(
    clean: ParticipantStore, faulty: ParticipantStore, anchors: Sequence[str], inputs: Sequence[str]
) -> bool:
    """Whether ``faulty``'s worker copied its captures at ``anchors`` from ``clean``'s: its
    status says it resumed from ``clean``'s folder and recomputed none of ``anchors``
    (anchored or isolated), and each of its captures (anchored and isolated, on every input)
    is a resumed one, ``clean`` having the same. A resumed capture holds the clean capture's
    arrays and layouts at every anchor it did not recompute (:mod:`anpred.execution.resumed`,
    tests/execution/test_resumed.py), so comparing them (:func:`_same_captures`: yolov8n,
    two inputs, ~0.02 CPU s a fault run, issue 41) would compare copies.
    """
    record = faulty.read_status().get("resume")
    if not isinstance(record, dict) or record.get("unavailable"):
        return False
    source = record.get("from")
    if not (source and Path(source).is_dir() and clean.folder.is_dir()):
        return False
    if not os.path.samefile(source, clean.folder):
        return False
    recomputed = {*record.get("recomputed", ()), *record.get("isolated_recomputed", ())}
    if recomputed & set(anchors):
        return False
    for input_id in inputs:
        for kind in (CAPTURE, ISOLATED):
            done = faulty.capture_done(input_id, kind)
            if done != clean.capture_done(input_id, kind):
                return False
            if done and faulty.read_capture_meta(input_id, kind).get("resumed") is not True:
                return False
    return True


def _same_captures(
    clean: ParticipantStore, faulty: ParticipantStore, anchors: Sequence[str], inputs: Sequence[str]
) -> bool:
    """Whether ``faulty``'s captures and isolated captures at ``anchors`` are ``clean``'s,
    bit for bit and in the same layouts, on every input.
    """
    for input_id in inputs:
        for kind in (CAPTURE, ISOLATED):
            a, b = clean.open_capture(input_id, kind), faulty.open_capture(input_id, kind)
            if a is None or b is None:
                if a is not None or b is not None:
                    return False
                continue
            with a, b:
                for anchor in anchors:
                    if a.layout(anchor) != b.layout(anchor):
                        return False
                    x, y = a[anchor], b[anchor]
                    if x.dtype != y.dtype or not np.array_equal(x, y):
                        return False
    return True


def _spliced(
    prior: RunEvidence,
    new: RunEvidence,
    clean: str,
    faulty: str,
    names: Sequence[str],
    anchors: Sequence[str],
    k: int,
    input_ids: Sequence[str],
) -> RunEvidence:
    """The records one pass over the fault run gathers, in its order: ``prior``'s (the
    clean run's, ``clean`` renamed ``faulty``) before anchor ``k``, ``new``'s from it on.
    """

    def name(p: str) -> str:
        return faulty if p == clean else p

    before = set(anchors[:k])
    evidence = {
        a: [_renamed(e, name, names) for e in prior.evidence.get(a, [])]
        if a in before
        else list(new.evidence.get(a, []))
        for a in anchors
    }
    old_introduced = {(name(p), i): v for (p, i), v in prior.introduced.items()}
    introduced: dict[tuple[str, str], dict[str, float]] = {}
    dimension: dict[tuple[str, str, str], dict[str, object]] = {}
    old_dimension = {(name(p), a, i): v for (p, a, i), v in prior.dimension.items()}
    for i in input_ids:  # the order one pass inserts them: input, anchor, participant
        for a in anchors:
            source_i = old_introduced if a in before else new.introduced
            source_d = old_dimension if a in before else new.dimension
            for p in names:
                value = source_i.get((p, i), {}).get(a)
                if value is not None:
                    introduced.setdefault((p, i), {})[a] = value
                if (p, a, i) in source_d:
                    dimension[(p, a, i)] = source_d[(p, a, i)]
    old_alignment = {name(p): steps for p, steps in prior.alignment.items()}
    alignment: dict[str, dict[str, list[str]]] = {}
    for p in names:
        for a in anchors:
            steps = (old_alignment if a in before else new.alignment).get(p, {}).get(a)
            if steps is not None:
                alignment.setdefault(p, {})[a] = steps
    return RunEvidence(
        evidence=evidence,
        baselines=new.baselines,
        introduced=introduced,
        dimension=dimension,
        alignment=alignment,
        unaligned=[],
        observer=new.observer,
    )


def _renamed(e: AnchorEvidence, name: Callable[[str], str], names: Sequence[str]) -> AnchorEvidence:
    """``e`` with its participants renamed (``name``) and its deviations in the order one
    pass over the fault run gives them: the fp32 group, then each reduced class, in the
    order ``names`` first has them, each in ``names``' order.
    """
    deviations = [
        Deviation(name(d.participant), d.anchor, d.input_id, d.metrics, d.vs_fp64,
                  d.non_finite, d.precision)
        for d in e.deviations
    ]  # fmt: skip
    classes = precision_classes(list(names))
    members = [p for p in names if ideal_class(p) is None]  # the ideal references judge none
    order = list(dict.fromkeys(c for p in members if (c := classes[p]) != FP32))

    def key(d: Deviation) -> tuple[int, int]:
        group = 0 if d.precision == FP32 else 1 + order.index(d.precision)
        return group, list(names).index(d.participant)

    return AnchorEvidence(
        e.anchor,
        e.input_id,
        tuple(sorted(deviations, key=key)),
        e.noise_floor,
        e.participants,
        e.consensus_vs_fp64,
        e.class_floors,
    )
