"""What every fuzz case shares: running the CLI under limits, the property, the bookkeeping.

The property (issue 17): whatever a user feeds ``anpred``, the command ends with exit code
0-3; for bad input exactly one ``anpred: error: ...`` line, last on stderr, no traceback and
no "internal error"; never exit 4, never a hang, never more memory than the budget.

Each CLI case runs ``python -m anpred ...`` in its own process group, with a wall-clock limit
(:data:`CASE_TIMEOUT`, then the whole group is killed: a hang) and a data-segment limit
(``RLIMIT_DATA``, :data:`MEMORY_LIMIT`) inherited by the workers, so a memory bomb fails
inside anpred instead of starving the machine; its peak resident memory (the process and
the children it waited for, ``wait4``) is compared with the budget as well.

Known bugs: a violation whose stderr matches a :data:`KNOWN_BUGS` signature of its entry
point is recorded as *known* (the test ends as xfail with the reason) instead of failing;
anything else fails the test with every offending case listed. Cases never raise inside
hypothesis (no shrinking of subprocess runs): a case is a readable description that
reproduces by itself.

Budgets: ``make test`` runs the short profile (``derandomize=True``, a few examples per
entry point). ``scripts/fuzz.py`` sets ``ANPRED_FUZZ_EXAMPLES`` (examples per round) and
``ANPRED_FUZZ_SEED`` (random rounds) and ``ANPRED_FUZZ_LOG`` (one JSON line per case).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed

REPO = Path(__file__).resolve().parents[2]
PIPELINE_TESTS = REPO / "tests" / "pipeline"
GOLDEN_RUN = PIPELINE_TESTS / "data" / "golden_run"

#: Seconds before a case counts as hung. A clean run of the tiny model with three workers
#: takes 5 s on an idle 2-core machine (measured); 20x leaves room for a loaded one.
CASE_TIMEOUT = float(os.environ.get("ANPRED_FUZZ_TIMEOUT", "180"))
#: Data-segment limit of every CLI case and its workers (bytes). A clean tiny run peaks at
#: ~0.9 GB resident per torch worker (measured); 4 GB stops a bomb long before the machine.
MEMORY_LIMIT = int(float(os.environ.get("ANPRED_FUZZ_MEMORY_GB", "4")) * 2**30)
#: Seconds within which bad input must be refused when it fails before any worker starts
#: (measured: 0.2-3 s idle; the prepare worker imports onnx and onnxruntime).
QUICK_REFUSAL = 60.0

LONG_EXAMPLES = int(os.environ.get("ANPRED_FUZZ_EXAMPLES", "0"))
LONG_SEED = os.environ.get("ANPRED_FUZZ_SEED")
LOG = os.environ.get("ANPRED_FUZZ_LOG")


def fuzz(
    short_examples: int, cheap: bool = False
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Hypothesis settings of a fuzz case: short and fixed in ``make test``, long in rounds.

    Args:
        short_examples: Examples in the short (``make test``) profile.
        cheap: In-process cases (milliseconds each): ten times the long run's examples.
    """
    common: dict[str, Any] = {
        "deadline": None,
        "database": None,
        "phases": (Phase.explicit, Phase.generate),
        "suppress_health_check": list(HealthCheck),
        "print_blob": False,
    }
    if LONG_EXAMPLES:
        examples = LONG_EXAMPLES * (10 if cheap else 1)
        chosen = settings(max_examples=examples, derandomize=False, **common)
    else:
        chosen = settings(max_examples=short_examples, derandomize=True, **common)

    def wrap(test: Callable[..., None]) -> Callable[..., None]:
        test = chosen(test)
        return hypothesis_seed(int(LONG_SEED))(test) if LONG_EXAMPLES and LONG_SEED else test

    return wrap


#: Marks a test with fixed cases (no hypothesis): ``make test`` runs it, long rounds do not.
fixed_case = pytest.mark.skipif(bool(LONG_EXAMPLES), reason="a fixed case: make test runs it")


# --------------------------------------------------------------------------- running


