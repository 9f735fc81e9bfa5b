"""Errors that reach the user as one line and a non-zero exit code."""

from __future__ import annotations


class AnpredError(Exception):
    """An error the user can act on; the CLI prints it as one line (exit code 2)."""

    exit_code = 2


class UsageError(AnpredError):
    """Bad command-line usage or bad input (unknown model, unreadable file, ...)."""


class MissingLibraryError(AnpredError):
    """A DL library needed by a participant is not installed."""

    def __init__(self, library: str, extra: str) -> None:
        super().__init__(
            f"library '{library}' is not installed; install it with: pip install 'anpred[{extra}]'"
        )
        self.library = library
        self.extra = extra


class MissingTranslatorError(AnpredError):
    """An ONNX op has no translator for a library."""

    def __init__(self, op_type: str, opset: int, node: str, library: str) -> None:
        super().__init__(f"op {op_type} (opset {opset}, node {node}) has no {library} translator")
        self.op_type = op_type
        self.opset = opset
        self.node = node
        self.library = library


class WeightsError(AnpredError):
    """A checkpoint cannot be loaded into the chosen architecture."""


class JobFailedError(AnpredError):
    """A job a run depends on (the model export) crashed, failed or timed out (exit code 3)."""

    exit_code = 3


class DamagedRunError(UsageError):
    """A file of a run directory is unreadable, cut short or not what anpred writes."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(
            f"run directory file {str(path)!r} is damaged ({reason}); it was changed or cut "
            "short outside anpred: remove it to recompute it, or use another --out"
        )
