"""Memory planning: a domain or a simulated run that cannot fit is refused in one line before
anything of size d or n is allocated (``SHUFFLEDP_MEMORY_LIMIT`` makes the tests independent of
the machine: the available memory is the smallest of the machine's and that cap)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from typer.testing import CliRunner

from shuffledp import cli
from shuffledp.core.errors import ValidationError
from shuffledp.core.memory import MEMORY_LIMIT_ENV, available_memory, check_fits, format_bytes
from shuffledp.local import frequency_oracle
from shuffledp.local.registry import check_simulation_fits, run_memory_bytes

runner = CliRunner()
GB = 10**9


@pytest.fixture(scope="module", autouse=True)
def _commands():
    cli._register_commands()


def test_env_cap_lowers_available_memory(monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(123 << 20))
    assert available_memory() == 123 << 20
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "lots")
    with pytest.raises(ValidationError) as bad:
        available_memory()
    assert bad.value.parameter == MEMORY_LIMIT_ENV


def test_check_fits_refuses_in_one_line(monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(GB))
    check_fits(0.5 * GB, "small", parameter="d")
    with pytest.raises(ValidationError) as info:
        check_fits(3 * GB, "the thing", parameter="d", hint="use less")
    msg = str(info.value)
    assert "\n" not in msg and info.value.parameter == "d"
    assert format_bytes(3 * GB) in msg and format_bytes(GB) in msg and msg.endswith("; use less")


@pytest.mark.parametrize("name", ["olh", "blh", "grr", "oue", "hr", "cms"])
def test_absurd_domain_refused_by_the_constructor(monkeypatch, name):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(6 * GB))
    tracemalloc.start()
    try:
        with pytest.raises(ValidationError) as info:
            frequency_oracle(name, epsilon=1, d=10**9)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.parameter == "d"
    msg = str(info.value)
    assert "d=1000000000" in msg and "is available" in msg and "use d <=" in msg
    d_max = int(re.search(r"use d <= (\d+)", msg).group(1))
    assert peak < 16 << 20  # refused before allocating anything of size d
    assert 2 <= d_max < 10**9


def test_suggested_domain_is_accepted(monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(6 * GB))
    with pytest.raises(ValidationError) as info:
        frequency_oracle("olh", epsilon=1, d=10**9)
    d_max = int(re.search(r"use d <= (\d+)", str(info.value)).group(1))
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(6 * GB))
    from shuffledp.local.registry import check_domain_fits

    check_domain_fits("OptimizedLocalHashing", d_max)  # the suggestion fits
    with pytest.raises(ValidationError):
        check_domain_fits("OptimizedLocalHashing", 2 * d_max)


def test_simulate_huge_domain_exits_2_with_one_line_within_seconds():
    env = dict(os.environ, **{MEMORY_LIMIT_ENV: str(6 * GB), "COLUMNS": "80"})
    proc = subprocess.run([sys.executable, "-m", "shuffledp", "simulate", "--d", "1000000000", "--n", "1000"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not proc.stdout.strip(), proc.stdout  # the error goes to stderr, nothing to stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("error:") and "d=1000000000" in line and "n=1000" in line
    assert "is available" in line and "use d <=" in line
    assert "Traceback" not in proc.stderr


def test_simulate_suggests_a_chunk_that_fits(monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(GB))
    out = runner.invoke(cli.app, ["simulate", "--mechanism", "oue", "--d", "100000", "--n", "100000"])
    assert out.exit_code == 2
    assert len(out.output.strip().splitlines()) == 1, out.output
    m = re.search(r"chunk <= (\d+)", out.output)
    assert m and "d=100000" in out.output and "n=100000" in out.output and "cms, hcms" in out.output
    check_simulation_fits("oue", 1.0, 100000, 100000, int(m.group(1)))  # the suggested chunk fits
    with pytest.raises(ValidationError):
        check_simulation_fits("oue", 1.0, 100000, 100000, 2 * int(m.group(1)))


def test_default_simulation_fits_a_small_budget(monkeypatch):
    # the README's default job (olh, d = 1024, n = 10^6, chunk 2*10^5) plans well under 1 GB
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(GB))
    check_simulation_fits("olh", 1.0, 1024, 10**6, 200_000)


@pytest.mark.parametrize("name", ["grr", "oue", "sue", "olh", "blh", "hr", "ss", "cms", "hcms", "rappor"])
def test_plan_bounds_the_measured_peak(name):
    """The plan is an upper bound of the bytes numpy allocates in randomize + aggregate + estimate."""
    n, d = 20_000, 512
    mech = frequency_oracle(name, 1.0, d)
    rng = np.random.default_rng(5)
    x = rng.integers(0, d, n)
    tracemalloc.start()
    try:
        mech.estimate(mech.aggregate(mech.randomize(x, rng)), n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= run_memory_bytes(mech, n, n), (peak, run_memory_bytes(mech, n, n))


def test_randomize_refuses_a_batch_whose_reports_cannot_fit(monkeypatch):
    # OUE over d = 2^20 items: 128 KiB of packed bits per report; 10^5 users need ~25 GiB
    mech = frequency_oracle("oue", 1.0, 1 << 20)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(GB))
    x = np.zeros(100_000, dtype=np.int64)
    tracemalloc.start()
    try:
        with pytest.raises(ValidationError) as info:
            mech.randomize(x, 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.parameter == "values" and peak < 16 << 20
    c = int(re.search(r"chunks of <= (\d+) users", str(info.value)).group(1))
    assert 1 <= c < 100_000
    mech.randomize(x[:200], 0)  # a small batch is not planned at all
