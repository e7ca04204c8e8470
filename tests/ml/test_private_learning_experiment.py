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


def test_gan_table_and_report(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("opacus")
    rows = P.gan_table([0.2, 3.0], 1, dp_gan_epochs=2)
    assert [r["method"] for r in rows] == ["non-private (real rows)"] + ["DP-GAN"] * 2 + ["PATE-GAN"] * 2
    for r in rows[1:]:
        if r["runs"]:
            assert r["eps"] <= r["target_eps"] and 0.0 <= r["tstr_accuracy"] <= 1.0
    # PATE-GAN at eps = 0.2 cannot pay for one iteration (8 queries at sigma = 50): reported, not run
    assert rows[3]["runs"] == 0 and rows[3]["detail"] == "budget below one iteration"
    assert rows[4]["runs"] == 1 and rows[4]["detail"].endswith("iterations")
    res = {"gan": rows}
    figs = P._figures(res, tmp_path)
    assert figs == ["gan_tstr.png"] and (tmp_path / "gan_tstr.png").exists()
    assert "PATE-GAN" in P._html(res, tmp_path, figs).read_text()
