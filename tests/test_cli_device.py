"""``shuffledp simulate --device``: reaches the device oracles' aggregation (olh, blh, hr, ss, cms, hcms); a
missing GPU is one clear line."""

import pytest
from typer.testing import CliRunner

from shuffledp.cli import _register_commands, app

_register_commands()


def invoke(args: list[str]):
    return CliRunner().invoke(app, args)


def _one_line_error(res, *words: str) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output, res.output
    for w in words:
        assert w in lines[0], res.output
    return lines[0]


BASE = ["simulate", "--mechanism", "olh", "--d", "300", "--n", "2000", "--seed", "3", "--top", "3"]


def test_device_cpu_is_default_and_torch_cpu_gives_same_table():
    pytest.importorskip("torch")
    a = invoke(BASE)
    b = invoke(BASE + ["--device", "torch-cpu"])
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output

    def rows(out: str) -> list[str]:  # the table without its title (which carries the wall time)
        return [ln for ln in out.splitlines() if "│" in ln]
    assert rows(a.output) and rows(a.output) == rows(b.output)


@pytest.mark.parametrize("mechanism", ["hr", "ss", "cms", "hcms"])
def test_device_accepted_for_every_device_oracle(mechanism):
    """The table of a torch-cpu run is the numpy run's, row for row (same statistic, same estimate)."""
    pytest.importorskip("torch")
    args = ["simulate", "--mechanism", mechanism, "--d", "200", "--n", "3000", "--seed", "3", "--top", "4",
            "--chunk", "1000"]
    a, b = invoke(args), invoke(args + ["--device", "torch-cpu"])
    assert a.exit_code == 0 and b.exit_code == 0, a.output + b.output

    def rows(out: str) -> list[str]:
        return [ln for ln in out.splitlines() if "│" in ln or ln.startswith("MSE")]
    assert rows(a.output) and rows(a.output) == rows(b.output)


def test_missing_cuda_is_one_line_and_fallback_runs():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("checks the message for a missing GPU")
    _one_line_error(invoke(BASE + ["--device", "cuda"]), "device", "no CUDA GPU", "--device-fallback")
    res = invoke(BASE + ["--device", "cuda", "--device-fallback"])
    assert res.exit_code == 0, res.output


def test_device_refused_for_other_mechanisms_and_bad_names():
    _one_line_error(invoke(["simulate", "--mechanism", "grr", "--d", "10", "--n", "100", "--device", "cuda"]),
                    "--device", "olh, ss", "'grr'")
    _one_line_error(invoke(BASE + ["--device", "tpu"]), "device")
