"""``aggregate --device``: local-hashing archives counted with PyTorch give the numpy counts, on
every engine; other archives and a missing GPU are one clear error."""

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


def test_device_refusals(archives) -> None:
    with pytest.raises(ValidationError, match="local hashing") as e:
        aggregate_archives([archives / "krr"], device="torch-cpu")
    assert e.value.parameter == "device"
    with pytest.raises(ValidationError, match="device must be"):
        aggregate_archives([archives / "olh"], device="tpu")
    res = CliRunner().invoke(app, ["aggregate", str(archives / "krr"), "--device", "torch-cpu"])
    assert res.exit_code == 2 and "Traceback" not in res.output and "local hashing" in res.output


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
