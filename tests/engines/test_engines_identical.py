"""The same archive estimated through local, dask and spark gives bit-identical statistics.

For every protocol of the registry with a client side (local and shuffle model; the central
baselines' ``aggregate`` is the curator's noisy release and is refused by the engines), a small
batch is simulated into a multi-partition archive; the statistic merged over the partitions must
equal ``aggregate`` of the whole batch (the statistics are integer, so equality is exact) and be
the same array, dtype and estimate on every engine.
"""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.core.errors import OutOfDomainError
from shuffledp.engines import LocalEngine
from shuffledp.engines.archive import aggregate_archives, aggregate_partitions, read_partition, simulate_archive
from shuffledp.shuffle import available_protocols
from shuffledp.shuffle.base import concat_messages

#: pyspark's notice about untested pandas versions (no pandas object goes to Spark here)
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
from shuffledp.shuffle.registry import protocol_class, protocol_parameters

#: parameters at which each protocol builds with a small batch (default n=8000, eps=1, d=16)
CONFIG: dict[str, dict] = {
    "cnt_rr": {"calibration": "clones"},
    "aut": {"n": 13000},
    "prhr": {"n": 2000},
    "rsum_rr": {"n": 2000},
    "distinct": {"n": 2000},
    "put": {"n": 2000},
    "pucm": {"n": 5000, "epsilon": 2.0, "tau": 3, "s": 16},
    "fragmenting": {"k": 2, "n": 14000},
    "sample_one": {"k": 2},
    "ldp_oracle": {"oracle": "oue"},
}

CLIENT_PROTOCOLS = [p for p in available_protocols() if protocol_class(p).model != "central"]


def spec(name: str) -> dict:
    cfg = dict(CONFIG.get(name, {}))
    model = protocol_class(name).model
    out = {"n": cfg.pop("n", 8000), "epsilon": cfg.pop("epsilon", 1.0),
           "delta": 1e-6 if model == "shuffle" else 0.0}
    accepted = protocol_parameters(name)
    if accepted is None or "d" in accepted:
        cfg.setdefault("d", 16)
    out["params"] = cfg
    return out


_ARCHIVES: dict[str, tuple] = {}


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    root = tmp_path_factory.mktemp("archives")

    def get(name: str):
        if name not in _ARCHIVES:
            s = spec(name)
            try:
                info = simulate_archive(name, root / name, epsilon=s["epsilon"], delta=s["delta"], n=s["n"],
                                        params=s["params"], seed=7, partitions=3, row_group=1 << 15)
            except OutOfDomainError as e:
                _ARCHIVES[name] = ("skip", f"{name} cannot be built at {s}: {e}")
            else:
                _ARCHIVES[name] = ("ok", info, aggregate_archives([root / name], LocalEngine()))
        entry = _ARCHIVES[name]
        if entry[0] == "skip":
            pytest.skip(entry[1])
        return entry[1], entry[2]

    yield get
    _ARCHIVES.clear()


def test_every_client_protocol_is_covered():
    assert len(CLIENT_PROTOCOLS) >= 20, CLIENT_PROTOCOLS
    assert not {"cdp_laplace_count", "cdp_laplace_hist", "cdp_laplace_sum"} & set(CLIENT_PROTOCOLS)


@pytest.mark.parametrize("name", CLIENT_PROTOCOLS)
def test_local_merge_equals_whole_batch(archives, name):
    info, (_, stat, est) = archives(name)
    assert len(info.partitions) >= 3
    whole = concat_messages([read_partition(p) for p in info.partitions])
    expected = np.asarray(info.protocol.aggregate(whole))
    assert stat.dtype == expected.dtype and np.array_equal(stat, expected)
    assert np.all(np.isfinite(est.values))


@pytest.mark.parametrize("name", CLIENT_PROTOCOLS)
def test_dask_bit_identical(archives, dask_engine, name):
    info, (_, stat, est) = archives(name)
    got = aggregate_partitions(info.protocol, info.partitions, dask_engine)
    assert got.dtype == stat.dtype and got.tobytes() == stat.tobytes()
    assert info.protocol.estimate(got, info.users).values.tobytes() == est.values.tobytes()


@pytest.mark.parametrize("name", CLIENT_PROTOCOLS)
def test_spark_bit_identical(archives, spark_engine, name):
    info, (_, stat, est) = archives(name)
    got = aggregate_partitions(info.protocol, info.partitions, spark_engine)
    assert got.dtype == stat.dtype and got.tobytes() == stat.tobytes()
    assert info.protocol.estimate(got, info.users).values.tobytes() == est.values.tobytes()
