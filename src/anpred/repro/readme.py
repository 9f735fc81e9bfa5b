"""A reproducer's ``README.md``: what is wrong, where, on what, how to see it, the numbers."""

from __future__ import annotations

from pathlib import Path

from anpred.store.repro_record import ReproRecord, Status


def _g(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def title_of(record: ReproRecord) -> str:
    """One sentence: what is wrong."""
    config = f" with {record.settings}" if record.settings else ""
    return (
        f"{record.library}{config} computes {record.op_type} ({record.node}) with a relative "
        f"error of {_g(record.case_error)} against the exact (fp64) result, "
        f"{_g(_times(record))}x what a correct implementation of its precision gives."
    )


def _times(record: ReproRecord) -> float | None:
    floor = record.floor.get("floor") if record.floor else None
    if not floor or record.case_error is None:
        return None
    return record.case_error / floor


def _bisect_lines(record: ReproRecord) -> list[str]:
    b = record.bisect
    if not b:
        return []
    lines = ["## The setting that causes it", ""]
    if b.get("cause"):
        flips = ", ".join(f"`{k}`: {v['from']!r} → {v['to']!r}" for k, v in b["cause"].items())
        lines.append(f"The error disappears when {flips} (the smallest set of the library's "
                     f"switches that does it; {b.get('runs', 0)} runs).")  # fmt: skip
        if any(t.get("remains_above_threshold") and t["flipped"] == {k: v["to"] for k, v in
               b["cause"].items()} for t in b.get("trials", [])):  # fmt: skip
            lines.append("What remains is smaller by more than the symptom factor but still "
                         "above the threshold: another, smaller error.")  # fmt: skip
    else:
        lines.append(f"No set of the library's declared switches (at most "
                     f"{b.get('max_size', 0)} at a time) makes it disappear: "
                     f"{b.get('reason', '')}")  # fmt: skip
    lines += ["", "| switches flipped | error | shows the error |", "| --- | --- | --- |"]
    for trial in b.get("trials", []):
        flipped = ", ".join(f"{k}={v!r}" for k, v in trial["flipped"].items()) or "(none)"
        lines.append(f"| {flipped} | {_g(trial.get('error'))} | {trial.get('shows')} |")
    return [*lines, ""]


def write_readme(folder: Path, record: ReproRecord) -> None:
    """Write ``folder/README.md`` for ``record``."""
    floor = record.floor or {}
    script = record.script or {}
    machine = record.machine or {}
    versions = record.versions or {}
    status = {
        Status.VERIFIED: "**Verified**: the script below was run in the library's own "
        "environment and showed the error.",
        Status.NOT_REPRODUCED: f"**Not reproduced by the script**: {record.reason}. The "
        "reduced case shows the error under anpred's oracle, but this folder is not a "
        "standalone reproducer.",
        Status.NO_SCRIPT: f"**No script**: {record.reason}.",
        Status.NO_CASE: f"**No reproducer**: {record.reason}.",
    }[record.status]
    converter = (f", converted by {versions.get('converter')} {versions.get('converter_version')}"
                 if versions.get("converter") else "")  # fmt: skip
    lines = [
        f"# {record.finding}: {record.op_type} ({record.library})",
        "",
        title_of(record) if record.case_error is not None else f"{record.finding}: {status}",
        "",
        status,
        "",
        "## Run it",
        "",
        "```bash",
        script.get("command", "(no script)"),
        "```",
        "",
        f"- library: {record.library} {versions.get('library')}{converter}; "
        f"configuration settings: `{record.settings}`",
        f"- CPU: {machine.get('cpu')} ({machine.get('arch')}, {machine.get('cores')} cores); "
        f"numeric features: {', '.join(machine.get('features', [])) or 'none'}; "
        f"bf16 arithmetic: {machine.get('bf16_arithmetic')}, fp16 arithmetic: "
        f"{machine.get('fp16_arithmetic')}",
        "",
        "## Measured",
        "",
        "| | relative L2 error vs fp64 |",
        "| --- | --- |",
        f"| the script ({script.get('name', '–')}), median over inputs "
        f"| {_g(script.get('error'))} |",
        f"| the reduced case under anpred | {_g(record.case_error)} |",
        f"| the drill-down (original finding) | {_g(record.original_error)} |",
        f"| floor: {floor.get('reference', '–')} | {_g(floor.get('floor'))} |",
        f"| threshold ({floor.get('factor', '–')} x floor) | {_g(floor.get('threshold'))} |",
        "",
        f"Inputs: {', '.join(floor.get('inputs', []))} (the fp64 reference's values of the "
        "operator's inputs on those inputs of the run, rounded to float32).",
        "",
        "## Where it comes from",
        "",
        f"Finding `{record.finding}`: the drill-down named operator {record.op} "
        f"(`{record.node}`, {record.op_type}) of stage `{record.stage}` (basis: "
        f"{record.basis}). The reproducer holds {record.ops_in_case} of the model's "
        f"{record.ops_in_model} operators (the stage has {record.ops_in_stage}); "
        f"{'no operator can be removed' if record.minimal else 'not shown minimal'}; "
        f"{record.cases_tried} cases judged in {record.rounds} rounds.",
        "",
        *(
            [
                "This participant carries a fault injected by `anpred inject` (the run's "
                "ground truth), not an error of the library itself.",
                "",
            ]
            if "!" in record.participant
            else []
        ),
        *_bisect_lines(record),
        "Files: `model.onnx` (inputs `x0`.., output `y`), `inputs.npz`, `expected_fp64.npz`, "
        "`floor.json`, the script, `repro.json` (everything above as data).",
        "",
    ]
    (folder / "README.md").write_text("\n".join(lines))
