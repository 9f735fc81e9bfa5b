"""The runner of each library, named by its descriptor; backend modules are imported on demand.

The descriptor (:mod:`anpred.library`) is the only source of which class runs a library:
``Library.runner = "module:ClassName"``. :func:`runner_class` imports that module, which
happens only inside worker processes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from anpred.backends.base import Runner
from anpred.errors import UsageError
from anpred.library import get_library


def register_runner(library: str) -> Callable[[type[Runner]], type[Runner]]:
    """Check that the decorated class is the runner ``library``'s descriptor names.

    Kept so that runner modules written against the earlier registry need no change; the
    descriptor alone decides which class runs, so new runners need no decorator.

    Raises:
        UsageError: The descriptor names another class (the two would disagree).
    """

    def decorate(cls: type[Runner]) -> type[Runner]:
        expected = get_library(library).runner
        actual = f"{cls.__module__}:{cls.__qualname__}"
        if actual != expected:
            raise UsageError(
                f"runner {actual} is registered for {library}; its descriptor names {expected}"
            )
        return cls

    return decorate


def runner_class(library: str) -> type[Runner]:
    """Import the runner module ``library``'s descriptor names and return the runner class.

    Raises:
        UsageError: Unknown library, or its runner is missing or not a :class:`Runner`.
    """
    spec = get_library(library).runner
    module_name, _, class_name = spec.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Runner)):
        raise UsageError(f"the runner of {library}, {spec}, is not a Runner subclass")
    return cls
