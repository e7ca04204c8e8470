"""Every experiment report renders in a real headless browser with all its images decoded.

The reports embed a small script (``shuffledp.experiments.report_html.CHECK_SCRIPT``) that, once the
page has loaded, writes on ``<body>`` how many images decoded and which did not; Chromium's
``--dump-dom`` shows those attributes. Independently of the browser, every ``<img src>`` must exist
and decode as an image (PIL). Skipped when no Chromium is installed (Debian: ``apt-get install -y
chromium``).
"""

from __future__ import annotations

import re
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from shuffledp.experiments import report_html

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="no headless browser: install Debian's Chromium "
                                                            "(apt-get install -y chromium) to render the reports")
COMMITTED = sorted((ROOT / "results").glob("*/index.html"))
if CHROMIUM is None and os.environ.get("SHUFFLEDP_REQUIRE_BROWSER"):   # CI installs it: fail, never skip
    raise RuntimeError("SHUFFLEDP_REQUIRE_BROWSER is set but no chromium is on PATH")


def _render(page: Path, profile: Path) -> str:
    """The DOM after load, from headless Chromium."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={profile}", "--virtual-time-budget=15000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout


def _body_attrs(dom: str) -> dict[str, str]:
    m = re.search(r"<body([^>]*)>", dom)
    assert m, "no <body> in the rendered DOM"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))


def _img_srcs(text: str) -> list[str]:
    return re.findall(r"<img\b[^>]*\bsrc=['\"]([^'\"]+)['\"]", text)


def broken_images(page: Path, profile: Path) -> list[str]:
    """Problems with ``page``: images the browser could not decode, images missing on disk or not
    decodable, a page that did not run the check; [] when everything renders."""
    from PIL import Image

    html = page.read_text(encoding="utf-8")
    problems = []
    if not html.lstrip().lower().startswith("<!doctype html>"):
        problems.append("no <!doctype html>")
    if "<meta charset='utf-8'>" not in html and '<meta charset="utf-8">' not in html:
        problems.append("no UTF-8 charset declaration")
    srcs = _img_srcs(html)
    for src in srcs:
        f = page.parent / src
        if not f.is_file():
            problems.append(f"{src}: file missing")
            continue
        try:
            with Image.open(f) as im:
                im.load()
        except Exception as e:  # noqa: BLE001 - any decoding failure is a broken image
            problems.append(f"{src}: does not decode ({type(e).__name__})")
    attrs = _body_attrs(_render(page, profile))
    if attrs.get("data-images-checked") != "1":
        problems.append("the page's image check did not run in the browser")
    else:
        problems += [f"{s}: broken in the browser" for s in attrs.get("data-images-broken", "").split()]
        if int(attrs.get("data-images-ok", "0")) != len(srcs):
            problems.append(f"browser decoded {attrs.get('data-images-ok')} of {len(srcs)} images")
    return problems


# ------------------------------------------------------------------------- the checker itself
@needs_browser
def test_checker_catches_missing_and_corrupt_images(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    fig.savefig(tmp_path / "good.png")
    plt.close(fig)
    (tmp_path / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really a png")
    page = report_html.write_page(tmp_path / "index.html", "t", [
        report_html.figure(tmp_path, "good.png", "good", "read it"),
        report_html.figure(tmp_path, ["missing.png", "corrupt.png"], "bad", "read it")])
    problems = broken_images(page, tmp_path / "profile")
    assert "missing.png: file missing" in problems
    assert any(p.startswith("corrupt.png: does not decode") for p in problems)
    assert "missing.png: broken in the browser" in problems and "corrupt.png: broken in the browser" in problems
    assert not any(p.startswith("good.png") for p in problems)
    # a page with only the good image passes
    ok = report_html.write_page(tmp_path / "ok.html", "t", [report_html.figure(tmp_path, "good.png", "g", "r")])
    assert broken_images(ok, tmp_path / "profile") == []


# ------------------------------------------------------------------------- fresh reports
@needs_browser
def test_survey_report_renders(tmp_path):
    from shuffledp.experiments.survey import rebuild_report, run_survey

    from .test_survey import factory, tiny_config

    cfg = tiny_config(tmp_path / "survey")
    page = run_survey(cfg, factory=factory, progress_bar=False)
    assert broken_images(page, tmp_path / "profile") == []
    # the report-only path re-renders the same folder from its CSVs
    (page.parent / "fig08_time.png").unlink()
    page = rebuild_report(page.parent)
    assert broken_images(page, tmp_path / "profile") == []


@needs_browser
def test_keyvalue_report_renders(tmp_path):
    from shuffledp.experiments.keyvalue import KeyValueExperimentConfig, rebuild_report, run_keyvalue_experiment

    cfg = KeyValueExperimentConfig(runs=3, datasets=["gauss"], n_override={"gauss": 4000}, epsilons=[0.4, 1.6],
                                   outdir=tmp_path / "kv")
    page = run_keyvalue_experiment(cfg)
    assert broken_images(page, tmp_path / "profile") == []
    page = rebuild_report(page.parent)
    assert broken_images(page, tmp_path / "profile") == []


@needs_browser
def test_amplification_report_renders(tmp_path):
    from shuffledp.experiments.amplification import NS, _fmt, run
    from shuffledp.experiments.amplification_cli import write_report

    out = tmp_path / "amp"
    page = write_report(run(out, NS[:2]), out, _fmt)
    assert broken_images(page, tmp_path / "profile") == []


# ------------------------------------------------------------------------- committed reports
@needs_browser
@pytest.mark.parametrize("page", COMMITTED, ids=[p.parent.name for p in COMMITTED])
def test_committed_report_renders(page, tmp_path):
    assert broken_images(page, tmp_path / "profile") == []


def test_every_committed_report_is_checked():
    assert {p.parent.name for p in COMMITTED} >= {"survey", "keyvalue", "amplification"}
