"""The shuffle step itself: uniform permutations, production CSPRNG, input validation.

Nothing else in tests/ checks the permutation: replacing ``shuffle_messages`` by the identity
broke no other test. Chi-square tests use level 1e-4 (seeded ones are deterministic).
"""

import itertools
import os

import numpy as np
import pytest
from scipy import stats

import shuffledp.shuffle.shuffler as shuffler_mod
from shuffledp import pipeline
from shuffledp.core.errors import ValidationError
from shuffledp.shuffle import protocol, run_shufflers
from shuffledp.shuffle.shuffler import csprng_permutation, shuffle_messages

ALPHA = 1e-4
PERMS3 = {p: i for i, p in enumerate(itertools.permutations(range(3)))}


def _cnt_rr():
    return protocol("cnt_rr", epsilon=0.9, delta=1e-6, n=4000, calibration="clones")


def _murs3():
    return protocol("murs", 1.0, 0.05, 3000, d=6, oracle="grr", n_fake=41, shufflers=3, mode="parallel")


def _chisq_uniform_pvalue(counts: np.ndarray) -> float:
    return float(stats.chisquare(counts).pvalue)


# ------------------------------------------------------------------ uniformity (simulation rng)
def test_marked_message_position_is_uniform():
    m, R = 7, 14000
    rng = np.random.default_rng(11)
    msgs = {"y": np.arange(m), "z": -np.arange(m)}
    pos = np.zeros(m, dtype=np.int64)
    for _ in range(R):
        out = shuffle_messages(msgs, rng)
        pos[int(np.flatnonzero(out["y"] == 0)[0])] += 1
    assert _chisq_uniform_pvalue(pos) > ALPHA, pos
    assert pos.min() > 0


def test_all_permutations_of_three_are_equally_likely():
    R = 6000
    rng = np.random.default_rng(12)
    counts = np.zeros(6, dtype=np.int64)
    for _ in range(R):
        counts[PERMS3[tuple(shuffle_messages({"y": np.arange(3)}, rng)["y"].tolist())]] += 1
    assert _chisq_uniform_pvalue(counts) > ALPHA, counts
    assert counts.min() > 0


def test_output_is_a_permutation_of_the_input_rows(rng):
    m = 1000
    msgs = {"y": rng.integers(0, 5, m), "k": np.arange(m), "w": rng.random((m, 3))}
    out = shuffle_messages(msgs, rng)
    assert set(out) == set(msgs)
    order = np.argsort(out["k"])
    for c in msgs:  # rows stay intact: each output row is one input row
        np.testing.assert_array_equal(out[c][order], msgs[c])
    assert not np.array_equal(out["k"], msgs["k"])  # and it did move them (P = 1/1000!)


def test_empty_and_single_message_batches(rng):
    assert shuffle_messages({"y": np.zeros(0, dtype=np.int64)}, rng)["y"].shape == (0,)
    assert shuffle_messages({"y": np.array([5])}, rng)["y"].tolist() == [5]
    assert csprng_permutation(0).shape == (0,)
    assert csprng_permutation(1).tolist() == [0]


# ------------------------------------------------------------------ validation
def test_column_length_mismatch_is_refused(rng):
    with pytest.raises(ValidationError, match="differ in length"):
        shuffle_messages({"y": np.arange(4), "z": np.arange(5)}, rng)


def test_multi_shuffler_batch_needs_its_shuffler_column(rng):
    p = _murs3()
    msgs = p.encode(rng.integers(0, 6, 3000), rng)
    with pytest.raises(ValidationError, match="'shuffler' column"):
        run_shufflers(p, {"y": msgs["y"]}, rng)


@pytest.mark.parametrize("bad", [-1, 3, 7])
def test_multi_shuffler_route_out_of_range_is_refused(bad, rng):
    p = _murs3()
    msgs = p.encode(rng.integers(0, 6, 3000), rng)
    route = msgs["shuffler"].copy()
    route[17] = bad
    with pytest.raises(ValidationError, match=r"must be in \[0, 3\)"):
        run_shufflers(p, {**msgs, "shuffler": route}, rng)


