"""The stated eps of every key-value mechanism bounds the exact ratio of what its client samples.

numpy's ``Generator.random()`` returns ``k / 2^53`` (``k`` uniform on ``[0, 2^53)``), so
``random() < t`` is Bernoulli(``ceil(t 2^53) / 2^53``) exactly, not Bernoulli(t) unless ``t`` is on
the ``2^-53`` grid. These tests

* capture every threshold the client path compares a uniform with (a spy generator) and check that
  each one is on the grid and is one of the thresholds the exact model below assumes;
* build, in rational arithmetic, the exact law of every report over the D = 3 domain for every test
  input (key sampling / padding-and-sampling, the realised discretization, the perturbation), from
  the *realised* probabilities ``ceil(t 2^53) / 2^53`` of those thresholds; check that it sums to 1,
  that the float ``probabilities`` match it, and that the exact worst-case likelihood ratio is at
  most ``e^stated`` (50-digit logarithms) with ``stated <= requested eps``.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest

from shuffledp.local.keyvalue import keyvalue_mechanism
from tests.keyvalue.test_privacy import CASES, D, INPUTS, all_reports

_CTX = Context(prec=50)
_SCALE = 1 << 53
_EPS = (0.1, 1.0, 4.0, 16.0, 36.0, 40.0, 100.0, 700.0)


def _R(t: float) -> Fraction:
    """Exact Pr[U < t] for numpy's U = k / 2^53."""
    k = math.ceil(Fraction(float(t)) * _SCALE)
    return Fraction(min(_SCALE, max(0, k)), _SCALE)


def _ln(r: Fraction) -> Decimal:
    return _CTX.ln(Decimal(r.numerator)) - _CTX.ln(Decimal(r.denominator))


def _disc(v: float) -> Fraction:
    """Realised Pr[x = +1] of discretize(v): ``random() < (1 + v) / 2``."""
    return _R((1.0 + float(v)) / 2.0)


def _make(name, params, eps):
    params = dict(params)
    if "c_frac" in params:  # c in [1, e^eps'): a point c_frac of the way
        top = params.get("ell", 1) * math.expm1(eps) + 1 if params.get("amplify") else math.exp(min(eps, 700))
        top = min(top, 1e300)
        params["c"] = 1 + params.pop("c_frac") * (top - 1)
    m = keyvalue_mechanism(name, eps, D, **params)
    if name == "privkvm":  # worst case: public fake means at the extremes
        m.fake_means[:] = np.array([1.0, -1.0, 0.3])
    return m


# --- the thresholds each client path compares uniforms with ----------------------------------
def _thresholds(m) -> list[float]:
    """The non-input thresholds the exact model below uses (as floats, as the code compares them)."""
    n = m.name
    if n in ("kvue", "ldpkv"):
        cum = np.cumsum(m._matrix(), axis=1)[:, :2]
        return [float(t) for t in cum.reshape(-1)]
    if n == "kvoh":
        return [m.p]
    if n == "privkv":
        return [m.p1, m.p2, float(m.fake_threshold(np.zeros(1))[0])]
    if n == "privkvm":
        fake = [float(t) for r in range(m.rounds) for t in m.fake_threshold(m.fake_means[r])]
        return [float(p) for p in m.round_p1] + [m.p2] + fake
    if n == "pckv-grr":
        return [m.a, m.p, 0.5]
    if n == "pckv-ue":
        return [m.b / 2, m.b, m.p1, m.a]
    if n == "hiskv":
        return [m.beta, m.p1, m.p1 + m.q1, m.oetl.grr.p]
    raise AssertionError(n)


class _Recorded(np.ndarray):
    """Uniforms that may only be compared, ``u < t`` or ``u >= t`` (then the event has probability
    exactly ceil(t 2^53)/2^53 or its complement), and record every threshold ``t``; any other use
    (``floor(u * L)``, ``u <= t``, arithmetic) fails the test."""

    seen: list = []

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):  # noqa: D105
        if method != "__call__" or ufunc not in (np.less, np.greater_equal) or len(inputs) != 2 \
                or not isinstance(inputs[0], _Recorded) or isinstance(inputs[1], _Recorded):
            raise AssertionError(f"a uniform is used in {ufunc.__name__}, not compared as u < t or u >= t")
        _Recorded.seen.append(np.asarray(inputs[1], dtype=np.float64))
        return ufunc(np.asarray(inputs[0]), inputs[1], **kwargs)


class _Spy(np.random.Generator):
    def random(self, *args, **kwargs):  # noqa: D102
        return super().random(*args, **kwargs).view(_Recorded)


