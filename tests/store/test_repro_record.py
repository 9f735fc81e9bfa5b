"""``repro.json`` and the run's index round-trip; the report links a finding to its folder."""

from __future__ import annotations

from pathlib import Path

from anpred.report.drill import drill_section
from anpred.report.run_summary import RunSummary
from anpred.store.repro_record import ReproRecord, Status, load_reproducers, write_index
from anpred.store.summary_drill import DrillDown, DrillOp, DrillTarget


def _record() -> ReproRecord:
    return ReproRecord(
        finding="tensorflow@stage5.Conv", participant="tensorflow", library="tensorflow",
        settings={}, stage="stage5.Conv", op="op0001", node="n8", op_type="Conv",
        basis="introduced", original_error=1.06e-5, status=Status.VERIFIED,
        folder="tensorflow@stage5.Conv", ops_in_case=1, ops_in_model=22,
        case_nodes=["n8"], minimal=True,
    )  # fmt: skip


def test_the_index_round_trips(tmp_path: Path) -> None:
    assert load_reproducers(tmp_path) == []
    write_index(tmp_path, [_record()])
    [back] = load_reproducers(tmp_path)
    assert back == _record() and back.verified
    assert back.reduction_ratio == 1 / 22
    assert back.to_dict()["reduction_ratio"] == 1 / 22


def test_the_drill_down_section_links_the_reproducer() -> None:
    op = DrillOp("op0001", "n8", "Conv", None, 1.06e-5, 7e-6, True, 1.06e-5, True)
    drill = DrillDown((DrillTarget("tensorflow", "stage5.Conv", (op,), "op0001", "introduced"),))
    view = RunSummary({"drill": drill.to_dict()})
    assert "Reproducer" not in drill_section(view)
    view.reproducers = {"tensorflow@stage5.Conv": {**_record().to_dict(),
                        "path": "repro/tensorflow@stage5.Conv/README.md"}}  # fmt: skip
    html = drill_section(view)
    assert 'href="repro/tensorflow@stage5.Conv/README.md"' in html
    assert "Reproducer (verified): 1 of 22 operators" in html
