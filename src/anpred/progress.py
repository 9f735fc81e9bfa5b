"""Progress callbacks: the lines long work says as it goes (a run's workers, its analysis,
the drill-down, chunks, an evaluation campaign).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

Say = Callable[[str], None]
"""Takes one progress line (the CLI prints it; the Python API may collect or drop it)."""


def quiet(_message: str) -> None:
    """Say nothing: the default where a caller gives no progress callback."""


def to_stderr(message: str) -> None:
    """Say a progress line on stderr, at once (where the CLI says its progress)."""
    print(message, file=sys.stderr, flush=True)


def format_duration(seconds: float) -> str:
    """A duration as a person reads it: ``45 s``, ``3 min 20 s``, ``2 h 05 min``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(round(whole / 60), 60)
    return f"{hours} h {rest:02d} min"


class Remaining:
    """The time long work has left, from the pace of the units done so far: a campaign's
    runs, a run's inputs going chunk by chunk. Units that took no time (resumed work) move
    the estimate down; it is said as ``about``.

    Args:
        total: Units of the whole work.
        clock: Seconds since some moment (tests give their own).
    """

    def __init__(self, total: int, clock: Callable[[], float] | None = None) -> None:
        self.total = total
        self.done = 0
        self._clock = clock or time.monotonic
        self._start = self._clock()
        self._lock = threading.Lock()  # a distributed campaign's runs end in threads

    def step(self, units: int = 1) -> None:
        """Count ``units`` more as done."""
        with self._lock:
            self.done += units

    def left(self) -> str:
        """``about 3 min 20 s left`` (empty before anything is done, and once all is)."""
        if self.done <= 0 or self.done >= self.total:
            return ""
        pace = (self._clock() - self._start) / self.done
        return f"about {format_duration(pace * (self.total - self.done))} left"
