"""Environment variables a participant configuration needs in its process.

Some library switches are read once, when the library is imported
(``TF_ENABLE_ONEDNN_OPTS``), so the worker pool sets a participant's ``settings["env"]``
before the worker starts (:func:`anpred.execution.pool.participant_env`). An adapter
given the same ``env`` setting checks here that the variables really are in its process
and records them; it cannot set them itself any more. Imports no DL library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from anpred.errors import UsageError


def check_process_env(library: str, env: Mapping[str, Any] | None) -> dict[str, str]:
    """Return ``env`` as strings after checking that the process runs with it.

    Args:
        library: Library name, for the error message.
        env: Variable → value the configuration needs (``None``: none).

    Returns:
        The variables, as in effect in this process.

    Raises:
        UsageError: When ``env`` is not a mapping or a variable is missing or different
            (the participant was not started by the worker pool).
    """
    if env is None:
        return {}
    if not isinstance(env, Mapping):
        raise UsageError(f"{library} setting 'env' must map variable names to values")
    wanted = {str(k): str(v) for k, v in env.items()}
    wrong = {k: os.environ.get(k) for k, v in wanted.items() if os.environ.get(k) != v}
    if wrong:
        found = ", ".join(f"{k}={v!r}" for k, v in sorted(wrong.items()))
        need = ", ".join(f"{k}={wanted[k]!r}" for k in sorted(wrong))
        raise UsageError(
            f"{library} needs {need} in its process environment before the library is "
            f"imported (found {found}); run it through the worker pool, which sets it"
        )
    return wanted
