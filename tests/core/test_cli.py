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
