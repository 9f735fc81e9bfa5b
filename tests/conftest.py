"""Shared test settings: libraries write their caches into a per-session temp folder."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

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
