"""The amplification-tables reproduction (quick grid) and its CLI."""

import csv

import pytest

from shuffledp.experiments.amplification import amplification_tables, composition_curves, seed_errors


@pytest.fixture(scope="module")
def tables():
    return {t.key: t for t in amplification_tables(ns=(10_000, 100_000))}


# spec §1 reference tables, delta = 1e-9 (row, n) -> value; None = outside the domain
SPOTS = {
    "T1": [((0.3, 100_000), 0.0518), ((0.49, 10_000), 0.2677)],
    "T1_conv": [((0.1, 10_000), 0.1831), ((0.2, 10_000), 0.3661), ((0.1, 100_000), None), ((0.3, 10_000), None)],
    "T2a": [((0.1, 10_000), 0.6245), ((1.0, 100_000), 2.5996)],
    "T2b": [((0.1, 10_000), 0.3728), ((0.5, 100_000), 2.8817)],
    "T3": [((0.1, 10_000), None), ((0.3, 10_000), 0.4345), ((0.5, 100_000), 4.2438)],
    "T3_eq7": [((0.1, 10_000), None), ((0.3, 10_000), 0.2406), ((1.0, 100_000), 4.9512)],
    "T4_k2": [((0.1, 10_000), None), ((0.3, 10_000), 0.6938), ((0.5, 100_000), 4.4113)],
    "T4_k10": [((0.5, 10_000), None), ((0.6, 10_000), 1.1005), ((0.1, 100_000), None), ((0.2, 100_000), 1.4681)],
    "T4_k100": [((1.0, 10_000), None), ((0.6, 100_000), 3.0477)],
    "F3": [((5.0, 10_000), None), ((1.0, 100_000), 0.1147)],
    "F3_eq7": [((4.0, 10_000), None), ((3.0, 10_000), 1.1921)],
    "F4": [((4.0, 10_000), None), ((1.0, 100_000), 0.1056)],
}


@pytest.mark.parametrize("key", sorted(SPOTS))
def test_table_spot_values(tables, key):
    for (row, n), want in SPOTS[key]:
        got = tables[key].value(row, n)
        if want is None:
            assert got is None, (key, row, n, got)
        else:
            assert got == pytest.approx(want, abs=1e-4), (key, row, n)


def test_modern_table(tables):
    t = tables["T1_modern"]
    # Thm1 / FMT21-num / strong-clone(RR) at eps_l = 0.49, n = 1e4: 0.2677 / 0.0294 / 0.0263
    assert t.cells[(0.49, 10_000)] == pytest.approx([0.2677, 0.0294, 0.0263], abs=1e-4)
    assert t.cells[(4.0, 100_000)][0] is None
    assert t.cells[(4.0, 100_000)][1:] == pytest.approx([0.2348, 0.1649], abs=1e-4)


def test_figure_curves_and_seed_errors():
    c = composition_curves([1, 100, 500])
    assert c["seed_advanced"].tolist() == pytest.approx([0.23248, 2.32479, 5.19839], abs=1e-5)
    assert c["drv_advanced"].tolist() == pytest.approx([0.12380, 1.52838, 3.84647], abs=1e-5)
    assert c["zcdp"].tolist() == pytest.approx([0.02401, 0.24118, 0.54274], abs=1e-5)
    assert c["rdp_alpha60"].tolist() == pytest.approx([0.19588, 0.27013, 0.57013], abs=1e-5)
    assert c["rdp_alpha20"].tolist() == pytest.approx([0.60619, 0.63094, 0.73094], abs=1e-5)
    assert c["exact"].tolist() == pytest.approx([0.01251, 0.16004, 0.38469], abs=1e-5)
    assert c["rdp_grid_improved"][2] == pytest.approx(0.42335, abs=1e-5)
    errs = seed_errors()
    assert len(errs) == 2 and "264.6" in errs[1] and "2551" in errs[1]


@pytest.mark.slow
def test_cli_quick_run(tmp_path):
    from typer.testing import CliRunner

    from shuffledp.cli import _register_commands, app

    _register_commands()
    res = CliRunner().invoke(app, ["experiment", "amplification-tables", "--quick", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "elapsed" in res.output and "k = 264.6" in res.output.replace("\n", " ")
    assert (tmp_path / "composition_sigma200.png").stat().st_size > 10_000
    rows = list(csv.DictReader((tmp_path / "table_T3.csv").open()))
    assert rows[4]["eps_c"] == "0.5" and float(rows[4]["n=100000"]) == pytest.approx(4.243781, abs=1e-6)
    assert len(list(tmp_path.glob("table_*.csv"))) == 13
