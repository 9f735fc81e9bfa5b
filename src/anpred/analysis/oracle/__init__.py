"""The consensus-based population deviation oracle.

**Phase 1** (:func:`assess`, one anchor and one input at a time, so memory stays flat):
the aligned captures of all participants are reduced to their consensus, the
element-wise median (robust to one deviant participant; for a distributional metric the
element-wise median of the participants' descriptors). Every participant's deviation
from the consensus is measured with every registered metric, as is its distance from the
fp64 reference. The **noise floor** is the fp32 reference's distance from the fp64
reference: what fp32 execution of the reference model itself costs at this anchor. Phase
1 returns small records only (:class:`AnchorEvidence`).

**Phase 2** (:func:`judge_anchor`, per anchor): the population is every participant's
deviation for every input at that anchor. A deviation ``v`` is a **finding** when it is

* a robust outlier of the population: ``v > median + OUTLIER_K · scale`` with
  ``scale = max(1.4826 · MAD, MAD_FLOOR_REL · median, resolution)``, **and**
* above the noise floor: ``v > factor · max(noise floor, resolution)``,

or when the participant produced non-finite values where the fp64 reference is finite.
The factor is ``NOISE_FACTOR`` (the *fixed* rule) unless ``OracleParams.calibration``
gives the anchor its own, learnt from the spread of clean fp32 implementations on
calibration inputs (:mod:`anpred.calibration.rule`, ``docs/oracle.md``).

**Introduced error** (when stage isolation ran). A stage deep in a model inherits fp32
noise from every stage before it, so its end-to-end noise floor is high (yolov8n: 1e-5 at
the neck) and a fault that adds 5e-5 there stays below ``NOISE_FACTOR`` times it, while
the same fault can show at the output against a floor of 1e-7. Stage isolation runs each
stage on the fp64 reference's stage input, so its error (the *introduced* error) carries
no inherited noise: its floor, the fp32 reference's introduced error, is about 1e-6.
The introduced errors of all participants at an anchor form a second population, judged
by the same rule (robust outlier **and** above ``NOISE_FACTOR`` times the fp32
reference's introduced error); a deviation that passes it is a finding on its own
(:attr:`Criterion.INTRODUCED`). Introduced errors are relative L2 whatever the primary
metric, so they are judged with relative L2's resolution (:data:`INTRODUCED_METRIC`).
Measured on clean fp32 runs (yolov8n and yolov5n with 8 photographs, resnet50 with 2; six
libraries): no participant's introduced error exceeded 2.0 times the fp32 reference's, so
the criterion adds no false positives there; it found the mild mantissa faults (16 and 18
kept bits) at deep YOLO stages, at 16-72 times.

**Primary metric.** Relative L2 decides the verdict: it is scale-free (comparable across
anchors, which propagation profiles need), it aggregates every element (a small
systematic error over many elements counts; one unlucky element does not), its fp32
noise is well understood (it grows like the unit roundoff times a slowly growing function
of the reduction length) and so the fp64 floor calibrates it well. The extreme metrics
(max abs, max ULP) are heavy-tailed and dominated by single elements near zero, cosine is
blind to scale errors (a wrong normalisation epsilon), and the distributional metrics are
blind to element permutations; judging on all of them would multiply false positives.
They are judged by the same rule and reported as corroborating evidence
(:attr:`Verdict.corroborating`).

**Precision classes.** Participants are judged within the precision class their
configuration declares (:mod:`anpred.library.precision`): the consensus, the population
and the noise floor above are those of the **fp32** class (the fp32 reference's and every
other fp32 participant's), so a bf16 configuration's spread never raises an fp32
library's threshold. A **reduced-precision** class (``bf16``, ``fp16``, ...) is judged
against its **ideal reference** (the fp64 model with operator results rounded to the
format, :mod:`anpred.translate.torch.emulation`): a member's deviation is its distance from
the fp64 reference, the class's floor is the ideal reference's distance from it (the error
of correct arithmetic of that format), and a deviation is above noise when it exceeds
``CLASS_FACTOR`` (or the anchor's calibrated class factor) times that floor. A class of
three or more members also needs the deviation to be a robust outlier of the class's
population (the rule above); a smaller class is judged by its floor alone. Introduced
errors are judged per class the same way (the ideal reference's own introduced error is
the class's floor). A class whose ideal reference has no capture is not judged (the run
says so).

**Where the other metrics are computed.** Only the primary metric decides, so only its
numbers (against the consensus and the fp64 reference, the noise floor, the consensus
against fp64) are computed at every (anchor, input): the *verdict path*. The other metrics
corroborate; they are computed, with the values they have when computed everywhere, for
every participant of a precision class at an (anchor, input) where one member is a
**candidate**: its primary deviation above its noise threshold, non-finite values, or an
introduced error above its own (the test of :func:`noise_candidates`; every finding is a
candidate). Elsewhere they are absent from the records (``Deviation.metrics`` holds the
primary alone, ``deviations.parquet`` has an empty cell), and their populations are those
of the cells where they were computed. ``OracleParams.metrics_scope = "all"`` (``anpred
run --metrics all``) computes them everywhere, as before; it changes no verdict.

**Two participants.** With two participants the consensus is their midpoint and both
deviate from it equally, so no population can single one out: the method degenerates to a
pairwise comparison. The verdict then says so (``pairwise=True``); the pair is
inconsistent when its deviation is above the noise floor, and the finding goes to the
participant farther from the fp64 reference.
"""

from __future__ import annotations

from anpred.analysis.oracle.evidence import AnchorEvidence, Deviation, assess
from anpred.analysis.oracle.judge import consensus_oracle, judge_anchor, noise_candidates
from anpred.analysis.oracle.params import (
    CLASS_FACTOR,
    FIXED_RULE,
    INTRODUCED_METRIC,
    MAD_FLOOR_REL,
    MAD_TO_SIGMA,
    METRICS_ALL,
    METRICS_CANDIDATES,
    METRICS_SCOPES,
    NOISE_FACTOR,
    OUTLIER_K,
    PRIMARY_METRIC,
    OracleParams,
)

__all__ = [
    "OUTLIER_K",
    "FIXED_RULE",
    "NOISE_FACTOR",
    "MAD_FLOOR_REL",
    "MAD_TO_SIGMA",
    "PRIMARY_METRIC",
    "CLASS_FACTOR",
    "METRICS_CANDIDATES",
    "METRICS_ALL",
    "METRICS_SCOPES",
    "INTRODUCED_METRIC",
    "OracleParams",
    "Deviation",
    "AnchorEvidence",
    "assess",
    "judge_anchor",
    "noise_candidates",
    "consensus_oracle",
]
