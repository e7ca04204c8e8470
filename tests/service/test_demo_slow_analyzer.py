"""The demo survives a forward that times out (a loaded machine, a slow analyzer).

Found in the audit: ``shuffledp demo`` (n = 10^5) failed with 404 ``noData`` on the shared
2-core machine at load ~8. Opening 10^5 envelopes took the analyzer longer than the shuffler's
30 s forward timeout; the shuffler would retry later, but the demo asked for estimates at once.
Here the forward timeout is made tiny so the first forward times out for sure. The demo must
wait for the shuffler's idempotent re-forward and still match the in-process pipeline exactly.
"""

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_demo_waits_for_a_retried_forward(tmp_path):
    from shuffledp.service.demo import run_demo
    res = run_demo(n=3000, d=8, epsilon=2.0, eps_central=1.0, delta=1e-6, sdk_clients=3, out_dir=tmp_path / "demo",
                   forward_timeout=0.05, aggregate_deadline=180)
    assert res["counters"].get("forward_failures", 0) >= 1  # the slow path really was exercised
    assert res["n_aggregated"] == 3000  # aggregated exactly once despite the re-forward
    assert res["max_abs_diff_in_process"] == 0.0


def test_demo_deadline_error_names_the_shortfall(tmp_path, monkeypatch):
    from shuffledp.service import demo
    from shuffledp.service.harness import Deployment
    monkeypatch.setattr(Deployment, "analyzer_stats", lambda self, task_id: {"received": 0})
    with pytest.raises(RuntimeError, match=r"aggregated 0 of 2,000 reports"):
        demo.run_demo(n=2000, d=4, epsilon=4.0, eps_central=2.0, delta=1e-6, sdk_clients=2,
                      out_dir=tmp_path / "demo", aggregate_deadline=1.0)
