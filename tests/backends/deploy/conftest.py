"""Fixtures shared by the deployment runtimes' tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from deploy_hooks import ort_outputs, tiny_export, tiny_feeds


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, list[np.ndarray]]:
    """The tiny model exported to ONNX, two feeds, and onnxruntime's outputs on them."""
    onnx_path = tiny_export(tmp_path_factory.mktemp("tiny-export"))
    feeds = tiny_feeds()
    return onnx_path, feeds, ort_outputs(onnx_path, feeds)
