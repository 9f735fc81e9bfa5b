"""Shared test settings: libraries write their caches into a per-session temp folder."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

_CACHE = os.environ.get("ANPRED_TEST_CACHE") or ""
if not _CACHE:
    # A cache made for this session only (up to 2 GB of compiled models): removed at exit.
    _CACHE = tempfile.mkdtemp(prefix="anpred-test-cache-")
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
os.environ.setdefault("ANPRED_CACHE", _CACHE)
os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(_CACHE, "yolo"))
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

#: Test files that start Ray (an embedded instance or a one-machine cluster each).
RAY_FILES = frozenset({
    "tests/evaluation/test_eval_ray.py",
    "tests/execution/test_ray_cluster.py",
    "tests/execution/test_ray_executor.py",
    "tests/execution/test_ray_run.py",
})  # fmt: skip


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """With pytest-xdist (``make test`` on a machine with two cores and the memory): a test
    file's tests run in one worker, in order, so that its module fixtures (a run several
    tests read) are built once, and the Ray files in one worker, one after the other.
    """
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "ray" if path in RAY_FILES else path

    return ByFile(config, log)
