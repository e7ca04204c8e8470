"""Distributed encoding is reproducible across engines; a Dask worker killed mid-job changes nothing."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

from shuffledp.engines import LocalEngine, merge_statistics
from shuffledp.engines.archive import (_aggregate_partition, aggregate_archives, aggregate_partitions,
                                       read_partition, simulate_archive)
from shuffledp.shuffle import protocol
from shuffledp.shuffle.base import concat_messages

#: pyspark's notice about untested pandas versions (no pandas object goes to Spark here)
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


def archive_columns(info):
    return [(p.path.rsplit("/", 1)[-1], p.row_group, read_partition(p)) for p in info.partitions]


def assert_same_archive(a, b):
    assert a.meta["task"] == b.meta["task"]
    ca, cb = archive_columns(a), archive_columns(b)
    assert [x[:2] for x in ca] == [x[:2] for x in cb]
    for (_, _, ma), (_, _, mb) in zip(ca, cb):
        assert ma.keys() == mb.keys()
        for c in ma:
            assert ma[c].dtype == mb[c].dtype and np.array_equal(ma[c], mb[c])


SIM = dict(epsilon=1.0, delta=1e-6, n=9000, seed=11, partitions=3, row_group=2000)


def test_same_seed_same_archive_in_process(tmp_path):
    a = simulate_archive("slh", tmp_path / "a", params={"d": 32}, **SIM)
    b = simulate_archive("slh", tmp_path / "b", params={"d": 32}, **SIM)
    assert_same_archive(a, b)
    c = simulate_archive("slh", tmp_path / "c", params={"d": 32}, **{**SIM, "seed": 12})
    assert c.meta["task"] != a.meta["task"]
    assert not np.array_equal(read_partition(c.partitions[0])["y"], read_partition(a.partitions[0])["y"])


def test_archive_is_a_shuffle_of_the_encoded_batch(tmp_path):
    """Every user contributes exactly its messages (multiset of encoded messages == archive's)."""
    p = protocol("ldp_krr", epsilon=1.0, d=8)
    info = simulate_archive("ldp_krr", tmp_path / "a", epsilon=1.0, delta=0.0, n=6000, params={"d": 8}, seed=3,
                            partitions=4, row_group=1000)
    ss = np.random.SeedSequence(3).spawn(9)
    from shuffledp.engines.archive import _bounds, synthetic_values

    sent = []
    b = _bounds(6000, 4)
    for j in range(4):
        rng = np.random.default_rng(ss[j])
        sent.append(p.encode(synthetic_values(p, int(b[j + 1] - b[j]), rng), rng)["y"])
    got = concat_messages([read_partition(q) for q in info.partitions])["y"]
    sent = np.concatenate(sent)
    assert np.array_equal(np.sort(got), np.sort(sent))
    assert not np.array_equal(got, sent)  # permuted


@pytest.mark.parametrize("name,params", [("slh", {"d": 32}), ("fragmenting", {"d": 8, "k": 2})])
def test_dask_encoding_equals_local(tmp_path, dask_engine, name, params):
    sim = {**SIM, "n": 14000} if name == "fragmenting" else SIM
    a = simulate_archive(name, tmp_path / "local", params=params, **sim)
    b = simulate_archive(name, tmp_path / "dask", params=params, engine=dask_engine, **sim)
    assert_same_archive(a, b)
    assert b.meta["shuffler"] == (name == "fragmenting")


def test_spark_encoding_equals_local(tmp_path, spark_engine):
    a = simulate_archive("slh", tmp_path / "local", params={"d": 32}, **SIM)
    b = simulate_archive("slh", tmp_path / "spark", params={"d": 32}, engine=spark_engine, **SIM)
    assert_same_archive(a, b)


# --- a worker killed mid-job ------------------------------------------------------------------

def slow_aggregate(protocol, part):
    time.sleep(0.4)
    return _aggregate_partition(protocol, part)


def test_dask_worker_killed_mid_job_same_result(tmp_path, dask_engine):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    info = simulate_archive("slh", tmp_path / "a", params={"d": 32}, **{**SIM, "row_group": 600})
    assert len(info.partitions) >= 15
    expected = aggregate_partitions(info.protocol, info.partitions, LocalEngine())
    client = dask_engine.client
    pids = client.run(os.getpid)  # worker address -> pid
    out: dict = {}

    def job():
        out["results"] = dask_engine.map(functools.partial(slow_aggregate, info.protocol), info.partitions)

    t = threading.Thread(target=job)
    t.start()
    deadline = time.time() + 60
    while not any(client.processing().values()) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # some tasks done, others running
    victim = next(a for a, tasks in client.processing().items() if tasks)
    assert t.is_alive(), "the job ended before the kill"
    os.kill(pids[victim], signal.SIGKILL)
    t.join(180)
    assert not t.is_alive()
    with pytest.raises(ProcessLookupError):
        os.kill(pids[victim], 0)  # the worker did die mid-job
    stats = [v for status, v in out["results"] if status == "ok"]
    assert len(stats) == len(info.partitions)
    got = merge_statistics(info.protocol, stats)
    assert got.tobytes() == expected.tobytes()
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it for the next tests


def test_aggregate_archives_on_dask_matches_local(tmp_path, dask_engine):
    simulate_archive("ldp_oracle", tmp_path / "a", epsilon=1.0, delta=0.0, n=5000,
                     params={"d": 64, "oracle": "hcms"}, seed=2, partitions=2, row_group=1000)
    _, s1, e1 = aggregate_archives([tmp_path / "a"])
    _, s2, e2 = aggregate_archives([tmp_path / "a"], dask_engine)
    assert s1.tobytes() == s2.tobytes() and e1.values.tobytes() == e2.values.tobytes()


def test_keyed_aggregation_in_one_job(tmp_path, dask_engine):
    """Two tasks (two protocols) aggregated per key in one engine job, each equal to its own run."""
    from shuffledp.engines.archive import aggregate_keyed, open_archives

    a = simulate_archive("slh", tmp_path / "a", params={"d": 32}, **SIM)
    b = simulate_archive("ldp_krr", tmp_path / "b", epsilon=1.0, delta=0.0, n=4000, params={"d": 8}, seed=5,
                         partitions=2, row_group=1000)
    jobs = {"slh": (a.protocol, a.partitions), "krr": (b.protocol, b.partitions)}
    for eng in (LocalEngine(), dask_engine):
        got = aggregate_keyed(jobs, eng)
        assert set(got) == {"slh", "krr"}
        for key, info in (("slh", a), ("krr", b)):
            want = aggregate_partitions(info.protocol, info.partitions, LocalEngine())
            assert got[key].tobytes() == want.tobytes()
    assert open_archives([tmp_path / "b"]).meta["task"] != a.meta["task"]
