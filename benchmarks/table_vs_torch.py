"""Print, per participant, the max relative L2 from torch (fp32) at the output and worst anchor.

Usage: ``python benchmarks/table_vs_torch.py RUN_DIR [RUN_DIR ...]`` (Markdown table).
Reads the captures of finished ``anpred run`` directories; aligns them like the oracle does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from anpred.analysis.alignment import align
from anpred.store import RunStore
from anpred.store.files import PrunedCaptureError


def rel_l2(x: np.ndarray, ref: np.ndarray) -> float:
    """Relative L2 distance in float64."""
    return float(np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-300))


def table(run_dir: Path) -> list[str]:
    """Rows of the table for one run directory."""
    store = RunStore.open(run_dir)
    anchors = [a["key"] for a in store.read_export()["anchors"]]
    inputs = store.read_input_ids()
    names = [p for p in store.read_participants() if p not in ("torch[fp64]",)]
    rows = []
    for name in names:
        folder = store.participant(name)
        worst, worst_anchor, out, read = 0.0, "-", 0.0, 0
        for input_id in inputs:
            try:  # a capture pruned by --keep-captures needed is skipped: counted in "inputs"
                capture = folder.load_capture(input_id)
                torch_capture = store.participant("torch").load_capture(input_id)
            except (FileNotFoundError, PrunedCaptureError):
                continue
            read += 1
            meta = folder.read_capture_meta(input_id)
            for anchor in anchors:
                ref = torch_capture[anchor].astype(np.float64)
                x = align(capture[anchor], ref.shape, meta["layouts"].get(anchor)).values
                d = rel_l2(x, ref)
                if anchor == anchors[-1]:
                    out = max(out, d)
                elif d > worst:
                    worst, worst_anchor = d, anchor
        model = store.read_settings()["model"]
        rows.append(f"| {model} | {name} | {read} | {out:.2e} | {worst:.2e} ({worst_anchor}) |")
    return rows


def main() -> int:
    """Print the table."""
    print(
        "| model | participant | inputs | output rel L2 vs torch | worst anchor rel L2 vs torch |"
    )
    print("|---|---|---|---|---|")
    for arg in sys.argv[1:]:
        print("\n".join(table(Path(arg))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
