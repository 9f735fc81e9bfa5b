"""``anpred run`` with one participant failing on purpose (the test suite's symptoms).

``python run_failing.py PARTICIPANT:SYMPTOM[:ONCE_FILE] <anpred run arguments>`` (with
``ONCE_FILE``, the symptom happens only the first time: see ``Symptom``): the symptom is the
transform kind of ``symptoms.py``, handed to the run the public way, in
``RunOptions.extra["transforms"]``; everything else is anpred's CLI as it is (exit codes,
SIGTERM, messages). The record reaches the options by wrapping the CLI's ``run_options``,
the one function that turns ``anpred run``'s flags into :class:`RunOptions`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def main(argv: list[str]) -> int:
    target, symptom, *once = argv[0].split(":", 2)
    # the workers import symptoms.py by name
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p
    )
    from symptoms import Symptom

    from anpred.cli import commands
    from anpred.cli.main import main as cli
    from anpred.interchange.transform import TRANSFORMS_KEY

    record = Symptom(symptom, *once).record()
    flags_to_options = commands.run_options

    def run_options(args: argparse.Namespace) -> Any:
        options = flags_to_options(args)
        return dataclasses.replace(
            options, extra={**options.extra, TRANSFORMS_KEY: {target: [record]}}
        )

    commands.run_options = run_options
    return cli(["run", *argv[1:]])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
