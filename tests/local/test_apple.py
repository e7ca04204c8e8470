"""Apple CMS / HCMS: spec A.7 worked examples, exact privacy, unbiasedness and variance
(over random hash families and conditional on a fixed one), mergeability, validation."""

import math

import numpy as np
import pytest
from scipy import stats

from shuffledp.core import ValidationError
from shuffledp.local import concat_rows, frequency_oracle, n_rows
from shuffledp.local.count_mean_sketch import CountMeanSketch
from shuffledp.local.hadamard_count_mean_sketch import HadamardCountMeanSketch
from shuffledp.local.sketch import TabulationHashFamily, grouped_bit_sums
from shuffledp.local.bits import unpack_rows
from shuffledp.local.packed import bernoulli_packed_lazy
from shuffledp.local.verify import sweep_reports, worst_case_log_ratio
from tests.conftest import mean_z_bound, variance_ratio_band

# eps = 2 ln 3 in floating point is a hair below the exact value, so the exact-arithmetic privacy
# check would push q off 1/4; a 1e-9 slack keeps the spec's q = 1/4 (c = 2).
EPS_2LN3 = 2 * math.log(3) + 1e-9


def test_registry():
    assert isinstance(frequency_oracle("cms", 1.0, 10), CountMeanSketch)
    assert isinstance(frequency_oracle("hcms", 1.0, 10), HadamardCountMeanSketch)
    m = frequency_oracle("cms", 1.0, 10, k=8, m=16, hash_seed=3)
    assert (m.k, m.m, m.hash_seed) == (8, 16, 3)
    assert (CountMeanSketch(1.0, 10).k, CountMeanSketch(1.0, 10).m) == (256, 1024)


def test_spec_worked_example_cms():
    # spec A.7: eps = 2 ln 3 (flip 1/4, c = 2), k = 2, m = 4; the queried item has h_0 = 0, h_1 = 2
    m = CountMeanSketch(EPS_2LN3, 2, m=4, hash_table=np.array([[0, 1], [2, 3]]))
    assert m.q == 0.25 and m.c == 2.0 and m.effective_epsilon <= EPS_2LN3
    bits = np.array([[0b1001], [0b0100]], dtype=np.uint8)  # (+1,-1,-1,+1) j=0; (-1,-1,+1,-1) j=1
    stat = m.aggregate({"j": np.array([0, 1]), "bits": bits})
    np.testing.assert_array_equal(m.sketch(stat), [[3, -1, -1, 3], [-1, -1, 3, -1]])
    assert m.estimate(stat, 2).counts()[0] == pytest.approx(4 / 3 * (6 / 2 - 2 / 4))  # 3.333333


def test_spec_worked_example_hcms():
    # spec A.7: eps = ln 3 (flip 1/4, c = 2), k = 1, m = 4, h_0(x) = 2, l = 1, w = +1
    h = HadamardCountMeanSketch(math.log(3), 2, m=4, hash_table=np.array([[2, 0]]))
    assert h.p_flip == pytest.approx(0.25) and h.c == pytest.approx(2.0)
    stat = h.aggregate({"j": np.array([0]), "l": np.array([1]), "w": np.array([1], dtype=np.int8)})
    np.testing.assert_allclose(h.sketch(stat), [[2, -2, 2, -2]])
    assert h.estimate(stat, 1).counts()[0] == pytest.approx(7 / 3)  # 2.333333


def test_spec_variance_examples():
    n = 1000
    cms = CountMeanSketch(EPS_2LN3, 5, k=2, m=4)
    hcms = HadamardCountMeanSketch(math.log(3), 5, k=2, m=4)
    assert cms.variance(n, 0.3, sum_sq=700 / n**2) * n**2 == pytest.approx(1566.667, rel=1e-6)
    assert hcms.variance(n, 0.3, sum_sq=700 / n**2) * n**2 == pytest.approx(6500.000, rel=1e-9)
    n = 10**6  # emoji setting: eps = 4, k = 65536, m = 1024, f = 1e4, S2 = 1e9
    cms = CountMeanSketch(4.0, 5, k=65536, m=1024, precision=32)
    hcms = HadamardCountMeanSketch(4.0, 5, k=65536, m=1024)
    assert cms.q == pytest.approx(0.119203, abs=1e-6) and hcms.p_flip == pytest.approx(0.017986, abs=1e-6)
    assert cms.variance(n, 1e-2, sum_sq=1e9 / n**2) * n**2 == pytest.approx(182352.1, abs=0.1)
    assert hcms.variance(n, 1e-2, sum_sq=1e9 / n**2) * n**2 == pytest.approx(1068120.9, abs=0.1)


