"""The papers' claims about heavy hitters: verdicts on hand-made tables, and the committed claims.csv reproduced."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from shuffledp.experiments.heavy_hitters_claims import (CLAIMS, claims_markdown, evaluate_claims, read_rows,
                                                         write_claims_csv)

RESULTS = Path(__file__).resolve().parents[2] / "results" / "heavy_hitters"


def _row(method, eps, n, f1, ncr=None, seconds=1.0, model="local", dataset="zipf"):
    return {"dataset": dataset, "model": model, "method": method, "epsilon": str(eps), "delta": "0.0",
            "local_epsilon": str(eps), "n": str(n), "rep": "0", "k": "10", "precision": str(f1), "recall": str(f1),
            "f1": str(f1), "ncr": str(f1 if ncr is None else ncr), "count_error": "0.05", "found": "1",
            "seconds": str(seconds)}


def _table(pem_f1, other_f1, seconds_big=5.0):
    """Two eps x two n; PEM's F1 given per (eps, n), SFP/TreeHist's F1 equal to ``other_f1``."""
    rows = []
    for (eps, n), f in pem_f1.items():
        rows.append(_row("pem", eps, n, f))
        for m in ("sfp", "treehist"):
            rows.append(_row(m, eps, n, other_f1[(eps, n)], seconds=seconds_big if n == 10_000 else 1.0))
    return rows


def _by_id(verdicts):
    return {v.claim_id: v for v in verdicts}


def test_pem_wins_everywhere_is_agree():
    pem = {(1.0, 1000): 0.5, (4.0, 1000): 0.8, (1.0, 10_000): 0.7, (4.0, 10_000): 1.0}
    other = {(1.0, 1000): 0.2, (4.0, 1000): 0.6, (1.0, 10_000): 0.4, (4.0, 10_000): 0.9}
    v = _by_id(evaluate_claims(_table(pem, other)))
    assert v["pem-beats-f1"].status == "agree" and len(v["pem-beats-f1"].checks) == 4
    assert v["pem-beats-ncr"].status == "agree"
    assert v["pem-eps"].status == "agree" and v["pem-n"].status == "agree"
    assert v["all-eps"].status == "agree"
    # SFP never reaches F1 = 1 in this table
    assert v["sfp-discovers"].status == "disagree"
    assert v["sfp-accuracy"].status == "not checkable" and v["treehist-rappor"].status == "not checkable"
    # TreeHist time x5 for n x10: within linear
    assert v["treehist-time"].status == "agree"


def test_pem_loses_everywhere_is_disagree():
    pem = {(1.0, 1000): 0.6, (4.0, 1000): 0.3, (1.0, 10_000): 0.5, (4.0, 10_000): 0.2}
    other = {(1.0, 1000): 0.9, (4.0, 1000): 1.0, (1.0, 10_000): 0.9, (4.0, 10_000): 1.0}
    v = _by_id(evaluate_claims(_table(pem, other, seconds_big=40.0)))
    assert v["pem-beats-f1"].status == "disagree"
    assert "NO zipf local 1 1000: pem 0.60 vs" in v["pem-beats-f1"].evidence
    assert v["pem-eps"].status == "disagree"      # PEM's F1 falls with eps at both n
    assert v["pem-n"].status == "disagree"        # and with n at both eps
    assert v["all-eps"].status == "partly"        # SFP and TreeHist do grow
    assert v["sfp-discovers"].status == "agree"
    assert v["treehist-time"].status == "disagree"  # x40 for n x10


def test_ties_within_tolerance_and_saturation():
    # PEM 0.05 below the best counts as a tie; F1 staying at 1 counts as growing
    pem = {(1.0, 1000): 0.86, (4.0, 1000): 1.0, (1.0, 10_000): 1.0, (4.0, 10_000): 1.0}
    other = {(1.0, 1000): 0.9, (4.0, 1000): 1.0, (1.0, 10_000): 1.0, (4.0, 10_000): 1.0}
    v = _by_id(evaluate_claims(_table(pem, other)))
    assert v["pem-beats-f1"].status == "agree"
    assert v["pem-n"].status == "agree"
    # flat below 1 is not growth
    flat = {k: 0.5 for k in pem}
    v = _by_id(evaluate_claims(_table(flat, flat)))
    assert v["pem-eps"].status == "disagree" and v["pem-n"].status == "disagree"


def test_missing_points_are_not_checkable():
    rows = [_row("pem", 1.0, 1000, 0.5)]
    v = _by_id(evaluate_claims(rows))
    assert v["pem-beats-f1"].status == "not checkable" and v["pem-eps"].status == "not checkable"
    assert "no point" in v["pem-eps"].evidence


def test_committed_claims_reproduced(tmp_path):
    committed = RESULTS / "claims.csv"
    if not committed.exists():
        pytest.skip("no committed heavy-hitter results")
    verdicts = evaluate_claims(read_rows(RESULTS / "results.csv"))
    write_claims_csv(tmp_path / "claims.csv", verdicts)
    assert (tmp_path / "claims.csv").read_text(encoding="utf-8") == committed.read_text(encoding="utf-8")
    assert claims_markdown(verdicts) == (RESULTS / "claims.md").read_text(encoding="utf-8")
    with open(committed, newline="", encoding="utf-8") as fh:
        ids = [r["claim_id"] for r in csv.DictReader(fh)]
    assert ids == [c.claim_id for c in CLAIMS]
    assert "Claims of the papers" in (RESULTS / "index.html").read_text(encoding="utf-8")


def test_report_path_writes_claims(tmp_path):
    """The experiment's own report code (also run at the end of a measuring run) writes the claims."""
    pytest.importorskip("matplotlib")
    if not (RESULTS / "claims.csv").exists():
        pytest.skip("no committed heavy-hitter results")
    from shuffledp.experiments.heavy_hitters import HeavyHitterExperimentConfig, render_report_from_csv

    (tmp_path / "results.csv").write_bytes((RESULTS / "results.csv").read_bytes())
    page = render_report_from_csv(HeavyHitterExperimentConfig.full(tmp_path))
    assert (tmp_path / "claims.csv").read_bytes() == (RESULTS / "claims.csv").read_bytes()
    html = page.read_text(encoding="utf-8")
    assert "Claims of the papers" in html and "pem-beats-f1" not in html and "not checkable" in html


def test_cli_report_only(tmp_path):
    pytest.importorskip("matplotlib")
    if not (RESULTS / "claims.csv").exists():
        pytest.skip("no committed heavy-hitter results")
    from typer.testing import CliRunner

    from shuffledp.cli import _register_commands, app

    _register_commands()
    (tmp_path / "results.csv").write_bytes((RESULTS / "results.csv").read_bytes())
    res = CliRunner().invoke(app, ["experiment", "heavy-hitters", "--report-only", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "claims.md").read_bytes() == (RESULTS / "claims.md").read_bytes()
    assert (tmp_path / "f1_ncr_zipf_n1000000.png").exists()
    res = CliRunner().invoke(app, ["experiment", "heavy-hitters", "--report-only", "--out", str(tmp_path / "none")])
    assert res.exit_code == 2 and "results.csv not found" in res.output
