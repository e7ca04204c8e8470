"""The README's main simulation job (`shuffledp simulate`) and the command tree."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from shuffledp import cli

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _commands():
    cli._register_commands()


def test_help_lists_commands():
    out = runner.invoke(cli.app, ["--help"])
    assert out.exit_code == 0
    for cmd in ("simulate", "experiment"):
        assert cmd in out.output


@pytest.mark.parametrize("mech", ["grr", "oue", "olh", "hr", "cms", "hcms", "rappor", "ss", "sue", "blh"])
def test_simulate_prints_table_privacy_and_sane_mse_ratio(mech):
    out = runner.invoke(cli.app, ["simulate", "--mechanism", mech, "--n", "20000", "--d", "32",
                                  "--eps", "2", "--top", "5", "--chunk", "7000", "--seed", "3"])
    assert out.exit_code == 0, out.output
    assert "true fraction" in out.output and "95% CI" in out.output
    assert "Privacy:" in out.output and "local" in out.output
    m = re.search(r"ratio ([0-9.]+)", out.output)
    assert m, out.output
    # MSE over 32 items / mean closed-form variance: chi-square-like with ~32 dof, so the ratio is
    # within [0.3, 2.5] with overwhelming probability when the estimator and its variance agree.
    assert 0.3 < float(m.group(1)) < 2.5, out.output


def test_simulate_bad_parameter_is_a_clear_error():
    out = runner.invoke(cli.app, ["simulate", "--mechanism", "grr", "--eps", "-1", "--n", "10"])
    assert out.exit_code == 2
    assert "error" in out.output and "eps" in out.output.lower()
    out = runner.invoke(cli.app, ["simulate", "--mechanism", "nope", "--n", "10"])
    assert out.exit_code == 2 and "unknown frequency oracle" in out.output


@pytest.mark.parametrize("args,param", [
    (["--n", "0"], "n"),
    (["--n", "-5"], "n"),
    (["--chunk", "0"], "chunk"),
    (["--chunk", "-1"], "chunk"),
    (["--top", "0"], "top"),
    (["--d", "1"], "d"),
    (["--d", "0"], "d"),
    (["--zipf", "nan"], "zipf"),
    (["--seed", "-1"], "seed"),
    (["--eps", "nan"], "eps"),
])
def test_simulate_bad_sizes_are_clear_errors_not_tracebacks(args, param):
    base = {"--mechanism": "grr", "--n": "100", "--d": "8", "--chunk": "50", "--top": "3"}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    out = runner.invoke(cli.app, ["simulate", *[t for kv in base.items() for t in kv]])
    assert out.exit_code == 2, (out.exit_code, out.output, out.exception)
    assert out.exception is None or isinstance(out.exception, SystemExit), repr(out.exception)
    assert "error:" in out.output and param in out.output.lower(), out.output
    assert "Traceback" not in out.output
