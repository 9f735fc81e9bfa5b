"""Progress lines: durations a person reads and the time long work has left."""

from __future__ import annotations

import pytest

from anpred.progress import Remaining, format_duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s"), (44.6, "45 s"), (59.4, "59 s"), (60, "1 min"), (200, "3 min 20 s"),
     (3599, "59 min 59 s"), (3600, "1 h 00 min"), (7530, "2 h 06 min"), (-3, "0 s")],
)  # fmt: skip
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_remaining_extrapolates_the_pace_of_what_is_done() -> None:
    now = [100.0]
    eta = Remaining(10, clock=lambda: now[0])
    assert eta.left() == ""  # nothing done: no pace yet
    now[0] += 60
    eta.step(2)  # 30 s per unit, 8 left
    assert eta.left() == "about 4 min left"
    now[0] += 30
    eta.step(7)  # 90 s for 9: 10 s per unit, 1 left
    assert eta.left() == "about 10 s left"
    eta.step()
    assert eta.left() == ""  # all done


def test_to_stderr_says_one_line_on_stderr(capsys) -> None:
    from anpred.progress import to_stderr

    to_stderr("run: 3 workers")
    out, err = capsys.readouterr()
    assert (out, err) == ("", "run: 3 workers\n")
