"""The fork server's lifetime (:mod:`anpred.fork_server`)."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import pytest

from anpred import fork_server


def test_a_held_fork_server_outlives_the_passes_until_stopped() -> None:
    if fork_server.context(()).get_start_method() != "forkserver":
        pytest.skip("no fork server here (not POSIX)")
    from multiprocessing import forkserver

    try:
        fork_server.hold()  # a campaign's fault runs: one server for all their passes
        with ProcessPoolExecutor(1, mp_context=fork_server.context(())) as pool:
            assert pool.submit(abs, -1).result() == 1
        fork_server.release()  # a pass ends: the server stays for the next
        pid = forkserver._forkserver._forkserver_pid  # multiprocessing's own record
        assert pid is not None
        os.kill(pid, 0)  # still running (raises when it is not)
        assert fork_server.kept()
    finally:
        fork_server.stop()
    assert forkserver._forkserver._forkserver_pid is None
    assert not fork_server.kept()


def test_helpers_freeze_what_they_inherit_and_ignore_ctrl_c() -> None:
    import gc
    import signal

    try:
        with ProcessPoolExecutor(
            1, mp_context=fork_server.context(()), initializer=fork_server.init_helper
        ) as pool:
            frozen = pool.submit(gc.get_freeze_count).result()
            handler = pool.submit(signal.getsignal, signal.SIGINT).result()
    finally:
        fork_server.stop()
    assert frozen > 1000  # the interpreter's and anpred's objects, not the few made since
    assert handler == signal.SIG_IGN
