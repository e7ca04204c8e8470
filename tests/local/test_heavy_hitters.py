"""Heavy hitters over an unknown domain: SFP, PEM, TreeHist (shuffledp.local.heavy_hitters).

Privacy: the exact worst-case ratio of every report over a reduced domain (every word of length
<= 4 over a 2-letter alphabet), through the full client path and the mechanisms' exact
``log_probabilities``, against the stated epsilon: the level/position coin is data-independent
(parallel composition), SFP's two sketches compose sequentially. Recovery: planted heavy hitters
on a Zipf background, with the margin that makes recovery certain checked on the data first
(from the oracles' closed-form standard deviations), then exact recovery asserted.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.core import ValidationError
from shuffledp.local import concat_rows, take_rows
from shuffledp.local.heavy_hitters import (
    HEAVY_HITTERS,
    PrefixExtendingMethod,
    SequenceFragmentPuzzle,
    StringCodec,
    TreeHist,
    heavy_hitter,
)

SMALL_ALPHABET = "ab"
SMALL_WORDS = np.array([""] + ["".join(w) for L in range(1, 5) for w in itertools.product(SMALL_ALPHABET, repeat=L)])


def _worst_log_ratio(mech, reports, inputs) -> float:
    logs = np.stack([mech.log_probabilities(reports, x) for x in inputs])
    assert np.all(np.isfinite(logs)), "a produced report has probability 0 under some input"
    return float(np.max(logs.max(axis=0) - logs.min(axis=0)))


def _sweep(mech, inputs, per_input, seed):
    rng = np.random.default_rng(seed)
    return concat_rows([mech.randomize(np.repeat(np.asarray([x]), per_input), rng) for x in inputs])


SMALL = {
    "pem-olh": lambda eps: PrefixExtendingMethod(eps, k=2, eta=2, alphabet=SMALL_ALPHABET, max_length=4,
                                                 max_domain=16, hash_seed=5),
    "pem-oue": lambda eps: PrefixExtendingMethod(eps, k=2, eta=2, oracle="oue", alphabet=SMALL_ALPHABET,
                                                 max_length=4, max_domain=16, hash_seed=5),
    "pem-grr": lambda eps: PrefixExtendingMethod(eps, k=1, eta=3, oracle="grr", alphabet=SMALL_ALPHABET,
                                                 max_length=4, max_domain=16, hash_seed=5),
    "treehist-olh": lambda eps: TreeHist(eps, alphabet=SMALL_ALPHABET, max_length=4, max_domain=16, hash_seed=5),
    "treehist-hcms": lambda eps: TreeHist(eps, oracle="hcms", oracle_params={"k": 4, "m": 8},
                                          alphabet=SMALL_ALPHABET, max_length=4, max_domain=16, hash_seed=5),
    "sfp-cms": lambda eps: SequenceFragmentPuzzle(eps, alphabet=SMALL_ALPHABET, max_length=4, puzzle_bits=2,
                                                  fragment_k=4, fragment_m=8, word_k=4, word_m=8, word_domain=64,
                                                  hash_seed=5),
    "sfp-hcms": lambda eps: SequenceFragmentPuzzle(eps, fragment_epsilon=0.3 * eps, sketch="hcms",
                                                   alphabet=SMALL_ALPHABET, max_length=4, puzzle_bits=2,
                                                   fragment_k=4, fragment_m=8, word_k=4, word_m=8, word_domain=64,
                                                   hash_seed=5),
}


@pytest.mark.parametrize("eps", [0.7, 3.0])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_exact_privacy_ratio_every_report(name, eps):
    mech = SMALL[name](eps)
    stated = mech.privacy().eps
    assert stated <= eps * (1 + 1e-9)
    assert mech.privacy().model == "local"
    reports = _sweep(mech, SMALL_WORDS, 40, 17)
    worst = _worst_log_ratio(mech, reports, SMALL_WORDS)
    assert worst <= stated + 1e-9, (name, worst, stated)
    assert worst > 0.0


def test_sfp_composition_of_two_sketches_is_stated_and_attained():
    """SFP's statement is exactly eps_f + eps_w; the worst report ratio reaches most of it
    (a report whose fragment and word parts are both extreme exists with CMS at m = 8)."""
    mech = SMALL["sfp-cms"](2.0)
    ef, ew = mech.fragment_sketch.privacy().eps, mech.word_sketch.privacy().eps
    assert ef <= 1.0 and ew <= 1.0
    assert abs(mech.privacy().eps - (ef + ew)) < 1e-9
    worst = _worst_log_ratio(mech, _sweep(mech, SMALL_WORDS, 60, 3), SMALL_WORDS)
    assert max(ef, ew) < worst <= ef + ew + 1e-9


def test_probabilities_sum_to_one_over_the_level_coin():
    """PEM with GRR: summing the exact probability of every (level, y) gives 1 for every input."""
    mech = SMALL["pem-grr"](1.0)
    for x in ["", "ab", "bbba"]:
        total = 0.0
        for i, o in enumerate(mech.levels.oracles):
            for j in range(mech.levels.copies[i]):
                rep = {"group": np.full(o.d, mech.levels.first_group[i] + j), "y": np.arange(o.d)}
                total += float(mech.probabilities(rep, x).sum())
        assert abs(total - 1.0) < 1e-12


# ------------------------------------------------------------------------- recovery
ALPHA = "abcdefgh"
N_USERS = 60_000
PLANTED = 8
PLANTED_FRACTION = 0.06


def _planted_zipf(seed: int, L: int = 6):
    """8 planted words with 6% of the users each; the other 52% over 20000 background words
    with Zipf(0.8) weights (the background's largest fraction is about 1.5%)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list(ALPHA))
    words = np.unique(np.array(["".join(rng.choice(letters, size=rng.integers(2, L + 1))) for _ in range(40_000)]))
    rng.shuffle(words)
    planted, background = words[:PLANTED], words[PLANTED:PLANTED + 20_000]
    w = 1.0 / np.arange(1, background.size + 1) ** 0.8
    probs = np.concatenate([np.full(PLANTED, PLANTED_FRACTION), (1 - PLANTED * PLANTED_FRACTION) * w / w.sum()])
    values = np.concatenate([planted, background])[rng.choice(probs.size, size=N_USERS, p=probs)]
    return values, set(planted.tolist())


def _true_counts(values):
    u, c = np.unique(values, return_counts=True)
    return dict(zip(u.tolist(), c.tolist()))


def _prefix_mass(values, codec, t):
    codes = codec.encode(values) >> (codec.bits - t)
    _, c = np.unique(codes, return_counts=True)
    return np.sort(c)[::-1]


def _check_unbiased_counts(est, truth):
    """Each reported count within 5 standard errors of the true count (normal approximation;
    8 items: failure probability ~ 5e-6)."""
    for label, v, s in zip(est.labels, est.values, est.stderr):
        assert abs(v - truth.get(label, 0)) <= 5 * s, (label, v, truth.get(label, 0), s)


@pytest.mark.slow
def test_pem_recovers_planted_heavy_hitters():
    values, planted = _planted_zipf(1)
    eps = 4.0
    mech = PrefixExtendingMethod(eps, k=PLANTED, eta=3, alphabet=ALPHA, max_length=6, hash_seed=11)
    n = values.size
    # the margin, from the closed form: at every level each planted prefix must beat all but
    # k - |planted prefixes| of the other prefixes; its mass exceeds the next competitor's by
    # >= 5 standard deviations of the difference (oracle variances at the true masses, n / G
    # users): under the normal approximation each comparison fails w.p. <= 3e-7
    codec = mech.codec
    n_level = n // mech.levels.G
    for i, t in enumerate(mech.lengths):
        var = lambda f: mech.levels.oracles[i].variance(n_level, float(f))  # noqa: E731
        pref = codec.encode(values) >> (codec.bits - t)
        u, c = np.unique(pref, return_counts=True)
        mass = dict(zip(u.tolist(), (c / n).tolist()))
        pp = set((codec.encode(np.array(sorted(planted))) >> (codec.bits - t)).tolist())
        others = sorted((m for p, m in mass.items() if p not in pp), reverse=True)
        rival = others[mech.k - len(pp)] if len(others) > mech.k - len(pp) else 0.0
        weakest = min(mass[p] for p in pp)
        assert weakest - rival >= 5 * np.sqrt(var(weakest) + var(rival)), (t, weakest, rival)
    est = mech.run(values, np.random.default_rng(2))
    assert set(est.labels) == planted
    _check_unbiased_counts(est, _true_counts(values))
    assert est.kind == "count" and est.privacy.eps <= eps


@pytest.mark.slow
def test_treehist_recovers_planted_heavy_hitters():
    values, planted = _planted_zipf(3)
    eps = 4.0
    mech = TreeHist(eps, alphabet=ALPHA, max_length=6, hash_seed=13)
    n = values.size
    # margin from the closed form: at every level each planted prefix's mass exceeds the survival
    # threshold (computed for the largest candidate set, 256 survivors x 9 symbols) by >= 5
    # standard deviations of its estimate; at the last level the planted words exceed the
    # largest background word by >= 5 sd of the difference
    codec = mech.codec
    n_level = n // mech.levels.G
    for i, t in enumerate(mech.lengths):
        var = lambda f: mech.levels.oracles[i].variance(n_level, float(f))  # noqa: E731
        tau = mech.threshold(n_level, mech.max_candidates * (1 << mech.bits_per_level), i, n) / n
        pref = codec.encode(values) >> (codec.bits - t)
        u, c = np.unique(pref, return_counts=True)
        mass = dict(zip(u.tolist(), (c / n).tolist()))
        pp = set((codec.encode(np.array(sorted(planted))) >> (codec.bits - t)).tolist())
        weakest = min(mass[p] for p in pp)
        assert weakest - tau >= 5 * np.sqrt(var(weakest)), (t, weakest, tau)
    counts = _true_counts(values)
    rival = max(c for w, c in counts.items() if w not in planted) / n
    assert PLANTED_FRACTION - rival >= 5 * np.sqrt(var(PLANTED_FRACTION) + var(rival))
    est = mech.run(values, np.random.default_rng(4))
    top = set(est.labels[:PLANTED])
    assert top == planted
    _check_unbiased_counts(take_estimate(est, PLANTED), _true_counts(values))
    # items nobody holds survive with probability <= beta in all: every output is a real word
    truth = _true_counts(values)
    assert sum(1 for w in est.labels if w not in truth) <= 1


def take_estimate(est, k):
    from shuffledp.core import Estimate

    return Estimate(est.values[:k], est.stderr[:k], est.n, est.privacy, est.kind, labels=est.labels[:k])


@pytest.mark.slow
@pytest.mark.parametrize("sketch", ["cms", "hcms"])
def test_sfp_recovers_planted_heavy_hitters(sketch):
    values, planted = _planted_zipf(5)
    eps = 8.0
    mech = SequenceFragmentPuzzle(eps, sketch=sketch, alphabet=ALPHA, max_length=6, k=PLANTED, hash_seed=17)
    n = values.size
    # margin: a planted fragment key (>= 6% of the users at every position) against a fragment
    # sketch estimate of sd <= sqrt(variance at f = 0.5) over n/P users, scaled to n
    sd_f = np.sqrt(mech.fragment_sketch.variance(n // mech.positions, 0.5, sum_sq=0.25))
    sd_w = np.sqrt(mech.word_sketch.variance(n, 0.5, sum_sq=0.25))
    assert PLANTED_FRACTION >= 6 * sd_f and PLANTED_FRACTION - 0.02 >= 8 * sd_w, (sd_f, sd_w)
    est = mech.run(values, np.random.default_rng(6))
    assert set(est.labels) == planted
    _check_unbiased_counts(est, _true_counts(values))
    assert est.extra["candidates"] >= PLANTED


def test_integers_and_exact_small_domain_pem():
    """Integer values; with no hashing (max_domain >= 2^bits) and a huge epsilon, PEM returns the
    exact top-k."""
    rng = np.random.default_rng(0)
    vals = rng.choice(np.array([3, 77, 200, 1000, 4095]), p=[0.4, 0.3, 0.15, 0.1, 0.05], size=20_000)
    mech = PrefixExtendingMethod(40.0, k=3, eta=4, bits=12, oracle="grr", max_domain=4096, hash_seed=1)
    est = mech.run(vals, rng)
    assert list(est.labels) == [3, 77, 200]
    assert all(isinstance(v, int) for v in est.labels)


# ------------------------------------------------------------------------- mergeability
@pytest.mark.parametrize("name", sorted(SMALL))
def test_aggregate_is_mergeable(name):
    mech = SMALL[name](2.0)
    rng = np.random.default_rng(9)
    values = rng.choice(SMALL_WORDS, size=700)
    rep = mech.randomize(values, rng)
    a, b = take_rows(rep, np.arange(300)), take_rows(rep, np.arange(300, 700))
    whole = mech.aggregate(rep)
    assert whole.dtype == np.int64 and whole.ndim == 1
    np.testing.assert_array_equal(whole, mech.aggregate(a) + mech.aggregate(b))
    est = mech.estimate(whole)  # n read from the statistic
    assert est.n == 700
    with pytest.raises(ValidationError, match="n"):
        mech.estimate(whole, 701)


@pytest.mark.parametrize("sketch", ["cms", "hcms"])
def test_sfp_one_pass_aggregate_and_fragment_tops_match_per_position(sketch):
    """The one-pass aggregate over all positions and the fragment tops from one pass of the hash
    values equal the per-position sketch aggregates and the ``fragment_estimates`` ranking."""
    mech = SequenceFragmentPuzzle(2.0, sketch=sketch, alphabet="abc", max_length=4, puzzle_bits=3,
                                  fragment_k=8, fragment_m=32, word_k=4, word_m=16, word_domain=256,
                                  fragment_top=7, hash_seed=11)
    rng = np.random.default_rng(4)
    words = np.array(["".join(w) for L in range(1, 5) for w in itertools.product("abc", repeat=L)])
    values = rng.choice(words, size=3000, p=np.arange(words.size, 0, -1) / (words.size * (words.size + 1) / 2))
    rep = mech.randomize(values, rng)
    stat = mech.aggregate(rep)
    frag = {f[len("fragment_"):]: v for f, v in rep.items() if f.startswith("fragment_")}
    for p in range(mech.positions):
        rows = np.flatnonzero(rep["position"] == p)
        np.testing.assert_array_equal(mech._piece(stat, p), mech.fragment_sketch.aggregate(take_rows(frag, rows)))
    tops = mech.fragment_tops(stat)
    for p in range(mech.positions):
        c, _ = mech.fragment_estimates(stat, p)
        np.testing.assert_array_equal(tops[p], np.argsort(-c, kind="stable")[:mech.fragment_top])


def test_sfp_min_z_drops_exactly_the_insignificant_candidates():
    """The default output is the unfiltered ranking less the candidates whose estimate is at most
    min_z standard errors, in the same order; min_z=None keeps them (false words among them)."""
    rng = np.random.default_rng(8)
    words = np.array(["abc", "bca", "cab", "aab", "bba", "ccc", "abca", "bcab"])
    values = rng.choice(words, size=6000, p=[0.3, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05, 0.05])
    kw = dict(alphabet="abc", max_length=4, puzzle_bits=2, fragment_k=8, fragment_m=64, word_k=8, word_m=64,
              word_domain=1024, fragment_top=12, hash_seed=3)
    every = SequenceFragmentPuzzle(3.0, min_z=None, **kw)
    stat = every.aggregate(every.randomize(values, rng))
    all_est = every.estimate(stat)
    keep = all_est.values > 2.0 * all_est.stderr
    assert 0 < keep.sum() < keep.size, "the check needs candidates on both sides of the cut"
    est = SequenceFragmentPuzzle(3.0, **kw).estimate(stat)
    assert list(est.labels) == [lab for lab, k in zip(all_est.labels, keep) if k]
    np.testing.assert_array_equal(est.values, all_est.values[keep])
    assert est.extra["below_min_z"] == int((~keep).sum()) and est.extra["min_z"] == 2.0
    with pytest.raises(ValidationError, match="min_z"):
        SequenceFragmentPuzzle(3.0, min_z=-1.0, **kw)


# ------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValidationError, match="values"):
        PrefixExtendingMethod(1.0, alphabet="ab", max_length=4, hash_seed=1).randomize(np.array(["abc"]), 0)
    with pytest.raises(ValidationError, match="values"):
        TreeHist(1.0, hash_seed=1).randomize(np.array([1, 2]), 0)
    with pytest.raises(ValidationError, match="values"):
        PrefixExtendingMethod(1.0, bits=4, hash_seed=1).randomize(np.array([16]), 0)
    with pytest.raises(ValidationError, match="values"):
        SequenceFragmentPuzzle(1.0, hash_seed=1).randomize(np.array(["Hello"]), 0)
    with pytest.raises(ValidationError, match="epsilon"):
        PrefixExtendingMethod(0.0)
    with pytest.raises(ValidationError, match="k"):
        PrefixExtendingMethod(1.0, k=0)
    with pytest.raises(ValidationError, match="eta"):
        PrefixExtendingMethod(1.0, eta=0)
    with pytest.raises(ValidationError, match="oracle"):
        TreeHist(1.0, oracle="nope")
    with pytest.raises(ValidationError, match="beta"):
        TreeHist(1.0, beta=1.5)
    with pytest.raises(ValidationError, match="fragment_epsilon"):
        SequenceFragmentPuzzle(1.0, fragment_epsilon=1.0)
    with pytest.raises(ValidationError, match="fragment_length"):
        SequenceFragmentPuzzle(1.0, max_length=5)
    with pytest.raises(ValidationError, match="sketch"):
        SequenceFragmentPuzzle(1.0, sketch="olh")
    with pytest.raises(ValidationError, match="bits"):
        PrefixExtendingMethod(1.0, bits=12, alphabet="ab")
    with pytest.raises(ValidationError, match="max_length"):
        StringCodec("abc", 40)
    with pytest.raises(ValidationError, match="alphabet"):
        StringCodec("aa", 4)
    with pytest.raises(ValidationError, match="eps"):
        heavy_hitter("pem", eps=1.0)
    with pytest.raises(ValidationError, match="heavy-hitter mechanism"):
        heavy_hitter("rappor", 1.0)
    mech = SMALL["pem-olh"](1.0)
    with pytest.raises(ValidationError, match="statistic"):
        mech.estimate(np.zeros(3, dtype=np.int64), 10)
    with pytest.raises(ValidationError, match="reports"):
        mech.aggregate({"group": np.zeros(2, dtype=np.int64)})
    with pytest.raises(ValidationError, match="group"):
        rep = mech.randomize(np.array(["ab", "b"]), 0)
        rep["group"] = rep["group"] + 100
        mech.aggregate(rep)
    with pytest.raises(ValidationError, match="rng"):
        mech.randomize(np.array(["ab"]), rng="x")
    assert set(HEAVY_HITTERS) == {"sfp", "pem", "treehist"}


# ------------------------------------------------------------------------- encoding
@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abcxyz", max_size=8), min_size=1, max_size=20))
def test_string_bits_roundtrip_and_prefix_property(words):
    codec = StringCodec("abcxyz", 8)
    arr = np.array(words, dtype="U8")
    codes = codec.encode(arr)
    assert codes.dtype == np.int64 and np.all(codes >= 0) and np.all(codes < (1 << codec.bits))
    assert codec.decode(codes).tolist() == list(words)
    assert np.all(codec.valid_prefixes(codes, codec.bits))
    for j in range(9):  # a string prefix of j symbols is the bit prefix of j * b bits
        t = j * codec.symbol_bits
        pref = codec.encode(np.array([w[:j] for w in words], dtype="U8")) >> (codec.bits - t)
        np.testing.assert_array_equal(pref, codes >> (codec.bits - t))
        assert np.all(codec.valid_prefixes(codes >> (codec.bits - t), t))
    # bytes encode like their Latin-1 strings
    np.testing.assert_array_equal(codec.encode(np.array([w.encode() for w in words], dtype="S8")), codes)


def test_valid_prefixes_rejects_impossible_encodings():
    codec = StringCodec("ab", 3)  # A = 3 symbols, 2 bits each; symbol 3 never occurs
    codes = np.arange(1 << codec.bits)
    ok = codec.valid_prefixes(codes, codec.bits)
    words = {"".join(w) for L in range(4) for w in itertools.product("ab", repeat=L)}
    assert int(ok.sum()) == len(words)
    assert set(codec.decode(codes[ok]).tolist()) == words


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, (1 << 20) - 1), min_size=1, max_size=30), st.integers(1, 3))
def test_hex_word_codec_roundtrip(values, multiple):
    from shuffledp.local.heavy_hitters import HexWordCodec

    codec = HexWordCodec(20, multiple)
    assert codec.max_length % multiple == 0 and codec.max_length >= 5
    codes = codec.encode(np.array(values))
    assert codec.decode(codes).tolist() == values
    assert np.all(codec.valid_prefixes(codes, codec.bits))
    assert not np.any(codec.valid_prefixes(np.zeros(3, dtype=np.int64), codec.bits))  # all padding


def test_sfp_over_integer_ids():
    """Three ids with 20% of 30,000 users each; at eps = 8 (4 + 4) a fragment key's sd is below 1%
    of the users at each of the 2 positions and a word's below 0.5%: 20 sd of margin at least."""
    rng = np.random.default_rng(3)
    ids = np.where(rng.random(30_000) < 0.6, rng.choice(np.array([7, 4000, 65535]), 30_000), rng.integers(0, 1 << 16, 30_000))
    mech = SequenceFragmentPuzzle(8.0, bits=16, k=3, hash_seed=2)
    est = mech.run(ids, rng)
    assert set(est.labels) == {7, 4000, 65535}
