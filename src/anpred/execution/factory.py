"""The executor of ``--ray``: where the workers of a run go.

A new executor (a module implementing :class:`~anpred.execution.executor.Executor`) gets
its line here; the base module knows none of them.
"""

from __future__ import annotations

from anpred.execution.executor import Executor, LocalExecutor
from anpred.execution.ray_executor import RayExecutor  # imports Ray when one is made
from anpred.execution.slots import AUTO, Parallel, usable_cpus


def open_executor(ray: str | None, parallel: Parallel, threads: int) -> Executor:
    """The executor of ``--ray``: local processes (``None``), or Ray at an address.

    Args:
        ray: ``None``, ``"local"`` (an embedded Ray instance with ``parallel × threads``
            CPUs, shut down on close) or a cluster address (``auto``, ``HOST:PORT``,
            ``ray://HOST:10001``).
        parallel: Workers at once (sizes the embedded instance; ``"auto"``: the CPUs this
            process may use, :func:`~anpred.execution.slots.usable_cpus`).
        threads: Threads per worker.

    Raises:
        UsageError: Ray is not installed, or the cluster cannot be reached.
    """
    if not ray:
        return LocalExecutor()
    cpus = usable_cpus() if parallel == AUTO else max(1, int(parallel)) * max(1, threads)
    return RayExecutor(ray, num_cpus=cpus)
