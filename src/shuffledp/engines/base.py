"""The engine interface: the few operations the protocols need to run on a distributed engine.

A protocol's statistic is mergeable: ``aggregate(a ∪ b) == aggregate(a) + aggregate(b)`` (for the
protocols whose statistic is a sum modulo ``q``, equal modulo ``q``). An estimate from a
partitioned batch is therefore

    statistic = sum_j aggregate(partition_j)        (on the workers, merged on the driver)
    estimate  = estimate(statistic, n)              (once, on the driver)

An :class:`Engine` supplies one operation, :meth:`Engine.map`: apply a picklable function to
every item of a list (a partition descriptor) on the engine's workers and return the results in
the order of the items. Everything else (reading partitions, aggregating, merging in a fixed
order) is engine-independent code in :mod:`shuffledp.engines.archive`, so the statistic is the
same, bit for bit, whatever the engine: integer statistics are exact, and a float statistic is
summed on the driver in the fixed partition order.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from ..core.errors import ValidationError

__all__ = ["Engine", "merge_statistics", "check_engine_protocol"]

T = TypeVar("T")
R = TypeVar("R")


class Engine(ABC):
    """A place to run partition functions: in process, on Dask, on Spark.

    Use as a context manager (``with get_engine("dask") as eng: ...``) so the cluster or session
    the engine started is closed; an engine attached to an existing cluster leaves it running.
    """

    name: str = ""

    @abstractmethod
    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(x) for x in items]``, run on the engine's workers, results in the order of ``items``.

        ``fn`` and the items must be picklable (cloudpickle): they are shipped to worker
        processes. A task lost with its worker is run again by the engine.
        """

    @property
    def workers(self) -> int:
        """Number of worker slots (processes x threads) the engine runs tasks on."""
        return 1

    def close(self) -> None:
        """Release what the engine started (cluster, session); idempotent."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(workers={self.workers})"


def check_engine_protocol(protocol: Any) -> None:
    """Refuse a protocol whose statistic is not a mergeable function of its messages.

    A central-model protocol's ``aggregate`` is the trusted curator's noisy release: run per
    partition it would add the noise once per partition, so it has no place on an engine.
    """
    if getattr(protocol, "model", None) == "central":
        raise ValidationError(f"{protocol.name}: a central-model protocol's aggregate is the curator's noisy "
                              "release, not a mergeable statistic of messages; engines run local and "
                              "shuffle-model protocols", parameter="protocol")


def merge_statistics(protocol: Any, parts: Sequence[np.ndarray]) -> np.ndarray:
    """Sum partition statistics in the given (fixed) order; reduce modulo the protocol's modulus.

    The protocols that sum secret shares modulo ``q`` (``protocol.modulus``) return their
    statistic reduced modulo ``q``; the merged sum is reduced the same way, so the merged
    statistic equals ``aggregate`` of the whole batch, not only its estimate.
    """
    if not parts:
        raise ValidationError("no partitions to merge", parameter="parts")
    total = np.array(parts[0], copy=True)
    for p in parts[1:]:
        p = np.asarray(p)
        if p.shape != total.shape:
            raise ValidationError(f"partition statistics differ in shape: {total.shape} vs {p.shape}",
                                  parameter="parts")
        total = total + p
    q = getattr(protocol, "modulus", None)
    if isinstance(q, (int, np.integer)) and q > 0 and np.issubdtype(total.dtype, np.integer):
        total = total % int(q)
    return total
