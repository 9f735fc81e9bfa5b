"""Shared test settings: libraries write their caches into a per-session temp folder."""

from __future__ import annotations

import os
import tempfile

_CACHE = os.environ.get("ANPRED_TEST_CACHE") or tempfile.mkdtemp(prefix="anpred-test-cache-")
os.environ.setdefault("ANPRED_CACHE", _CACHE)
os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(_CACHE, "yolo"))
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
