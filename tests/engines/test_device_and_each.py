"""``aggregate --device`` and ``--each``. Archives of the device oracles (OLH, HR, SS, CMS, HCMS) counted with
PyTorch give the numpy counts and estimates, on every engine; other archives and a missing GPU are one clear error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from shuffledp.cli import _register_commands, app
from shuffledp.core.errors import ValidationError
from shuffledp.engines.archive import aggregate_archives, simulate_archive

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
_register_commands()


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    root = tmp_path_factory.mktemp("dev")
    simulate_archive("ldp_oracle", root / "olh", epsilon=2.0, delta=0.0, n=4000,
                     params={"d": 300, "oracle": "olh"}, seed=3, partitions=2, row_group=1000)
    simulate_archive("ldp_krr", root / "krr", epsilon=1.0, delta=0.0, n=6000, params={"d": 16}, seed=1, partitions=2)
    return root


def test_torch_cpu_counts_equal_numpy_on_local_and_dask(archives, dask_engine) -> None:
    pytest.importorskip("torch")
    _, ref, est = aggregate_archives([archives / "olh"])
    for eng in (None, dask_engine):
        info, stat, e = aggregate_archives([archives / "olh"], eng, device="torch-cpu")
        assert info.protocol.oracle.device == "torch-cpu"
        assert stat.dtype == ref.dtype and stat.tobytes() == ref.tobytes()
        np.testing.assert_array_equal(e.values, est.values)


@pytest.mark.parametrize("oracle,extra", [("hr", {}), ("ss", {}), ("hcms", {"oracle_params": {"hash_seed": 5, "k": 32}}),
                                          ("cms", {"oracle_params": {"hash_seed": 5, "k": 32, "m": 64}})])
def test_torch_cpu_other_oracles_equal_numpy(tmp_path, oracle, extra, dask_engine) -> None:
    pytest.importorskip("torch")
    simulate_archive("ldp_oracle", tmp_path / oracle, epsilon=2.0, delta=0.0, n=3000,
                     params={"d": 200, "oracle": oracle, **extra}, seed=4, partitions=2)
    _, ref, est = aggregate_archives([tmp_path / oracle])
    for eng in (None, dask_engine):
        info, stat, e = aggregate_archives([tmp_path / oracle], eng, device="torch-cpu")
        assert info.protocol.oracle.device == "torch-cpu"
        assert stat.dtype == ref.dtype and stat.tobytes() == ref.tobytes()
        assert e.values.tobytes() == est.values.tobytes() and e.stderr.tobytes() == est.stderr.tobytes()


def test_device_refusals(archives) -> None:
    with pytest.raises(ValidationError, match="ldp_oracle archives of blh, cms, hcms, hr, olh, ss") as e:
        aggregate_archives([archives / "krr"], device="torch-cpu")
    assert e.value.parameter == "device"
    with pytest.raises(ValidationError, match="device must be"):
        aggregate_archives([archives / "olh"], device="tpu")
    res = CliRunner().invoke(app, ["aggregate", str(archives / "krr"), "--device", "torch-cpu"])
    assert res.exit_code == 2 and "Traceback" not in res.output and "ldp_oracle archives" in res.output


def test_missing_gpu_fails_or_falls_back_when_asked(archives) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the refusal cannot be observed")
    res = CliRunner().invoke(app, ["aggregate", str(archives / "olh"), "--device", "cuda"])
    assert res.exit_code == 2 and "no CUDA GPU" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["aggregate", str(archives / "olh"), "--device", "cuda", "--device-fallback",
                                   "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    _, ref, _ = aggregate_archives([archives / "olh"])
    assert out["device"] == "cpu" and out["statistic"] == ref.reshape(-1).tolist()


# ---------------------------------------------------------------- several archives, one job

def test_each_archive_estimated_on_its_own_in_one_job(archives, tmp_path, dask_engine) -> None:
    """``aggregate --each A B``: one release per archive, each equal to aggregating it alone."""
    from shuffledp.engines.archive import aggregate_each

    paths = [archives / "olh", archives / "krr"]
    alone = [aggregate_archives([p]) for p in paths]
    for eng in (None, dask_engine):
        each = aggregate_each(paths, eng)
        for (i1, s1, e1), (i2, s2, e2) in zip(alone, each):
            assert i1.meta["task"] == i2.meta["task"] and s1.tobytes() == s2.tobytes()
            np.testing.assert_array_equal(e1.values, e2.values)
    out = tmp_path / "releases.json"
    res = CliRunner().invoke(app, ["aggregate", *map(str, paths), "--each", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rel = json.loads(res.output)
    assert [r["archive"] for r in rel] == [str(p) for p in paths] and json.loads(out.read_text()) == rel
    assert [r["statistic"] for r in rel] == [s.reshape(-1).tolist() for _, s, _ in alone]
    # without --each the two archives are one archive's parts: refused, one line naming the file
    res = CliRunner().invoke(app, ["aggregate", *map(str, paths)])
    assert res.exit_code == 2 and "Traceback" not in res.output and "another archive" in res.output
    with pytest.raises(ValidationError, match="no archive"):
        aggregate_each([])