def test_multi_shuffler_keeps_each_message_with_its_shuffler(rng):
    """Each shuffler permutes its own batch (user messages + its fakes); nothing crosses over."""
    p = _murs3()
    msgs = p.encode(rng.integers(0, 6, 3000), rng)
    out = run_shufflers(p, msgs, rng)
    assert np.all(np.diff(out["shuffler"]) >= 0)  # batches concatenated in shuffler order
    for j in range(3):
        user_part = np.sort(msgs["y"][msgs["shuffler"] == j])
        got = out["y"][out["shuffler"] == j]
        assert got.shape[0] == user_part.shape[0] + p.fakes[j]


# ------------------------------------------------------------------ production: OS CSPRNG
def test_production_refuses_a_seed(rng):
    p = _cnt_rr()
    x = (rng.random(4000) < 0.5).astype(np.int64)
    with pytest.raises(ValidationError):
        shuffle_messages({"y": np.arange(3)}, rng, production=True)
    with pytest.raises(ValidationError):
        run_shufflers(p, p.encode(x, rng), rng, production=True)
    with pytest.raises(ValidationError):
        pipeline.run(p, x, 5, production=True)


def test_production_permutation_comes_from_os_urandom(monkeypatch, rng):
    """The production permutation reads 64 bits per message from os.urandom (PCG64 seeded with
    128 OS bits, the previous source, is not a CSPRNG)."""
    drawn = []
    real = os.urandom

    def counting(k):
        drawn.append(k)
        return real(k)

    monkeypatch.setattr(shuffler_mod.os, "urandom", counting)
    p = _cnt_rr()
    x = (rng.random(4000) < 0.5).astype(np.int64)
    est = pipeline.run(p, x, production=True)
    assert 8 * 4000 in drawn
    assert est.privacy.eps <= 0.9


def test_production_permutation_is_determined_by_the_os_bytes(monkeypatch):
    keys = np.array([30, 10, 40, 20], dtype=np.uint64)
    monkeypatch.setattr(shuffler_mod.os, "urandom", lambda k: keys.tobytes()[:k])
    out = shuffle_messages({"y": np.array([0, 1, 2, 3])}, production=True)
    assert out["y"].tolist() == [1, 3, 0, 2]  # sorted by key


def test_production_ties_are_redrawn(monkeypatch):
    draws = iter([np.array([5, 5, 1], dtype=np.uint64), np.array([3, 1, 2], dtype=np.uint64)])
    monkeypatch.setattr(shuffler_mod.os, "urandom", lambda k: next(draws).tobytes())
    assert csprng_permutation(3).tolist() == [1, 2, 0]


def test_production_shuffle_is_uniform_through_a_protocol():
    """A shuffle-model protocol's shuffler in production mode (no seed): all 3! orders equally
    likely, and a marked message lands uniformly among 6 positions."""
    p = _cnt_rr()
    R = 6000
    counts = np.zeros(6, dtype=np.int64)
    for _ in range(R):
        out = run_shufflers(p, {"y": np.arange(3)}, production=True)
        counts[PERMS3[tuple(out["y"].tolist())]] += 1
    assert _chisq_uniform_pvalue(counts) > ALPHA, counts
    pos = np.zeros(6, dtype=np.int64)
    for _ in range(R):
        pos[int(np.flatnonzero(run_shufflers(p, {"y": np.arange(6)}, production=True)["y"] == 0)[0])] += 1
    assert _chisq_uniform_pvalue(pos) > ALPHA, pos


def test_production_multi_shuffler_uses_the_csprng(monkeypatch, rng):
    drawn = []
    real = os.urandom
    monkeypatch.setattr(shuffler_mod.os, "urandom", lambda k: drawn.append(k) or real(k))
    p = _murs3()
    msgs = p.encode(rng.integers(0, 6, 3000), rng)
    out = run_shufflers(p, msgs, production=True)
    assert out["y"].shape[0] == 3000 + 41
    sizes = [int(np.sum(msgs["shuffler"] == j)) + p.fakes[j] for j in range(3)]
    assert sorted(k for k in drawn if k >= 8 * min(sizes)) == sorted(8 * s for s in sizes)
