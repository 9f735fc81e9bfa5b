"""Where anpred keeps derived artefacts (generated weights, ONNX exports)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """Return (and create) a folder under ``$ANPRED_CACHE`` (default ``~/.cache/anpred``)."""
    root = Path(os.environ.get("ANPRED_CACHE") or Path.home() / ".cache" / "anpred")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def file_digest(path: str | os.PathLike[str], length: int = 16) -> str:
    """Return the first ``length`` hex digits of the SHA-256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:length]
