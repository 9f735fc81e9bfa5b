"""One fork server per driver for anpred's helper processes: the analysis pool and the
report's plots.

Helper processes are forked from a server that imported what they need once (NumPy,
anpred's analysis, numba's compiled loops, matplotlib), instead of each importing it
(spawn: ~1.2 CPU s per analysing process, ~0.7 s of matplotlib per plotting one); not from
the driver, which may hold threads that ``fork`` would copy mid-flight. A server takes its
preload list when it starts. A run starts it while its last workers run and keeps it
(:func:`start` with ``keep``) until it has analysed and written its report, a campaign
for all the fault runs of a model (:func:`hold`); a pass that started its own server stops
it afterwards. Stopping waits for the server, so that the CPU time of the processes it
reaped counts as the driver's children's (``time anpred run``, ``benchmarks/bench_run.py``).
Where there is no fork server (not POSIX), helpers are spawned.
"""

from __future__ import annotations

import gc
import multiprocessing
import signal
from collections.abc import Sequence
from multiprocessing.context import BaseContext

_kept = False
"""Whether the running server was started with ``keep`` (a run holds it)."""


def context(preload: Sequence[str]) -> BaseContext:
    """The start method of helper processes: the fork server (``preload`` applies when it
    is not running yet), else spawn.
    """
    try:
        found = multiprocessing.get_context("forkserver")
    except ValueError:
        return multiprocessing.get_context("spawn")
    found.set_forkserver_preload(list(preload))
    return found


def start(preload: Sequence[str], keep: bool) -> bool:
    """Start the fork server now (its imports run in it, beside whatever runs here).

    Args:
        preload: Modules it imports before any process forks from it.
        keep: Keep it until :func:`stop` (a run that will use it for several things);
            otherwise the next pass that uses it stops it.

    Returns:
        Whether a fork server is available.
    """
    global _kept
    if context(preload).get_start_method() != "forkserver":
        return False
    from multiprocessing import forkserver

    forkserver.ensure_running()
    _kept = _kept or keep
    return True


def hold() -> None:
    """Keep the fork server, once a pass starts it, until :func:`stop` (a campaign's fault
    runs: one server for all the passes they make, not one each); starts nothing.
    """
    global _kept
    _kept = True


def kept() -> bool:
    """Whether a run started the server to keep (passes then leave it running)."""
    return _kept


def stop() -> None:
    """Stop the fork server if it runs, and wait for it. ``multiprocessing`` has no public
    way to; without the private one it is left running (it ends with this process).
    """
    global _kept
    _kept = False
    from multiprocessing import forkserver

    halt = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if halt is not None:
        halt()


def init_helper() -> None:
    """Initializer of every helper process.

    Ctrl-C is the driver's to handle (it stops its pools), so that the helpers print no
    traceback of their own. The objects the helper inherited (the server's imports) are
    frozen out of the garbage collector (``gc.freeze``): its collections then leave them
    alone instead of writing to every one of their pages, which ``fork`` shares until a
    write copies them. Measured on forks of a server that imported the analysis, the
    compiled loops and matplotlib (yolov8n, six libraries, three alternating rounds): a
    process drawing two plots 0.53-0.54 -> 0.47-0.48 CPU s (page faults 21-22k -> 13-14k),
    one drawing the two others 0.42 -> 0.36; in ``anpred run yolov8n --libs all --images 8
    --parallel 2`` the two plotting processes together 0.89-0.95 -> 0.82-0.83 CPU s, the
    analysing ones 2.19-2.37 -> 2.25-2.26 (noise). Numbers are untouched: only what a
    collection visits changes.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()


def release() -> None:
    """End a pass: stop the server unless a run keeps it."""
    if not _kept:
        stop()
