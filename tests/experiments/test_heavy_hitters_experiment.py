"""The heavy-hitter experiment: its metrics on hand-made cases, and a tiny end-to-end run."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from shuffledp.experiments.heavy_hitters import HeavyHitterExperimentConfig, run_heavy_hitter_experiment, topk_metrics


def test_topk_metrics_by_hand():
    data = np.array(["a"] * 5 + ["b"] * 4 + ["c"] * 3 + ["d"] * 2 + ["e"])
    # k = 3: truth a, b, c (ranks 1..3); output a, c, x
    m = topk_metrics(["a", "c", "x"], [6.0, 3.0, 9.0], data, 3)
    assert m["precision"] == pytest.approx(2 / 3) and m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3)
    assert m["ncr"] == pytest.approx((3 + 1) / 6)
    assert m["count_error"] == pytest.approx((1 / 5 + 0) / 2)
    assert topk_metrics([], [], data, 3)["f1"] == 0.0
    perfect = topk_metrics(["b", "a", "c", "d"], [4, 5, 3, 2], data, 3)
    assert perfect["f1"] == 1.0 and perfect["ncr"] == 1.0


def test_tiny_run_writes_csv_and_report(tmp_path):
    pytest.importorskip("matplotlib")
    cfg = HeavyHitterExperimentConfig(out=tmp_path, ns=[4000], local_eps=[8.0], central_eps=[2.0], vocabulary=200,
                                      real_data=False, max_length=6)
    report = run_heavy_hitter_experiment(cfg)
    assert report.exists() and (tmp_path / "f1_ncr_zipf_n4000.png").exists()
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert {(r["model"], r["method"]) for r in rows} == {(m, h) for m in ("local", "shuffle")
                                                         for h in ("sfp", "pem", "treehist")}
    for r in rows:
        assert 0.0 <= float(r["f1"]) <= 1.0 and 0.0 <= float(r["ncr"]) <= 1.0
        if r["model"] == "shuffle":
            assert float(r["local_epsilon"]) >= 2.0
