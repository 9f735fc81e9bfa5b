#!/usr/bin/env python
"""Long fuzz run: the strategies of ``tests/fuzz`` with many more examples, in random rounds.

Usage::

    .venv/bin/python scripts/fuzz.py --minutes 60            # every entry point
    .venv/bin/python scripts/fuzz.py --minutes 10 --only onnx,images

The budget is shared out evenly between the fuzz files (``--only`` picks some: ``onnx``,
``images``, ``run_dirs``, ``grid``, ``weights``, ``report_html``). Each round runs one file
under pytest with a fresh random seed and ``--examples`` examples per test; rounds repeat
until the file's share of the budget is spent. Every case is logged as one JSON line
(``--log``, default ``runs/fuzz/cases.jsonl``); at the end the script prints the cases
tried per entry point with their outcomes, then every failing case (what it was, what
broke, the last stderr line) and the seed of its round. Exit code 0 when no case broke the
property (known bugs, reported as such, do not count), 1 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FUZZ = REPO / "tests" / "fuzz"


def _families() -> list[str]:
    return sorted(p.stem.removeprefix("test_fuzz_") for p in FUZZ.glob("test_fuzz_*.py"))


def _round(family: str, examples: int, seed: int, log: Path, limit: float) -> tuple[int, str]:
    env = {
        **os.environ,
        "ANPRED_FUZZ_EXAMPLES": str(examples),
        "ANPRED_FUZZ_SEED": str(seed),
        "ANPRED_FUZZ_LOG": str(log),
        "JAX_PLATFORMS": "cpu",
    }
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-m", "not slow", "-o", "addopts=", str(FUZZ / f"test_fuzz_{family}.py")]
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=max(60.0, limit))
    except subprocess.TimeoutExpired:
        return 124, f"round timed out after {limit:.0f} s"
    tail = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode, tail[-1] if tail else ""


def main(argv: list[str] | None = None) -> int:
    """Run the rounds, then print the table and the failures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="total budget (default 60)")
    parser.add_argument("--only", default="", help=f"comma list of {', '.join(_families())}")
    parser.add_argument("--examples", type=int, default=20, help="examples per test per round")
    parser.add_argument("--log", type=Path, default=REPO / "runs" / "fuzz" / "cases.jsonl")
    parser.add_argument("--seed", type=int, default=None, help="seed of the round seeds")
    args = parser.parse_args(argv)
    families = [f for f in _families() if not args.only or f in args.only.split(",")]
    if not families:
        parser.error(f"--only: choose from {', '.join(_families())}")
    args.log.parent.mkdir(parents=True, exist_ok=True)
    args.log.write_text("")
    seeds = random.Random(args.seed)
    share = args.minutes * 60 / len(families)
    rounds: list[tuple[str, int, int, str]] = []
    started = time.monotonic()
    for index, family in enumerate(families):
        deadline = started + share * (index + 1)
        while time.monotonic() < deadline - 5:
            seed = seeds.randrange(2**32)
            code, last = _round(family, args.examples, seed, args.log,
                                deadline - time.monotonic() + 600)
            rounds.append((family, seed, code, last))
            print(f"[{time.monotonic() - started:7.0f} s] {family} seed={seed}: {last}",
                  flush=True)
    return report(args.log, rounds)


def report(log: Path, rounds: list[tuple[str, int, int, str]]) -> int:
    """Print cases per entry point and the failures; return the exit code."""
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    slowest: dict[str, float] = collections.defaultdict(float)
    heaviest: dict[str, int] = collections.defaultdict(int)
    for r in records:
        table[r["entry"]][r["verdict"]] += 1
        table[r["entry"]][f"exit {r['returncode']}"] += r["returncode"] is not None
        slowest[r["entry"]] = max(slowest[r["entry"]], r["seconds"])
        heaviest[r["entry"]] = max(heaviest[r["entry"]], r.get("peak_rss", 0))
    print(f"\n{'entry point':<42} {'cases':>6} {'ok':>6} {'known':>6} {'FAIL':>5} "
          f"{'max s':>6} {'max GB':>6}  exit codes")
    for entry, counts in sorted(table.items()):
        total = counts["ok"] + counts["known"] + counts["fail"]
        exits = ", ".join(f"{k.split()[1]}:{v}" for k, v in sorted(counts.items())
                          if k.startswith("exit ") and v)
        print(f"{entry:<42} {total:>6} {counts['ok']:>6} {counts['known']:>6} "
              f"{counts['fail']:>5} {slowest[entry]:>6.1f} {heaviest[entry] / 2**30:>6.2f}  "
              f"{exits}")
    known = collections.Counter(r["reason"] for r in records if r["verdict"] == "known")
    if known:
        print("\nknown bugs hit (xfail in make test):")
        for reason, n in known.most_common():
            print(f"  {n:>5} x {reason}")
    failed = [r for r in records if r["verdict"] == "fail"]
    broken_rounds = [r for r in rounds if r[2] not in (0, 1)]
    if failed:
        print(f"\n{len(failed)} failing case(s):")
        for r in failed[:50]:
            print(f"- [{r['entry']}] {r['case']}\n    {'; '.join(r['problems'])} "
                  f"(exit {r['returncode']}, {r['seconds']} s)\n    stderr: {r['last_line']}")
    for family, seed, code, last in broken_rounds:
        print(f"round {family} seed={seed} ended with pytest exit {code}: {last}")
    print(f"\n{len(records)} cases, {len(failed)} failing; log: {log}")
    return 1 if failed or any(code not in (0, 1, 2) for _, _, code, _ in rounds) else 0


if __name__ == "__main__":
    raise SystemExit(main())