@pytest.mark.parametrize("eps", [0.3, 4.0, 16.0, 40.0])
@pytest.mark.parametrize("name,params", CASES)
def test_every_compared_threshold_is_on_the_grid_and_modelled(name, params, eps):
    m = _make(name, params, eps)
    _Recorded.seen = []
    for x in INPUTS:
        m.randomize(np.repeat(np.asarray([x]), 50, axis=0), _Spy(np.random.PCG64(5)))
    seen = np.unique(np.concatenate([np.ravel(t) for t in _Recorded.seen]))
    assert np.all(seen * _SCALE == np.floor(seen * _SCALE)), (name, params, eps)  # on the 2^-53 grid
    modelled = set(_thresholds(m)) | {float(_disc(v)) for x in INPUTS for _, v in x} | {0.5}
    assert set(seen.tolist()) <= modelled, (name, params, eps, set(seen.tolist()) - modelled)


# --- exact laws --------------------------------------------------------------------------------
def _pairs(m, x):
    """Exact padding-and-sampling law: {(key, x): probability} over [0, d + ell) x {+1, -1}."""
    L = max(len(x), m.ell)
    P = {}
    for k, v in x:
        P[(k, 1)] = _disc(v) / L
        P[(k, -1)] = (1 - _disc(v)) / L
    for j in range(m.ell):
        w = (1 - Fraction(len(x), L)) / m.ell
        P[(m.d + j, 1)] = P[(m.d + j, -1)] = w / 2
    return P


def _uniform_rows(m, r: int = 0, j: int = 0):
    """Exact 3 x 3 matrix M[z, s] of the uniform-sampling mechanisms (round r, sampled key j)."""
    n = m.name
    if n in ("kvue", "ldpkv"):
        cum = np.cumsum(m._matrix(), axis=1)
        rows = []
        for z in range(3):
            c0, c1 = _R(cum[z, 0]), _R(cum[z, 1])
            rows.append([c0, c1 - c0, 1 - c1])
        return rows
    if n == "privkv":
        p1, p2, fp = _R(m.p1), _R(m.p2), _R(m.fake_threshold(np.zeros(1))[0])
    else:
        p1, p2 = _R(m.round_p1[r]), _R(m.p2)
        fp = _R(m.fake_threshold(m.fake_means[r][j:j + 1])[0])
    return [[p1, (1 - p1) * fp, (1 - p1) * (1 - fp)],
            [1 - p1, p1 * p2, p1 * (1 - p2)],
            [1 - p1, p1 * (1 - p2), p1 * p2]]


def _law(m, reports, x) -> list[Fraction]:
    """Exact Pr[report | user set x] for each report (the client path's realised probabilities)."""
    n = m.name
    held = dict(x)
    nrep = len(next(iter(reports.values())))
    out = []
    if n in ("kvue", "ldpkv", "privkv"):
        M = _uniform_rows(m)
        for j, s in zip(reports["j"], reports["s"]):
            j, s = int(j), int(s)
            if j in held:
                pi = _disc(held[j])
                out.append((pi * M[1][s] + (1 - pi) * M[2][s]) / m.d)
            else:
                out.append(M[0][s] / m.d)
        return out
    if n == "privkvm":
        for i in range(nrep):
            pr = Fraction(1)
            for r in range(m.rounds):
                j, s = int(reports["j"][i][r]), int(reports["s"][i][r])
                M = _uniform_rows(m, r, j)
                if j in held:
                    pi = _disc(held[j])
                    pr *= (pi * M[1][s] + (1 - pi) * M[2][s]) / m.d
                else:
                    pr *= M[0][s] / m.d
            out.append(pr)
        return out
    if n == "kvoh":
        p = _R(m.p)
        onehot = {0: (1, 0, 0), 1: (0, 0, 1), 2: (0, 1, 0)}

        def pb(bits, z):
            return math.prod((p if int(b) == o else 1 - p) for b, o in zip(bits, onehot[z]))

        for j, bits in zip(reports["j"], reports["bits"]):
            j = int(j)
            if j in held:
                pi = _disc(held[j])
                out.append((pi * pb(bits, 1) + (1 - pi) * pb(bits, 2)) / m.d)
            else:
                out.append(pb(bits, 0) / m.d)
        return out
    P = _pairs(m, x)
    if n == "pckv-grr":
        a, p = _R(m.a), _R(m.p)
        for k, y in zip(reports["k"], reports["y"]):
            k, y = int(k), int(y)
            pr = Fraction(0)
            for (kk, xx), w in P.items():
                pr += w * (a * (p if xx == y else 1 - p) if kk == k else (1 - a) / (m.d_ext - 1) / 2)
            out.append(pr)
        return out
    if n == "pckv-ue":
        h, hh, p1, a = _R(m.b / 2), _R(m.b), _R(m.p1), _R(m.a)
        other = {1: h, -1: hh - h, 0: 1 - hh}
        for y in reports["y"]:
            y = [int(v) for v in y]
            base = [other[v] for v in y]
            pr = Fraction(0)
            for (kk, xx), w in P.items():
                own = p1 if y[kk] == xx else (a - p1 if y[kk] == -xx else 1 - a)
                pr += w * math.prod(base[:kk]) * own * math.prod(base[kk + 1:])
            out.append(pr)
        return out
    if n == "hiskv":
        beta, t1, t2 = _R(m.beta), _R(m.p1), _R(m.p1 + m.q1)
        cells = 2 * m.d_ext
        g = _R(m.oetl.grr.p)
        Lmax = m.max_length
        true_len = min(max(len(x), 1), Lmax) - 1
        for ph, ln, k, y in zip(reports["phase"], reports["length"], reports["k"], reports["y"]):
            if int(ph) == 0:
                out.append(beta * (g if int(ln) == true_len else (1 - g) / (Lmax - 1)))
                continue
            c = 2 * int(k) + (int(y) < 0)
            pr = Fraction(0)
            for (kk, xx), w in P.items():
                cc = 2 * kk + (xx < 0)
                pr += w * (t1 if c == cc else (t2 - t1 if c == cc ^ 1 else (1 - t2) / (cells - 2)))
            out.append((1 - beta) * pr)
        return out
    raise AssertionError(n)


