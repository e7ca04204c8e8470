"""Run protocols' analyzers (and simulated encoders) on existing engines: in process, Dask, Spark.

``get_engine("local" | "dask" | "spark", **options)`` returns an :class:`Engine`;
:mod:`shuffledp.engines.archive` reads and writes the columnar report archive (Parquet) and
estimates from archives on any engine with the same statistic, bit for bit.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import ValidationError
from .base import Engine, check_engine_protocol, merge_statistics
from .local import LocalEngine

__all__ = ["ENGINES", "Engine", "LocalEngine", "get_engine", "merge_statistics", "check_engine_protocol"]

#: engine name -> (module, class); dask and spark load lazily (optional extras)
ENGINES: dict[str, tuple[str, str]] = {
    "local": ("local", "LocalEngine"),
    "dask": ("dask_engine", "DaskEngine"),
    "spark": ("spark_engine", "SparkEngine"),
}


def get_engine(name: str = "local", **options: Any) -> Engine:
    """The engine ``name`` built with ``options`` (``dask``: ``scheduler=``, ``workers=``;
    ``spark``: ``master=``, ``session=``)."""
    import importlib

    key = name.lower() if isinstance(name, str) else name
    if key not in ENGINES:
        raise ValidationError(f"unknown engine {name!r}; choose one of {sorted(ENGINES)}", parameter="engine")
    module, cls = ENGINES[key]
    return getattr(importlib.import_module(f"{__package__}.{module}"), cls)(**options)
