"""Outcome enums (NNSmith's ``Symptom`` × ``Stage``): a job's state and the step it reached.

Both are :class:`~enum.StrEnum`: a member *is* its string value, so it compares equal to
the strings already on disk (``status.json``, ``participants.json``, ``summary.json``) and
is written to JSON as that string -- files stay byte-compatible.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """The state of a job (a participant's worker, or the model export)."""

    RUNNING = "running"
    OK = "ok"
    ERROR = "error"
    NON_FINITE = "non-finite"
    CRASH = "crash"
    TIMEOUT = "timeout"

    @property
    def failed(self) -> bool:
        """Crash, timeout or error: the job produced no usable result."""
        return self in (Status.CRASH, Status.TIMEOUT, Status.ERROR)

    @property
    def finished(self) -> bool:
        """Ok or non-finite: every result is on disk (non-finite values are a result)."""
        return self in (Status.OK, Status.NON_FINITE)

    @classmethod
    def parse(cls, value: object, default: Status | None = None) -> Status:
        """The member named by ``value`` (a string from a file).

        Args:
            value: The state as read (``"ok"``, ``"crash"``, ...).
            default: Returned for a missing or unknown state (default: :attr:`ERROR`).
        """
        try:
            return cls(str(value))
        except ValueError:
            return default if default is not None else cls.ERROR


#: States that mean a job failed, and states that mean it finished (as tuples of strings).
FAILED_STATES: tuple[Status, ...] = tuple(s for s in Status if s.failed)
FINISHED_STATES: tuple[Status, ...] = tuple(s for s in Status if s.finished)


class Step(StrEnum):
    """Where in a job's life it is, or where a symptom happened."""

    LOAD = "load"
    TRANSLATE = "translate"
    #: A deployment runtime's converter turns the anchored model into its artifact.
    CONVERT = "convert"
    COMPILE = "compile"
    EXECUTE = "execute"
    CAPTURE = "capture"
    EXPORT = "export"
    DONE = "done"
