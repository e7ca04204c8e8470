"""The Spark engine: pyspark, ``local[2]`` by default or a master URL."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..core.errors import ValidationError
from .base import Engine

__all__ = ["SparkEngine"]

T = TypeVar("T")
R = TypeVar("R")


#: pyspark's notice about untested pandas versions (shuffledp passes no pandas objects to Spark)
_PANDAS_WARNING = "PySpark does not yet fully support pandas"


def _package_root() -> str:
    """The folder that holds the ``shuffledp`` package (put on the Python workers' path)."""
    return str(Path(__file__).resolve().parents[2])


class SparkEngine(Engine):
    """Partitions as Spark tasks (one RDD partition per item).

    Parameters
    ----------
    master : str
        Spark master URL (default ``local[2]``: two worker threads in a local JVM, each with its
        Python worker process). On a cluster, the executors need shuffledp installed and must
        read the archive paths.
    session : pyspark.sql.SparkSession, optional
        An existing session to use (left running when the engine closes). A session already
        running in this process is used, and left running, in the same way.

    Needs a Java runtime (``java`` on the PATH or ``JAVA_HOME``). The Python workers run this
    interpreter (``PYSPARK_PYTHON``) with the shuffledp package on their path.
    """

    name = "spark"

    def __init__(self, master: str = "local[2]", session: Any = None, app_name: str = "shuffledp",
                 conf: dict[str, str] | None = None) -> None:
        try:
            from pyspark.sql import SparkSession
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ModuleNotFoundError("the spark engine needs pyspark: pip install 'shuffledp[spark]'",
                                      name="pyspark") from e
        self._own = session is None
        if session is None:
            if not isinstance(master, str) or not master:
                raise ValidationError(f"master must be a Spark master URL like local[2], got {master!r}",
                                      parameter="master")
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
            pypath = os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH", "")) if p)
            b = (SparkSession.builder.master(master).appName(app_name)
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.executorEnv.PYTHONPATH", pypath)
                 .config("spark.task.maxFailures", "4"))
            for k, v in (conf or {}).items():
                b = b.config(k, v)
            # getOrCreate returns a session that is already running in this process: that one is
            # used and left running on close
            running = SparkSession.getActiveSession() or getattr(SparkSession, "_instantiatedSession", None)
            self._own = running is None
            saved = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = pypath  # the JVM, and the Python workers it starts, inherit it
            try:
                session = b.getOrCreate()
            finally:
                if saved is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = saved
            session.sparkContext.setLogLevel("ERROR")
        self._session = session

    @property
    def session(self) -> Any:
        return self._session

    @property
    def workers(self) -> int:
        return int(self._session.sparkContext.defaultParallelism)

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        items = list(items)
        if not items:
            return []
        sc = self._session.sparkContext
        # one partition per item, so each item is one task; collect keeps the partition order
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_PANDAS_WARNING)
            return sc.parallelize(items, len(items)).map(fn).collect()

    def close(self) -> None:
        if self._session is not None and self._own:
            self._session.stop()
        self._session = None
