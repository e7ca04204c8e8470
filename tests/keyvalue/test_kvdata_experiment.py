"""Dataset generators (published characteristics, seeding, streaming) and an experiment smoke run."""

import numpy as np
import pytest

from shuffledp.core import ValidationError
from shuffledp.experiments.kvdata import dataset_spec, generate, iter_chunks


def test_talkingdata_standin_matches_published_characteristics():
    data = generate("talkingdata", seed=1, n=20_000)
    lens = data.lengths
    assert data.d == 306
    assert abs(lens.mean() - 21.1) < 0.5  # seed 004: 6.9% non-zero of 306 -> ~21.1 pairs
    assert (lens < 50).mean() > 0.97  # "98% of users have fewer than 50"
    assert dataset_spec("talkingdata").n == 60_822 and dataset_spec("jdata").n == 105_180
    assert dataset_spec("jdata").d == 442


@pytest.mark.parametrize("name", ["gauss", "lnr", "zipf", "jdata"])
def test_generators_seeded_and_streamed(name):
    a = generate(name, seed=5, n=3000, chunk=1000)
    b = generate(name, seed=5, n=3000, chunk=1000)
    np.testing.assert_array_equal(a.keys, b.keys)
    np.testing.assert_array_equal(a.vals, b.vals)
    chunks = list(iter_chunks(dataset_spec(name, n=3000), seed=5, chunk=1000))
    assert [c.n for c in chunks] == [1000, 1000, 1000]
    assert generate(name, seed=6, n=3000, chunk=1000).keys.size != a.keys.size or \
        not np.array_equal(generate(name, seed=6, n=3000, chunk=1000).keys, a.keys)
    assert a.vals.min() >= -1 and a.vals.max() <= 1


def test_lnr_popularity_is_linear_and_gauss_peaks_in_the_middle():
    lnr = generate("lnr", seed=2, n=50_000)
    f = lnr.true_frequency()
    assert f[0] > f[50] > f[99]
    g = generate("gauss", seed=2, n=50_000).true_frequency()
    assert np.argmax(g) in range(35, 65)


def test_unknown_dataset():
    with pytest.raises(ValidationError, match="unknown dataset"):
        dataset_spec("nope")


@pytest.mark.slow
def test_experiment_smoke(tmp_path):
    from shuffledp.experiments.keyvalue import KeyValueExperimentConfig, run_keyvalue_experiment

    cfg = KeyValueExperimentConfig(runs=3, n_override={"talkingdata": 3000, "jdata": 3000, "gauss": 3000,
                                                       "lnr": 3000}, outdir=tmp_path)
    report = run_keyvalue_experiment(cfg)
    text = report.read_text()
    assert "HISKV" in text and "PCKV-GRR/HISKV" in text
    for f in ("fig_mse_frequency", "fig_mse_mean", "fig_relative_error_topn"):
        assert (tmp_path / f"{f}.png").stat().st_size > 1000
        assert (tmp_path / f"{f}.csv").read_text().count("\n") > 10