# --- hash family -----------------------------------------------------------------------------
def test_tabulation_family_collision_rates():
    # k independent functions from one seed: collisions of fixed pairs/triples are Binomial(k, .)
    k, m, d = 200_000, 8, 1000
    fam = TabulationHashFamily(k, m, d, seed=5)
    assert fam.chars == 2 and fam.char_bits == 5
    ls = np.arange(k)
    x, y, z = 3, 3 + 32, 700  # x, y share the high character; z differs in both
    hx, hy, hz = fam(ls, x), fam(ls, y), fam(ls, z)
    for hits, p in [((hx == hy).sum(), 1 / m), ((hx == hz).sum(), 1 / m),
                    (((hx == hy) & (hy == hz)).sum(), 1 / m**2)]:
        assert abs(hits - k * p) < 5 * math.sqrt(k * p * (1 - p))
    assert stats.chisquare(np.bincount(hx, minlength=m)).pvalue > 1e-4
    np.testing.assert_array_equal(fam(ls[:50, None], np.arange(d)[None, :]),
                                  TabulationHashFamily(k, m, d, seed=5)(ls[:50, None], np.arange(d)[None, :]))
    assert not np.array_equal(fam(ls[:50], 1), TabulationHashFamily(k, m, d, seed=6)(ls[:50], 1))


@pytest.mark.parametrize("n,nbits,groups,chunk", [(3000, 13, 3, 700), (1000, 64, 1, 1 << 16), (0, 8, 2, 10),
                                                  (5000, 1024, 7, 1024)])
def test_grouped_bit_sums(n, nbits, groups, chunk, rng):
    bits = np.packbits(rng.random((n, nbits)) < 0.3, axis=1, bitorder="little")
    g = rng.integers(0, groups, n)
    g[: n // 2] = 0  # a long run of one group (> 255 rows)
    got = grouped_bit_sums(bits, g, groups, nbits, chunk=chunk)
    want = np.zeros((groups, nbits), dtype=np.int64)
    np.add.at(want, g, unpack_rows(bits, nbits).astype(np.int64))
    np.testing.assert_array_equal(got, want)


def test_grouped_bit_sums_block_edges_and_full_lanes(rng):
    """Groups of 0, 1, 254, 255, 256 and 511 rows (the 255-row blocks and their zero padding) and
    all-ones rows (every 4-bit field reaches 15 and every byte lane 255): exact counts."""
    sizes = [0, 1, 254, 255, 256, 511, 3]
    g = np.repeat(np.arange(len(sizes)), sizes)
    rng.shuffle(g)
    for nbits in (1024, 13, 72):
        ones = np.packbits(np.ones((g.size, nbits), dtype=np.uint8), axis=1, bitorder="little")
        want = np.repeat(np.asarray(sizes, dtype=np.int64)[:, None], nbits, axis=1)
        for chunk in (1, 255, 1000, 1 << 16):
            np.testing.assert_array_equal(grouped_bit_sums(ones, g, len(sizes), nbits, chunk=chunk), want)
        bits = np.packbits(rng.random((g.size, nbits)) < 0.5, axis=1, bitorder="little")
        want = np.zeros((len(sizes), nbits), dtype=np.int64)
        np.add.at(want, g, unpack_rows(bits, nbits).astype(np.int64))
        np.testing.assert_array_equal(grouped_bit_sums(bits, g, len(sizes), nbits, chunk=300), want)
        wide = np.zeros((g.size, bits.shape[1] + 3), dtype=np.uint8)
        wide[:, 1:-2] = bits  # a non-contiguous view of the same rows
        np.testing.assert_array_equal(grouped_bit_sums(wide[:, 1:-2], g, len(sizes), nbits), want)


@pytest.mark.parametrize("k,m,d", [(64, 1024, 186624), (5, 1000, 300), (3, 1024, 70000), (4, 16, 1 << 20), (2, 7, 5)])
def test_query_many_matches_per_matrix_gathers(k, m, d, rng):
    """All-items hash rows (tables broadcast over the character grid, or per item) equal the
    family's own values; the packed one-gather query of non-negative integer matrices, the
    unpacked one (floats, negatives, fields too wide to pack) and ``query`` equal plain gathers."""
    fam = TabulationHashFamily(k, m, d, seed=3)
    H = fam(np.arange(k)[:, None], np.arange(d)[None, :])
    np.testing.assert_array_equal(fam.rows_all_items(np.arange(k)), H)
    cases = [rng.integers(0, 50, size=(3, k, m)), rng.integers(-50, 50, size=(2, k, m)),
             rng.integers(0, 1 << 40, size=(2, k, m)), rng.random((2, k, m))]
    for Gs in cases:
        want = np.stack([np.take_along_axis(G, H, axis=1).sum(axis=0, dtype=np.float64) for G in Gs])
        got = fam.query_many(Gs)
        if Gs.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-12)
        else:
            np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(fam.query(Gs[0]), want[0], rtol=1e-12)