@dataclass
class CliResult:
    """One finished (or killed) CLI process."""

    args: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    peak_rss: int
    timed_out: bool

    @property
    def last_line(self) -> str:
        """The last non-empty stderr line (what the user reads)."""
        lines = [line for line in self.stderr.strip().splitlines() if line.strip()]
        return lines[-1] if lines else ""


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI case: the test caches, CPU JAX, quiet TensorFlow."""
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env.setdefault("YOLO_OFFLINE", "1")
    env.pop("ANPRED_TEST_FAULT", None)
    env.update(extra or {})
    return env


#: Starts the CLI under the memory limit in its own process group and writes the CLI
#: tree's peak RSS. Why a launcher: Linux keeps a process's peak RSS from before ``exec``,
#: so a CLI forked straight from pytest (over 1 GB after the suite's in-process tests)
#: reported pytest's RSS as its own; forked from this small launcher it reports its own.
_LAUNCHER = """
import os, resource, sys
os.setsid()
limit, record = int(sys.argv[1]), sys.argv[2]
resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[3], sys.argv[3:])
_, status, usage = os.wait4(pid, 0)
with open(record, "w") as handle:
    handle.write(f"{status} {usage.ru_maxrss}")
os._exit(0)
"""


def run_cli(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    timeout: float = CASE_TIMEOUT,
    env: dict[str, str] | None = None,
) -> CliResult:
    """Run ``python -m anpred ARGS`` under the case limits; kill its group on a hang."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as scratch,
    ):
        record = Path(scratch) / "rusage"
        argv = [sys.executable, "-c", _LAUNCHER, str(MEMORY_LIMIT), str(record)]
        argv += [sys.executable, "-m", "anpred", *args]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=cli_env(env),
        )
        status, rss_kb, timed_out = None, 0, False
        while True:
            pid, raw, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status, rss_kb = raw, usage.ru_maxrss
                break
            if time.monotonic() - started > timeout:
                timed_out = True
                _kill_group(proc.pid)
                _, raw, usage = os.wait4(proc.pid, 0)
                status, rss_kb = raw, usage.ru_maxrss
                break
            time.sleep(0.05)
        _kill_group(proc.pid)  # workers a killed or finished CLI left behind
        if record.exists():  # the CLI's own status and peak RSS (the launcher's otherwise)
            raw_status, raw_rss = record.read_text().split()
            status, rss_kb = int(raw_status), int(raw_rss)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return CliResult(
            list(args),
            None if timed_out else proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            seconds,
            rss_kb * 1024,
            timed_out,
        )


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@contextmanager
def case_dir() -> Iterator[Path]:
    """A fresh temporary folder for one case (removed afterwards)."""
    path = Path(tempfile.mkdtemp(prefix="anpred-fuzz-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


_SESSION: Path | None = None


def session_dir() -> Path:
    """A temporary folder shared by the cases of this process (models, base runs)."""
    global _SESSION
    if _SESSION is None:
        _SESSION = Path(tempfile.mkdtemp(prefix="anpred-fuzz-session-"))
        import atexit

        atexit.register(shutil.rmtree, _SESSION, True)
    return _SESSION


# --------------------------------------------------------------------------- the property


@dataclass(frozen=True)
class KnownBug:
    """A bug the fuzz harness found that belongs to code someone else is changing now."""

    entry: str
    signature: str
    reason: str


#: Violations that are known and reported (see the fuzz section of docs / the lead's note).
#: ``entry`` is matched as a prefix of the case's entry point, ``signature`` as a regular
#: expression against the case's stderr.
KNOWN_BUGS: tuple[KnownBug, ...] = ()


def violations(result: CliResult, expect: str = "any", quick: bool = False) -> list[str]:
    """What ``result`` breaks of the property (empty: it holds).

    Args:
        result: The finished case.
        expect: ``"any"`` (exit 0-3), ``"refused"`` (exit 2) or ``"accepted"`` (exit 0, 1).
        quick: Bad input that must be refused before any worker starts
            (within :data:`QUICK_REFUSAL` seconds).
    """
    found = []
    if result.timed_out:
        return [f"hang: no exit after {result.seconds:.0f} s"]
    rc = result.returncode
    if rc == 4 or "internal error" in result.stderr:
        found.append("internal error (exit 4)")
    elif rc not in (0, 1, 2, 3):
        found.append(f"exit code {rc} (killed or crashed)")
    if "Traceback (most recent call last)" in result.stderr:
        found.append("traceback on stderr")
    errors = [line for line in result.stderr.splitlines() if line.startswith("anpred: error")]
    if rc == 2:
        if len(errors) != 1:
            found.append(f"{len(errors)} 'anpred: error' lines (want exactly one)")
        elif result.last_line.strip() != errors[0].strip():
            found.append("the error line is not the last line on stderr")
    if expect == "refused" and rc != 2:
        found.append(f"bad input accepted (exit {rc}, want 2)")
    if expect == "accepted" and rc not in (0, 1):
        found.append(f"good input not accepted (exit {rc}, want 0 or 1)")
    if quick and rc == 2 and result.seconds > QUICK_REFUSAL:
        found.append(f"refused only after {result.seconds:.0f} s")
    if result.peak_rss > MEMORY_LIMIT:
        found.append(f"peak memory {result.peak_rss / 2**30:.1f} GB over the budget")
    return found


@dataclass
class CaseRecord:
    """One case's outcome, as written to the log."""

    entry: str
    case: str
    verdict: str  # ok | known | fail
    problems: list[str]
    returncode: int | None
    seconds: float
    last_line: str
    reason: str = ""
    peak_rss: int = 0


@dataclass
class Cases:
    """The cases of one entry point in one test: record them, then end the test accordingly.

    Args:
        entry: Entry point (``run FILE.onnx``, ``report DIR``...): names the log's counters
            and selects the :data:`KNOWN_BUGS` that apply.
    """

    entry: str
    records: list[CaseRecord] = field(default_factory=list)

    def check(
        self,
        case: Any,
        result: CliResult,
        expect: str = "any",
        quick: bool = False,
        extra: Sequence[str] = (),
    ) -> CaseRecord:
        """Judge one CLI case (never raises: the verdict is kept for :meth:`finish`).

        Args:
            case: What was fed (its ``repr`` describes the case).
            result: The finished CLI process.
            expect: See :func:`violations`.
            quick: See :func:`violations`.
            extra: Problems the caller found beyond the exit (a leaked secret, markup).
        """
        problems = [*violations(result, expect, quick), *extra]
        return self.add(case, problems, result.returncode, result.seconds, result)

    def add(
        self,
        case: Any,
        problems: list[str],
        returncode: int | None = None,
        seconds: float = 0.0,
        result: CliResult | None = None,
    ) -> CaseRecord:
        """Record a case judged by the caller (``problems`` empty: the property holds)."""
        stderr = result.stderr if result else ""
        reason = ""
        verdict = "ok"
        if problems:
            verdict = "fail"
            for bug in KNOWN_BUGS:
                if self.entry.startswith(bug.entry) and re.search(bug.signature, stderr):
                    verdict, reason = "known", bug.reason
                    break
        record = CaseRecord(
            self.entry,
            _describe(case),
            verdict,
            problems,
            returncode,
            round(seconds, 2),
            (result.last_line if result else "")[:400],
            reason,
            result.peak_rss if result else 0,
        )
        self.records.append(record)
        if LOG:
            with open(LOG, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record.__dict__) + "\n")
        return record

    def finish(self) -> None:
        """Fail on new violations, xfail on known ones only, pass otherwise."""
        assert self.records, "no case ran"
        failed = [r for r in self.records if r.verdict == "fail"]
        if failed:
            lines = [
                f"- {r.case}\n    {'; '.join(r.problems)} (exit {r.returncode}, "
                f"{r.seconds:.1f} s)\n    stderr: {r.last_line}"
                for r in failed[:10]
            ]
            pytest.fail(
                f"{len(failed)}/{len(self.records)} {self.entry} cases break the property:\n"
                + "\n".join(lines),
                pytrace=False,
            )
        known = sorted({r.reason for r in self.records if r.verdict == "known"})
        if known:
            pytest.xfail("; ".join(known))


def _describe(case: Any) -> str:
    text = case if isinstance(case, str) else repr(case)
    return text if len(text) <= 600 else text[:600] + "..."


def tiny_model(size: int = 16) -> Path:
    """The tiny CNN of ``tests/pipeline/tiny_model.py`` (written once per process)."""
    path = session_dir() / f"tiny{size}.onnx"
    if not path.exists():
        if str(PIPELINE_TESTS) not in sys.path:
            sys.path.insert(0, str(PIPELINE_TESTS))
        from tiny_model import tiny_cnn

        tiny_cnn(path, size=size)
    return path


def _budget_flags() -> tuple[str, ...]:
    """``--max-memory`` under the case's data limit, once ``anpred run`` has the flag.

    Then anpred's own refusal (exit 2, one line) comes before the limit's ``MemoryError``.
    """
    text = subprocess.run(
        [sys.executable, "-m", "anpred", "run", "--help"],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    ).stdout
    budget = f"{max(1, MEMORY_LIMIT * 3 // 4 // 2**20)}M"
    return ("--max-memory", budget) if "--max-memory" in text else ()


#: Flags that keep a run of the tiny model cheap: one participant besides the references,
#: one bundled photograph, no stage isolation, a worker timeout well under the case's (and
#: a memory budget under the case's limit, where ``anpred run`` takes one).
CHEAP_RUN = (
    "--libs", "onnxruntime", "--images", "1", "--no-isolation", "--timeout", "90",
    *_budget_flags(),
)
