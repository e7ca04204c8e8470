"""The private-learning experiment's parts on tiny grids: tables, files and the audit's validity."""

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

from shuffledp.experiments import private_learning as P  # noqa: E402


def test_parts_and_report(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "DIFFPRIVLIB_PYTHON", tmp_path / "absent")  # the peer's venv is optional
    res = {"erm": P.erm_accuracy([1.0, 10.0], 3), "mia": P.mia_table([1.0], 1), "audit": P.audit_table([1.0, 8.0], 20000),
           "pate": P.pate_table(True)}
    assert {r["method"] for r in res["erm"]} == {"non-private", "shuffledp objective", "shuffledp output"}
    for r in res["audit"]:
        assert 0.0 <= r["eps_lower_bound"] <= r["stated_eps"]
        assert r["sensitivity_used"] <= r["sensitivity_bound"]
    assert res["audit"][1]["eps_lower_bound"] > 0.5  # at eps = 8 the canary is detectable
    assert res["mia"][0]["auc"] > 0.6  # the non-private model leaks
    for key in res:
        P._write_csv(res[key], tmp_path / f"{key}.csv")
    figs = P._figures(res, tmp_path)
    html = P._html(res, tmp_path, figs).read_text()
    assert "Membership inference" in html and (tmp_path / "audit.png").exists()