@pytest.mark.parametrize("cls", [CountMeanSketch, HadamardCountMeanSketch])
def test_aggregate_groups_and_query_groups_match_per_group(cls, rng):
    mech = cls(2.0, 500, k=8, m=64, hash_seed=2)
    x = rng.integers(0, 500, size=4000)
    rep = mech.randomize(x, rng)
    groups = rng.integers(0, 3, size=x.size)
    got = mech.aggregate_groups(rep, groups, 4)  # group 3 is empty
    for g in range(4):
        rows = np.flatnonzero(groups == g)
        np.testing.assert_array_equal(got[g], mech.aggregate({f: v[rows] for f, v in rep.items()}))
    ns = [int(np.sum(groups == g)) for g in range(3)]
    T = mech.query_groups(list(got[:3]), ns)
    for g in range(3):
        np.testing.assert_allclose(T[g], mech._query(got[g], ns[g]), rtol=1e-12)


@pytest.mark.parametrize("q,nbits", [(0.11920547485351562, 256), (0.3775482177734375, 100), (0.625, 13),
                                     (3 * 2**-20, 64), (0.5, 8), (0.0, 9), (1.0, 9)])
def test_lazy_bernoulli_law(q, nbits, rng):
    rows = 40_000
    packed = bernoulli_packed_lazy(rows, nbits, q, rng)  # the sampler CMS uses
    assert packed.shape == (rows, (nbits + 7) // 8) and packed.dtype == np.uint8
    if nbits % 8:
        assert not np.any(packed[:, -1] >> np.uint8(nbits % 8))  # padding bits zero
    b = unpack_rows(packed, nbits).astype(np.int64)
    if q in (0.0, 1.0):
        assert np.all(b == q)
        return
    N = b.size
    assert abs(b.mean() - q) / math.sqrt(q * (1 - q) / N) < mean_z_bound()
    # independence: non-overlapping bit pairs (within and across 64-bit words) follow q x q
    pairs = (b[:, 0:nbits - 1:2] * 2 + b[:, 1:nbits:2]).ravel()
    exp = np.array([(1 - q) ** 2, (1 - q) * q, q * (1 - q), q * q]) * pairs.size
    if exp.min() > 20:
        assert stats.chisquare(np.bincount(pairs, minlength=4), exp).pvalue > 1e-4
    # every lane position has the right rate (normal approximation only where counts are large)
    if rows * q * (1 - q) > 100:
        z = (b.mean(axis=0) - q) / math.sqrt(q * (1 - q) / rows)
        assert np.abs(z).max() < stats.norm.ppf(1 - 1e-4 / (2 * nbits))


# --- privacy ---------------------------------------------------------------------------------
@pytest.mark.parametrize("eps,d,k,m", [(0.5, 6, 3, 8), (2.0, 10, 4, 13), (EPS_2LN3, 5, 2, 4), (6.0, 4, 2, 16)])
def test_cms_exact_privacy(eps, d, k, m, rng):
    mech = CountMeanSketch(eps, d, k=k, m=m, hash_seed=11)
    assert mech.effective_epsilon <= eps
    reports = sweep_reports(mech, range(d), 300, rng)
    assert worst_case_log_ratio(mech, reports, range(d)) <= mech.effective_epsilon + 1e-9
    # the bound is attained: bit 1 at h_j(x), 0 at h_j(x') (the two differing positions), else 0
    x, xp = 0, 1
    j = next(j for j in range(k) if mech.family(j, x) != mech.family(j, xp))
    bits = np.zeros((1, mech.n_bytes), dtype=np.uint8)
    hx = int(mech.family(j, x))
    bits[0, hx >> 3] |= 1 << (hx & 7)
    worst = {"j": np.array([j]), "bits": bits}
    ratio = mech.log_probabilities(worst, x) - mech.log_probabilities(worst, xp)
    assert ratio[0] == pytest.approx(mech.effective_epsilon, rel=1e-9)


def test_cms_probabilities_sum_to_one_and_match_sampler(rng):
    # enumerate every report (j, 4 bits) for k = 2, m = 4
    mech = CountMeanSketch(1.5, 3, k=2, m=4, hash_seed=1)
    j = np.repeat(np.arange(2), 16)
    bits = np.tile(np.arange(16, dtype=np.uint8), 2)[:, None]
    allr = {"j": j, "bits": bits}
    N = 200_000
    for x in range(3):
        p = mech.probabilities(allr, x)
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        r = mech.randomize(np.full(N, x), rng)
        obs = np.bincount(r["j"] * 16 + r["bits"][:, 0], minlength=32)
        assert stats.chisquare(obs, p * N).pvalue > 1e-4
    assert worst_case_log_ratio(mech, allr, range(3)) <= mech.effective_epsilon + 1e-12


def test_cms_privacy_full_size_log_probabilities(rng):
    # m = 1024: probabilities underflow, the log-probability ratio is checked directly
    mech = CountMeanSketch(1.0, 50, k=16, m=1024, hash_seed=2)
    reports = sweep_reports(mech, range(50), 20, rng)
    lp = np.stack([mech.log_probabilities(reports, x) for x in range(50)])
    assert np.all(np.isfinite(lp))
    assert (lp.max(axis=0) - lp.min(axis=0)).max() <= mech.effective_epsilon + 1e-9
    assert mech.privacy().eps == mech.effective_epsilon and mech.privacy().model == "local"
    assert mech.effective_epsilon > 1.0 - 1e-3


@pytest.mark.parametrize("eps,d,k,m", [(0.5, 6, 3, 8), (3.0, 10, 2, 4), (math.log(3), 5, 1, 16)])
def test_hcms_exact_privacy(eps, d, k, m, rng):
    mech = HadamardCountMeanSketch(eps, d, k=k, m=m, hash_seed=4)
    reports = sweep_reports(mech, range(d), 300, rng)
    assert worst_case_log_ratio(mech, reports, range(d)) <= eps + 1e-9
    allr = {"j": np.repeat(np.arange(k), 2 * m), "l": np.tile(np.repeat(np.arange(m), 2), k),
            "w": np.tile(np.array([-1, 1], dtype=np.int8), k * m)}
    # attained whenever two inputs hash to columns that differ on some Hadamard row
    assert worst_case_log_ratio(mech, allr, range(d)) == pytest.approx(eps, rel=1e-9)
    probs = np.stack([mech.probabilities(allr, x) for x in range(d)])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    N = 100_000
    r = mech.randomize(np.full(N, 1), rng)
    obs = np.bincount((r["j"] * m + r["l"]) * 2 + (r["w"] > 0), minlength=2 * k * m)
    assert stats.chisquare(obs, probs[1] * N).pvalue > 1e-4


# --- utility ---------------------------------------------------------------------------------
def _kurtosis_band(samples: np.ndarray, sigma2: float, z: float = 4.0) -> tuple[float, float]:
    """s^2/sigma^2 with a band from the sample's own fourth moment (valid for heavy tails)."""
    R = samples.size
    c = samples - samples.mean()
    s2 = c.var(ddof=1)
    m4 = np.mean(c**4)
    se = math.sqrt(max(m4 - s2**2 * (R - 3) / (R - 1), 0.0) / R)
    return s2 / sigma2, z * se / sigma2


def _population(d: int, n: int) -> np.ndarray:
    x = np.repeat(np.arange(d), n // d)
    x[: n // 3] = 0  # item 0 heavy: a large S2 for every other item
    x[n // 3: n // 2] = 1
    return x


@pytest.mark.parametrize("cls,eps,k,m", [(CountMeanSketch, 4.0, 4, 16), (CountMeanSketch, 1.0, 2, 8),
                                          (HadamardCountMeanSketch, 4.0, 4, 16),
                                          (HadamardCountMeanSketch, 1.0, 1, 8)])
def test_unbiased_and_variance_over_random_families(cls, eps, k, m, rng):
    """The seed's claim: unbiased, with the closed-form variance, over users AND the hash draw."""
    d, n, R = 12, 600, 6000
    x = _population(d, n)
    f = np.bincount(x, minlength=d) / n
    ests = np.empty((R, d))
    for r in range(R):  # a fresh public family per repetition
        mech = cls(eps, d, k=k, m=m, hash_seed=r)
        ests[r] = mech.estimate(mech.aggregate(mech.randomize(x, rng)), n).values
    var = mech.variances(n, f)
    for i in (0, 1, 5):
        z = (ests[:, i].mean() - f[i]) / math.sqrt(var[i] / R)
        assert abs(z) < mean_z_bound()
        ratio, half = _kurtosis_band(ests[:, i], var[i])
        assert half < 0.1
        assert abs(ratio - 1) <= half


@pytest.mark.parametrize("cls,eps", [(CountMeanSketch, 2.0), (HadamardCountMeanSketch, 2.0)])
def test_fixed_family_conditional_moments(cls, eps, rng):
    """For one fixed family the estimate is biased by collisions; conditional_moments is exact."""
    d, n, R = 12, 600, 4000
    mech = cls(eps, d, k=4, m=16, hash_seed=7)
    x = _population(d, n)
    counts = np.bincount(x, minlength=d)
    ests = np.array([mech.estimate(mech.aggregate(mech.randomize(x, rng)), n).values for _ in range(R)])
    lo, hi = variance_ratio_band(R)
    assert 0.9 < lo and hi < 1.1
    biased = 0
    for i in (0, 1, 5):
        mean, var = mech.conditional_moments(counts, i)
        biased += abs(mean - counts[i] / n) > 4 * math.sqrt(var / R)
        assert abs(ests[:, i].mean() - mean) / math.sqrt(var / R) < mean_z_bound()
        assert lo <= ests[:, i].var(ddof=1) / var <= hi
    assert biased >= 1  # the fixed-family bias is real at this small k * m


@pytest.mark.parametrize("cls,eps", [(CountMeanSketch, 2.0), (HadamardCountMeanSketch, 1.0)])
def test_exact_debias_fixed_family(cls, eps, rng):
    """debias='exact' (Pi^-1 T) is unbiased for the same fixed family, with its exact variance."""
    d, n, R = 12, 600, 4000
    mech = cls(eps, d, k=4, m=16, hash_seed=7, debias="exact")
    x = _population(d, n)
    counts = np.bincount(x, minlength=d)
    f = counts / n
    ests = np.array([mech.estimate(mech.aggregate(mech.randomize(x, rng)), n).values for _ in range(R)])
    var = mech.variances(n, f)
    lo, hi = variance_ratio_band(R)
    for i in (0, 1, 5, 9):
        assert abs(ests[:, i].mean() - f[i]) / math.sqrt(var[i] / R) < mean_z_bound()
        assert lo <= ests[:, i].var(ddof=1) / var[i] <= hi
        assert mech.conditional_moments(counts, i) == pytest.approx((f[i], var[i]))
    Pi = mech.collision_matrix()
    np.testing.assert_allclose(np.diag(Pi), 1.0)
    fam = cls(eps, d, k=4, m=16, hash_seed=7)
    np.testing.assert_allclose(fam.collision_matrix(), Pi)
    np.testing.assert_allclose(Pi[:, 3], fam.family.collision_fractions(3))
    # variance(n, f): item-averaged exact variance with the other users spread evenly
    brute = []
    for xi in range(d):
        c = np.full(d, n * 0.8 / (d - 1))
        c[xi] = n * 0.2
        brute.append(mech._exact_count_variances(c)[xi] / n**2)
    assert mech.variance(n, 0.2) == pytest.approx(np.mean(brute), rel=1e-9)


def test_exact_debias_errors():
    with pytest.raises(ValidationError, match="debias"):
        CountMeanSketch(1.0, 10, debias="nope")
    with pytest.raises(ValidationError, match="k \\* m >= d"):
        CountMeanSketch(1.0, 100, k=2, m=16, debias="exact")
    with pytest.raises(ValidationError, match="d <= 4096"):
        HadamardCountMeanSketch(1.0, 5000, debias="exact")
    table = np.array([[0, 1, 1], [2, 3, 3]])  # items 1 and 2 are never separated
    with pytest.raises(ValidationError, match="singular"):
        CountMeanSketch(1.0, 3, m=4, hash_table=table, debias="exact")
    assert CountMeanSketch(1.0, 3, m=4, hash_table=table).estimate(np.zeros((2, 5), dtype=np.int64) + [0, 0, 0, 0, 1],
                                                                   2).values.shape == (3,)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cms", "hcms"])
def test_default_parameters_variance(name, rng):
    # k = 256, m = 1024 defaults: fixed family, conditional variance ~ closed form (S2 small);
    # the tight variance bands are the small-sketch tests above, this one checks the defaults' path
    # R = 3500: the 1e-4 chi-square band for s^2 / sigma^2 is [0.910, 1.096], inside [0.9, 1.1]
    d, n, R = 64, 2000, 3500
    mech = frequency_oracle(name, 1.0, d, hash_seed=3)
    x = rng.integers(0, d, n)
    counts = np.bincount(x, minlength=d)
    ests = np.array([mech.estimate(mech.aggregate(mech.randomize(x, rng)), n).values[5] for _ in range(R)])
    mean, var = mech.conditional_moments(counts, 5)
    lo, hi = variance_ratio_band(R)
    assert 0.9 <= lo and hi <= 1.1
    assert abs(ests.mean() - mean) / math.sqrt(var / R) < mean_z_bound()
    assert lo <= ests.var(ddof=1) / var <= hi
    assert var / mech.variances(n, counts / n)[5] == pytest.approx(1.0, abs=0.02)


def test_stderr_matches_variance(rng):
    d, n = 20, 5000
    x = _population(d, n)
    for cls in (CountMeanSketch, HadamardCountMeanSketch):
        mech = cls(2.0, d, k=16, m=32)
        est = mech.estimate(mech.aggregate(mech.randomize(x, rng)), n)
        np.testing.assert_allclose(est.stderr, np.sqrt(mech.variances(n, np.clip(est.values, 0, 1))), rtol=0.05)
        assert est.privacy == mech.privacy()


# --- contract --------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [CountMeanSketch, HadamardCountMeanSketch])
def test_mergeable_and_n1(cls, rng):
    mech = cls(1.0, 30, k=8, m=64)
    r1 = mech.randomize(rng.integers(0, 30, 700), rng)
    r2 = mech.randomize(rng.integers(0, 30, 300), rng)
    both = concat_rows([r1, r2])
    assert n_rows(both) == 1000
    np.testing.assert_array_equal(mech.aggregate(both), mech.aggregate(r1) + mech.aggregate(r2))
    assert mech.aggregate(both).dtype == np.int64
    one = mech.randomize(np.array([7]), rng)
    assert n_rows(one) == 1 and mech.validate_reports(one).keys() == one.keys()
    est = mech.estimate(mech.aggregate(one), 1)
    assert est.values.shape == (30,) and np.all(np.isfinite(est.stderr)) and est.n == 1
    empty = mech.randomize(np.array([], dtype=np.int64), rng)
    assert n_rows(empty) == 0 and not mech.aggregate(empty).any()


def test_cms_reports_layout(rng):
    mech = CountMeanSketch(8.0, 5, k=3, m=13)
    r = mech.randomize(np.arange(5).repeat(200), rng)
    assert r["bits"].shape == (1000, 2) and r["bits"].dtype == np.uint8 and r["j"].dtype == np.int64
    assert not np.any(r["bits"][:, -1] >> 5)  # padding bits are zero
    # at eps = 8 most reports are exactly the one-hot of h_j(x)
    v = unpack_rows(r["bits"], 13)
    h = mech.family(r["j"], np.arange(5).repeat(200))
    assert np.mean(v[np.arange(1000), h]) > 0.95 and v.sum(axis=1).mean() < 1.5


@pytest.mark.parametrize("cls", [CountMeanSketch, HadamardCountMeanSketch])
@pytest.mark.parametrize("bad", [[0, 10], [-1], [0.5], [np.nan], ["a"], [True]])
def test_bad_values(cls, bad, rng):
    mech = cls(1.0, 10, k=4, m=16)
    with pytest.raises(ValidationError):
        mech.randomize(np.array(bad), rng)


@pytest.mark.parametrize("kwargs", [dict(epsilon=0, d=4), dict(epsilon=-1, d=4), dict(epsilon=float("nan"), d=4),
                                    dict(epsilon=1.0, d=1), dict(epsilon=1.0, d=4, k=0), dict(epsilon=1.0, d=4, m=1),
                                    dict(epsilon=1.0, d=4, k=2.5), dict(epsilon=1.0, d=4, hash_seed=-1),
                                    dict(epsilon=1.0, d=4, hash_seed=1.5),
                                    dict(epsilon=1.0, d=4, m=4, hash_table=np.array([[0, 1, 2]])),
                                    dict(epsilon=1.0, d=3, m=4, hash_table=np.array([[0, 1, 4]])),
                                    dict(epsilon=1.0, d=3, k=2, m=4, hash_table=np.array([[0, 1, 2]]))])
@pytest.mark.parametrize("cls", [CountMeanSketch, HadamardCountMeanSketch])
def test_bad_params(cls, kwargs):
    with pytest.raises(ValidationError):
        cls(**kwargs)


def test_bad_params_specific():
    with pytest.raises(ValidationError, match="power of 2"):
        HadamardCountMeanSketch(1.0, 10, m=12)
    with pytest.raises(ValidationError, match="precision"):
        CountMeanSketch(1.0, 10, precision=40)
    with pytest.raises(ValidationError, match="epsilon"):
        CountMeanSketch(1e-6, 10, precision=4)  # flip probability rounds to 1/2


def test_bad_statistic_and_reports(rng):
    cms = CountMeanSketch(1.0, 10, k=4, m=16)
    r = cms.randomize(rng.integers(0, 10, 20), rng)
    stat = cms.aggregate(r)
    for bad_stat, n in [(stat[:, :-1], 20), (stat, 0), (stat, 19), (stat, 2.0)]:
        with pytest.raises(ValidationError):
            cms.estimate(bad_stat, n)
    for bad in ({"j": r["j"]}, {"j": r["j"] + 4, "bits": r["bits"]}, {"j": r["j"], "bits": r["bits"][:, :1]},
                {"j": r["j"], "bits": r["bits"].astype(np.int64)}, {"j": r["j"][:5], "bits": r["bits"]}):
        with pytest.raises(ValidationError):
            cms.validate_reports(bad)
    odd = CountMeanSketch(1.0, 10, k=4, m=13)
    rb = odd.randomize(np.array([1, 2]), rng)
    rb["bits"][0, -1] |= 0x80
    with pytest.raises(ValidationError, match="padding"):
        odd.validate_reports(rb)
    hc = HadamardCountMeanSketch(1.0, 10, k=4, m=16)
    r = hc.randomize(rng.integers(0, 10, 20), rng)
    np.testing.assert_array_equal(hc.validate_reports(r)["w"], r["w"])
    for bad in ({"j": r["j"], "l": r["l"]}, {**r, "w": r["w"] * 0}, {**r, "l": r["l"] + 16},
                {**r, "w": r["w"].astype(float)}, {**r, "l": r["l"][:3]}):
        with pytest.raises(ValidationError):
            hc.validate_reports(bad)
    with pytest.raises(ValidationError):
        hc.estimate(np.zeros((4, 15)), 5)
    with pytest.raises(ValidationError):
        hc.variances(10, np.zeros(3))
    with pytest.raises(ValidationError):
        hc.variance(0, 0.1)


# ------------------------------------------------------------------ exact statistic simulation
# A small explicit family with collisions (items 0/1, 4/5 share a column in row 0, etc.).
_SIM_TABLE = np.array([[0, 0, 1, 2, 3, 3], [5, 1, 1, 7, 0, 2], [4, 4, 4, 4, 6, 6]])
_SIM_COUNTS = np.array([40, 0, 12, 5, 3, 30])


def _cell_moments(mech, counts):
    """Exact per-cell mean and variance of the statistic: every cell is a sum over users of
    independent per-user contributions (a user lands in row j w.p. 1/k, and for HCMS in column l
    w.p. 1/m)."""
    k, m, d = mech.k, mech.m, mech.d
    H = mech.family(np.arange(k)[:, None], np.arange(d)[None, :])  # (k, d)
    own = (H[:, :, None] == np.arange(m)[None, None, :])  # (k, d, m): item's position in row j
    if isinstance(mech, CountMeanSketch):
        a = np.where(own, (1 - mech.q) / k, mech.q / k)  # Pr[user of item x adds a +1 bit to (j, l)]
        mean = np.einsum("x,jxl->jl", counts, a)
        var = np.einsum("x,jxl->jl", counts, a * (1 - a))
        n = counts.sum()
        mean = np.concatenate([mean, np.full((k, 1), n / k)], axis=1)
        var = np.concatenate([var, np.full((k, 1), n * (1 / k) * (1 - 1 / k))], axis=1)
        return mean, var
    l = np.arange(m)
    sign = 1 - 2 * (np.bitwise_count(l[None, None, :] & H[:, :, None]) & 1).astype(np.int64)  # H[l, h_j(x)]
    ex = sign * (1 - 2 * mech.p_flip) / (k * m)  # E[contribution], E[contribution^2] = 1 / (k m)
    mean = np.einsum("x,jxl->jl", counts, ex)
    var = np.einsum("x,jxl->jl", counts, 1 / (k * m) - ex**2)
    return mean, var


@pytest.mark.parametrize("cls,eps", [(CountMeanSketch, 1.0), (CountMeanSketch, 3.0),
                                     (HadamardCountMeanSketch, 1.0), (HadamardCountMeanSketch, 3.0)])
def test_simulate_statistic_matches_randomize_aggregate(cls, eps, rng):
    mech = cls(eps, 6, m=8, hash_table=_SIM_TABLE)
    counts = _SIM_COUNTS
    x = np.repeat(np.arange(6), counts)
    R = 3000
    a = np.array([mech.aggregate(mech.randomize(x, rng)) for _ in range(R)])
    b = np.array([mech.simulate_statistic(counts, rng) for _ in range(R)])
    assert a.shape == b.shape and b.dtype == np.int64
    mean, var = _cell_moments(mech, counts)
    cells = mean.size
    lo, hi = variance_ratio_band(R, 1e-4 / cells)
    live = var > 0
    for s in (a, b):  # each sampler against the exact per-cell moments (Bonferroni over cells)
        assert np.all(np.abs(s.mean(0) - mean)[live] < mean_z_bound(1e-4 / cells) * np.sqrt(var / R)[live])
        ratio = s.var(0, ddof=1)[live] / var[live]
        assert np.all((lo <= ratio) & (ratio <= hi)), (ratio.min(), ratio.max(), lo, hi)
        assert np.all(s.reshape(R, -1)[:, ~live.ravel()] == mean.ravel()[~live.ravel()])  # constant cells
    # joint structure: the same law of the estimator's integer query for two items and of a row
    # total (they mix cells, so dependence between cells must match too): two-sample chi-square

    def functionals(s):
        if isinstance(mech, CountMeanSketch):
            S = s[:, :, :mech.m]
            q = np.stack([S[:, np.arange(mech.k), _SIM_TABLE[:, x0]].sum(1) for x0 in (0, 4)], 1)
            return np.concatenate([q, S[:, 1, :].sum(1, keepdims=True)], axis=1)
        W = np.stack([_fwht_rows(s[:, j]) for j in range(mech.k)], 1)  # (R, k, m): W[j] = H s[j]
        q = np.stack([W[:, np.arange(mech.k), _SIM_TABLE[:, x0]].sum(1) for x0 in (0, 4)], 1)
        return np.concatenate([q, np.abs(s[:, 1, :]).sum(1, keepdims=True)], axis=1)
    fa, fb = functionals(a), functionals(b)
    for i in range(fa.shape[1]):
        lo_v = min(fa[:, i].min(), fb[:, i].min())
        ta = np.bincount(fa[:, i] - lo_v)
        tb = np.bincount(fb[:, i] - lo_v, minlength=ta.size)
        ta = np.pad(ta, (0, tb.size - ta.size))
        tab = np.stack([ta, tb])
        tab = tab[:, tab.sum(0) >= 20]
        assert stats.chi2_contingency(tab)[1] > 1e-4 / fa.shape[1]


def _fwht_rows(v):
    from shuffledp.local.hadamard import fwht

    return fwht(np.asarray(v, dtype=np.int64), axis=1)


@pytest.mark.parametrize("name", ["cms", "hcms"])
def test_simulate_statistic_is_n_independent_and_estimates(name, rng):
    mech = frequency_oracle(name, 1.0, 64, k=32, m=64, hash_seed=5)
    counts = np.full(64, 10**9 // 64)
    counts[3] *= 5
    s = mech.simulate_statistic(counts, rng)  # 1.06e9 users in one call
    n = int(counts.sum())
    assert s.dtype == np.int64
    est = mech.estimate(s, n)
    f = counts / n
    z = (est.values - f) / np.sqrt(mech.variances(n, f))
    assert np.all(np.abs(z) < 6)
    with pytest.raises(ValidationError):
        mech.simulate_statistic(np.ones(5, dtype=np.int64), rng)