def _exact_worst(m):
    reports = all_reports(m)
    laws = [_law(m, reports, x) for x in INPUTS]
    for law in laws:
        assert sum(law) == 1, m  # one exact distribution per input over the enumerated reports
    worst = Fraction(1)
    for col in zip(*laws):
        lo, hi = min(col), max(col)
        assert lo > 0, ("a report possible under one input is impossible under another", m)
        worst = max(worst, hi / lo)
    return worst, reports, laws


@pytest.mark.parametrize("eps", _EPS)
@pytest.mark.parametrize("name,params", CASES)
def test_exact_worst_case_ratio_is_within_the_stated_eps(name, params, eps):
    m = _make(name, params, eps)
    stated = m.privacy().eps
    assert stated <= eps
    worst, reports, laws = _exact_worst(m)
    assert _ln(worst) <= Decimal(stated), (name, params, eps, float(_ln(worst)), stated)
    # the float probabilities describe the law that is sampled
    probs = np.stack([m.probabilities(reports, x) for x in INPUTS])
    np.testing.assert_allclose(probs, np.array([[float(v) for v in law] for law in laws]), rtol=1e-9, atol=0)


@pytest.mark.parametrize("name,params", [c for c in CASES if c[0] in ("kvue", "kvoh", "pckv-grr", "pckv-ue")]
                         + [("hiskv", {"ell": 2, "amplify": True, "beta": 0.0}), ("privkvm", {"rounds": 2})])
def test_tight_mechanisms_state_their_requested_eps(name, params):
    """Where the design ratio is e^eps, the grid costs nothing measurable: stated eps ~ requested."""
    for eps in (0.1, 1.0, 4.0, 16.0):
        m = _make(name, params, eps)
        assert eps * (1 - 1e-9) <= m.privacy().eps <= eps


def test_large_epsilon_saturates_instead_of_revealing_the_pair():
    """At eps = 700, e^eps / (e^eps + 1) is 1.0 in floats: the sampled probabilities stay below 1,
    the exact ratio stays finite and the statement is that ratio's eps (about 37 to 150, < 700)."""
    for name, params in CASES:
        m = _make(name, params, 700.0)
        worst, _, _ = _exact_worst(m)
        assert 1 < worst and _ln(worst) <= Decimal(m.privacy().eps) < 200, (name, params)


def test_pckv_grr_ratio_on_main_exceeded_e_eps():
    """The audit's counterexample, kept exact: the float a = (ell (e-1)+2)/(ell (e-1)+2 d') and
    p = (ell (e-1)+1)/(ell (e-1)+2) compared with ``random()`` realise a ratio above e^16; the
    calibrated mechanism does not."""
    eps, ell = 16.0, 1
    e, dp = math.exp(eps), D + ell
    a_old = (ell * (e - 1) + 2) / (ell * (e - 1) + 2 * dp)
    p_old = (ell * (e - 1) + 1) / (ell * (e - 1) + 2)
    a, p = _R(a_old), _R(p_old)
    p1, q1, q2 = a * p, a * (1 - p), (1 - a) / (dp - 1) / 2
    old = max(p1, q1, q2) / min(p1, q1, q2)  # ell = 1: (k, x) of a holder of (k, x) vs one of (k, -x) / of no k
    assert _ln(old) > Decimal(eps)
    m = keyvalue_mechanism("pckv-grr", eps, D, ell=ell)
    worst, _, _ = _exact_worst(m)
    assert _ln(worst) <= Decimal(m.privacy().eps) <= Decimal(eps)
