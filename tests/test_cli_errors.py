"""Wrong usage of the ``shuffledp`` command line: one line naming the parameter, exit code 2.

Every case checks the exit code, that the output is exactly one ``error: ...`` line naming the
parameter, and that no traceback or warning is printed. ``demo`` and ``serve`` are checked to
refuse before any service starts (starting one fails the test instead of hanging it).
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from shuffledp.cli import _register_commands, app, parse_count

_register_commands()


@pytest.fixture
def no_services(monkeypatch):
    """Make starting a service an error: the refusals below must come before any start."""
    from shuffledp.service import harness, serve

    def started(*a, **k):
        raise AssertionError("a service was started")

    monkeypatch.setattr(harness.Deployment, "__init__", started)
    monkeypatch.setattr(serve, "build_app", started)


@pytest.fixture(autouse=True)
def _logging_state_restored(restore_logging):
    """Whatever a command does to the process's logging (``serve`` calls ``dictConfig``) ends with the test."""
    yield


def invoke(args: list[str]):
    return CliRunner().invoke(app, args)


def assert_one_line_error(res, *names: str) -> str:
    out = res.output
    assert res.exit_code == 2, out
    assert "Traceback" not in out and "Warning" not in out, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out
    for name in names:
        assert name in lines[0], out
    return lines[0]


DEMO_CASES = [
    (["--n", "0"], "--n", ">= 1"),
    (["--n", "1e2"], "--n", "minimum batch size"),      # below the task's minimum batch size (532)
    (["--n", "1.5e0"], "--n", "integer"),
    (["--mechanism", "foo"], "--mechanism", "grr"),
    (["--eps-central", "0"], "--eps-central", "> 0"),
    (["--eps", "-1"], "--epsilon", "> 0"),
    (["--delta", "1"], "--delta", "(0, 1)"),
    (["--d", "1"], "--d", ">= 2"),
    (["--eps-central", "1e-6"], "--eps-central", "unreachable"),
    (["--out", "/proc/nope"], "--out", "/proc/nope"),
]


@pytest.mark.parametrize("args,name,text", DEMO_CASES)
def test_demo_refuses_before_starting_services(args, name, text, no_services):
    line = assert_one_line_error(invoke(["demo", *args]), name)
    assert text in line


@pytest.mark.parametrize("args,name,text", [
    (["--protocol", "foo"], "--protocol foo", "unknown protocol"),
    (["--protocol", "cnt_2m", "--eps-central", "2"], "--protocol cnt_2m", "epsilon <= 1"),
    (["--protocol", "hist_kr", "--param", "nokey"], "--param", "KEY=VALUE"),
    (["--protocol", "hist_kr", "--param", "bogus=1"], "--protocol hist_kr", "bogus"),
    (["--n", "1000"], "--n/--delta", "cnt_2m"),   # enough for the oracle task, too few for Cnt_2M
])
def test_demo_protocol_refuses_before_starting_services(args, name, text, no_services):
    line = assert_one_line_error(invoke(["demo", *args]), name)
    assert text in line


@pytest.mark.parametrize("args,name", [
    (["analyzer", "--db", "notaurl"], "--db"),
    (["analyzer", "--db", "mysql://u@h/x"], "--db"),
    (["shuffler", "--db", "sqlite://"], "--db"),                           # in-memory: loses every report
    (["analyzer", "--db", "sqlite:////nonexistent-dir/x.db"], "--db"),
    (["analyzer", "--db", "postgresql://nobody@127.0.0.1:1/x"], "--db"),   # nothing listens on port 1
    (["analyzer", "--db", "sqlite:///{tmp}/a.db", "--port", "99999"], "--port"),
    (["analyzer", "--db", "sqlite:///{tmp}/a.db", "--port", "-1"], "--port"),
    (["collector", "--db", "sqlite:///{tmp}/a.db"], "ROLE"),
    (["shuffler", "--db", "sqlite:///{tmp}/a.db", "--tick", "0"], "--tick"),
    (["shuffler", "--db", "sqlite:///{tmp}/a.db", "--close-delay", "-1"], "--close-delay"),
])
def test_serve_refuses_before_starting(args, name, tmp_path, no_services):
    line = assert_one_line_error(invoke(["serve", *[a.format(tmp=tmp_path) for a in args]]), name)
    assert "[0, 65535]" in line if name == "--port" else True


def test_serve_refuses_a_port_in_use(tmp_path):
    """A bind failure (port taken) is one line naming --host/--port, after the app was built."""
    # in a subprocess: this refusal comes after `serve` configured the process's logging (a handler on
    # the stderr of the moment), which in-process would outlive the test on a closed stream
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "shuffledp", "serve", "analyzer", "--db",
                               f"sqlite:///{tmp_path / 'a.db'}", "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    out = proc.stdout + proc.stderr
    line = out.strip().splitlines()[-1]
    assert proc.returncode == 2 and "Traceback" not in out, out
    assert line.startswith("error: --host/--port: cannot listen on 127.0.0.1:") and str(port) in line


def test_serve_module_entry_point_refuses_in_one_line(capsys):
    """``python -m shuffledp.service.serve`` (what the harness runs) refuses the same way."""
    from shuffledp.service.serve import main

    for argv in (["analyzer", "--db", "notaurl"], ["analyzer", "--db", "sqlite:///x.db", "--port", "99999"]):
        with pytest.raises(SystemExit) as ex:
            main(argv)
        err = capsys.readouterr().err
        assert ex.value.code == 2 and "Traceback" not in err
        assert ("--db" in err or "--port" in err) and err.strip().splitlines()[-1].count("error") == 1


