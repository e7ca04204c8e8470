"""Engine fixtures: one Dask LocalCluster and one Spark session for the whole run, for every test
directory (loaded by ``tests/conftest.py`` as a plugin).

Without dask.distributed, pyspark or a Java runtime the engine tests skip, naming what is
missing; with ``SHUFFLEDP_REQUIRE_ENGINES=1`` (set in CI) those skips are failures instead, so
CI cannot pass without running them.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE = os.environ.get("SHUFFLEDP_REQUIRE_ENGINES") == "1"


def pytest_collection_modifyitems(config, items):
    """Mark every test that runs on Dask or Spark ``engines`` (``-m "not engines"`` leaves them out)."""
    for item in items:
        if {"dask_engine", "spark_engine"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.engines)


def unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"{reason} (SHUFFLEDP_REQUIRE_ENGINES=1 requires the engine tests to run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def dask_engine():
    try:
        import distributed  # noqa: F401
    except ImportError:
        unavailable("dask.distributed is not installed (pip install 'shuffledp[dask]')")
    from shuffledp.engines.dask_engine import DaskEngine

    eng = DaskEngine(workers=2)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def spark_engine():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        unavailable("pyspark is not installed (pip install 'shuffledp[spark]')")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        unavailable("Spark needs a Java runtime (java on the PATH or JAVA_HOME)")
    from shuffledp.engines.spark_engine import SparkEngine

    eng = SparkEngine("local[2]")
    yield eng
    eng.close()
