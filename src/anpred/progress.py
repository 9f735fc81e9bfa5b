"""Progress callbacks: the lines long work says as it goes (a run's workers, its analysis,
the drill-down, chunks, an evaluation campaign).
"""

from __future__ import annotations

from collections.abc import Callable

Say = Callable[[str], None]
"""Takes one progress line (the CLI prints it; the Python API may collect or drop it)."""


def quiet(_message: str) -> None:
    """Say nothing: the default where a caller gives no progress callback."""
