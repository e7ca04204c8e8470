"""The documentation site: every ```python block of docs/tutorials/*.md runs, and `mkdocs build --strict` passes.

The blocks of one tutorial run in order in one namespace (later blocks use earlier names), with
the working directory set to a temporary folder. Each block should take under 5 s on a laptop;
the test fails one over ``BLOCK_LIMIT_S`` (a guard with room for a loaded CI machine).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
BLOCK_LIMIT_S = 15.0
_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block."""
    text = path.read_text(encoding="utf-8")
    return [(text[:m.start()].count("\n") + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def test_every_tutorial_is_found_and_the_ones_with_code_have_python_blocks():
    names = {p.stem for p in TUTORIALS}
    assert {"histogram-million-clients", "pick-a-protocol", "deploy-services", "year-of-daily-collection"} <= names
    for p in TUTORIALS:
        if p.stem != "deploy-services":  # that one is shell commands and pointers
            assert python_blocks(p), p


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_code_runs(path, tmp_path, monkeypatch, capsys):
    if path.stem == "histogram-million-clients":
        pytest.importorskip("pandas")  # the tutorial mentions to_pandas; its blocks do not need it
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": f"docs_{path.stem.replace('-', '_')}"}
    for line, code in python_blocks(path):
        t0 = time.perf_counter()
        try:
            exec(compile(code, f"{path.name}:{line}", "exec"), namespace)
        except Exception as e:  # name the block that failed
            raise AssertionError(f"{path.name}, block at line {line} failed: {type(e).__name__}: {e}") from e
        took = time.perf_counter() - t0
        assert took < BLOCK_LIMIT_S, f"{path.name}, block at line {line} took {took:.1f} s"


def test_mkdocs_build_strict(tmp_path):
    if shutil.which("mkdocs") is None and not _has_module("mkdocs"):
        pytest.skip("mkdocs is not installed: pip install 'shuffledp[docs]' (mkdocs-material, mkdocstrings[python])")
    for mod in ("material", "mkdocstrings_handlers.python"):
        if not _has_module(mod):
            pytest.skip(f"{mod} is not installed: pip install 'shuffledp[docs]'")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
                          "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=_env())
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "api" / "accounting" / "index.html").exists()
    assert "PrivacySession" in (tmp_path / "site" / "api" / "accounting" / "index.html").read_text(encoding="utf-8")


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _env() -> dict:
    import os

    env = dict(os.environ)
    env["NO_MKDOCS_2_WARNING"] = "1"
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