@pytest.mark.parametrize("command", ["amplification-tables", "survey", "keyvalue"])
def test_experiments_refuse_an_unwritable_out(command):
    assert_one_line_error(invoke(["experiment", command, "--quick", "--out", "/proc/nope"]), "--out", "/proc/nope")


@pytest.mark.parametrize("command", ["amplification-tables", "survey", "keyvalue"])
@pytest.mark.parametrize("flags", [[], ["--quick", "--full"]])
def test_experiments_take_exactly_one_of_quick_or_full(command, flags, tmp_path):
    assert_one_line_error(invoke(["experiment", command, *flags, "--out", str(tmp_path)]), "--quick", "--full")


@pytest.mark.parametrize("args,name", [
    (["simulate", "--n", "1.5e0"], "--n"),
    (["simulate", "--n", "0"], "--n"),
    (["simulate", "--d", "1"], "--d"),
    (["simulate", "--eps", "abc"], "--eps"),
    (["simulate", "--bogus"], "--bogus"),
    (["experiment", "keyvalue", "--quick", "--runs", "1"], "--runs"),
])
def test_other_bad_arguments(args, name):
    assert_one_line_error(invoke(args), name)


def test_version():
    from shuffledp import __version__

    res = invoke(["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"shuffledp {__version__}"


@pytest.mark.parametrize("text,value", [("1000000", 10**6), ("1e6", 10**6), ("1E6", 10**6), ("1_000_000", 10**6),
                                        ("2.5e3", 2500), ("1e30", 10**30), (" 7 ", 7)])
def test_parse_count_reads_integral_numbers_exactly(text, value):
    assert parse_count(text) == value and type(parse_count(text)) is int


@pytest.mark.parametrize("text", ["1.5e0", "1e-3", "0.5", "nan", "inf", "abc", "", "0", "-1e3"])
def test_parse_count_refuses_non_integers_and_out_of_range(text):
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        parse_count(text)


def test_n_accepts_scientific_notation():
    res = invoke(["simulate", "--n", "1e3", "--d", "8", "--top", "2"])
    assert res.exit_code == 0, res.output
    assert "n=1,000" in res.output


@pytest.mark.parametrize("args,module,extra", [
    (["demo"], "fastapi", "service"),
    (["demo"], "matplotlib", "plots"),
    (["serve", "analyzer", "--db", "sqlite:///x.db"], "uvicorn", "service"),
    (["serve", "analyzer", "--db", "sqlite:///x.db"], "sqlalchemy", "service"),
    (["experiment", "amplification-tables", "--quick"], "matplotlib", "plots"),
    (["experiment", "survey", "--quick"], "matplotlib", "plots"),
    (["experiment", "keyvalue", "--quick"], "matplotlib", "plots"),
])
def test_missing_extra_is_one_line(args, module, extra, monkeypatch, tmp_path, no_services):
    """Without an optional dependency: one line naming the extra, nothing written (survey included)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ModuleNotFoundError
    line = assert_one_line_error(invoke(args), module, f"pip install 'shuffledp[{extra}]'")
    assert line.startswith(f"error: `shuffledp {' '.join(a for a in args[:2] if not a.startswith('-'))}`")
    assert not any(tmp_path.rglob("*.html")) and not any(tmp_path.rglob("*.csv"))


def test_missing_extra_inside_a_command_is_one_line(monkeypatch):
    """A command that imports a missing optional module itself also ends in one line, exit 2."""
    import typer

    from shuffledp.cli import OneLineErrorsGroup

    t = typer.Typer(cls=OneLineErrorsGroup)

    @t.command()
    def fetch() -> None:
        import httpx  # noqa: F401

    @t.command()
    def other() -> None:
        pass

    monkeypatch.setitem(sys.modules, "httpx", None)
    assert_one_line_error(CliRunner().invoke(t, ["fetch"]), "httpx", "pip install 'shuffledp[service]'")


class _Stop(Exception):
    pass


@pytest.mark.parametrize("command,module,func,folder", [
    ("keyvalue", "shuffledp.experiments.keyvalue", "run_keyvalue_experiment", "keyvalue"),
    ("survey", "shuffledp.experiments.survey", "run_survey", "survey"),
    ("amplification-tables", "shuffledp.experiments.amplification", "run", "amplification"),
])
@pytest.mark.parametrize("flag", ["--quick", "--full"])
def test_quick_runs_never_write_into_the_committed_results(command, module, func, folder, flag, monkeypatch,
                                                           tmp_path):
    """--quick writes results/<name>-quick/, --full results/<name>/ (the committed results it reproduces)."""
    import importlib

    seen = {}

    def fake(cfg_or_out, *a, **k):
        seen["out"] = getattr(cfg_or_out, "outdir", cfg_or_out)
        raise _Stop

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(importlib.import_module(module), func, fake)
    res = invoke(["experiment", command, flag])
    assert isinstance(res.exception, _Stop), res.output
    want = f"results/{folder}-quick" if flag == "--quick" else f"results/{folder}"
    assert str(seen["out"]) == want
