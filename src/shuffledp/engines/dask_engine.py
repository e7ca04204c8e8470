"""The Dask engine: ``dask.distributed`` on a ``LocalCluster`` (default) or a scheduler address."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..core.errors import ValidationError
from ..core.validation import check_positive_int
from .base import Engine

__all__ = ["DaskEngine"]

T = TypeVar("T")
R = TypeVar("R")


class DaskEngine(Engine):
    """Partitions as Dask tasks.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:port``); its workers must have shuffledp
        installed and read the archive paths. Without it a ``LocalCluster`` of ``workers``
        processes (one thread each) is started and closed with the engine.
    workers : int
        Worker processes of the local cluster (default 2).

    Tasks are submitted impure (``pure=False``): a task lost with its worker is re-run by the
    scheduler on another worker, so a worker killed mid-job does not change the result.
    """

    name = "dask"

    def __init__(self, scheduler: str | None = None, workers: int = 2, **cluster_kwargs: Any) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ModuleNotFoundError("the dask engine needs dask.distributed: pip install 'shuffledp[dask]'",
                                      name="distributed") from e
        self._cluster = None
        if scheduler is not None:
            if not isinstance(scheduler, str) or not scheduler:
                raise ValidationError(f"scheduler must be an address like tcp://host:port, got {scheduler!r}",
                                      parameter="scheduler")
            self._client = Client(scheduler)
        else:
            workers = check_positive_int(workers, "workers")
            kw = {"n_workers": workers, "threads_per_worker": 1, "processes": True,
                  "dashboard_address": ":0", **cluster_kwargs}  # any free port: no clash
            self._cluster = LocalCluster(**kw)
            self._client = Client(self._cluster)

    @property
    def client(self) -> Any:
        """The ``distributed.Client`` (e.g. to inspect or restart workers)."""
        return self._client

    @property
    def workers(self) -> int:
        info = self._client.scheduler_info()
        return int(sum(w.get("nthreads", 1) for w in info.get("workers", {}).values())) or 1

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        items = list(items)
        if not items:
            return []
        futures = self._client.map(fn, items, pure=False)
        return list(self._client.gather(futures))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
