"""Print the localization/characterization table of finished runs (Markdown).

Usage: ``python benchmarks/table_characterization.py RUN_DIR [RUN_DIR ...]``. Per model and
participant: top introduced-error stage (stage isolation), its share (top-1), Gini over
stages, median direction changes of the propagation profile (vs fp64), the number of
masked cases per output baseline, and channel concentration (top-5 % share) and
border/interior ratio at the worst anchor. Also the noise floor per anchor.
"""

from __future__ import annotations

import sys
from pathlib import Path

from anpred.store import RunStore, Summary


def _summary(run_dir: Path) -> Summary:
    return Summary.from_dict(RunStore.open(run_dir).read_summary())


def _fmt(value: object, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def rows(run_dir: Path) -> list[str]:
    """Table rows of one run."""
    s = _summary(run_dir)
    prop = s.characterization.propagation
    masked = s.characterization.masking.get("masked_cases", {})
    out = []
    for p, data in s.localization.participants.items():
        conc = data.concentration or {}
        top = conc.get("top_shares", {})
        pr = prop.get(p)
        dim = pr.dimension_at_worst if pr else {}
        out.append(
            f"| {s.model.name} | {p} | {data.top_stage} | {_fmt(top.get('1'))} | "
            f"{_fmt(top.get('3'))} | {_fmt(conc.get('gini'))} | "
            f"{_fmt(pr.direction_changes if pr else None, '.1f')} | "
            f"{len(s.findings_of(p))} | "
            f"{masked.get('polygraphy_allclose', 0)} | {pr.worst_anchor if pr else None} | "
            f"{_fmt(dim.get('top_channel_share'))} | {_fmt(dim.get('border_interior_ratio'))} |"
        )
    return out


def main() -> int:
    """Print the tables."""
    print(
        "| model | participant | top introduced stage | top-1 share | top-3 share | Gini | "
        "direction changes | findings | masked (allclose) | worst anchor | "
        "top-5% channel share | border/interior |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for arg in sys.argv[1:]:
        print("\n".join(rows(Path(arg))))
    for arg in sys.argv[1:]:
        s = _summary(Path(arg))
        floors = {a: f"{v.median:.1e}" for a, v in s.noise_floor.items() if v.median}
        print(f"\nnoise floor ({s.model.name}, rel L2 torch fp32 vs fp64, median): {floors}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
