"""Privacy amplification by shuffling: eps_0-LDP reports of n users, shuffled, are (eps_c, delta)-DP.

Public entry points (signatures kept stable for the shuffle-protocol layer):

- :func:`shuffle_amplification` ``(eps0, n, delta, method="clones", **options) -> eps_c``
- :func:`local_epsilon_for` ``(eps_c, n, delta, method="clones", **options) -> eps0``
- :func:`min_users_for` ``(eps0, eps_c, delta, method="clones", **options) -> n``
- :func:`shuffled_binary_rr_epsilon` / :class:`ShuffledBinaryRR`: the exact privacy curve of the
  shuffled histogram of n binary randomized-response bits (small n) — a lower bound every valid
  amplification bound for binary RR must stay above.

Methods (neighbouring relation: replace-one, as in the papers)
---------------------------------------------------------------
``clones`` (default)
    Feldman–McMillan–Talwar, FOCS'21 ("Hiding among the clones"), numerical: the exact hockey-stick
    divergence of their dominating pair, evaluated in O(sqrt(n)) per delta over a binomial window
    (the omitted tails are added to delta as mass 1, so the result stays an upper bound), then
    bisection on eps. ``randomizer="generic"``: clone probability p_c = e^{-eps0}, valid for every
    (even adaptive) eps0-LDP randomizer. ``randomizer="binary_rr"``: p_c = 2/(e^{eps0}+1), valid for
    binary randomized response (BBGN19 blanket decomposition; FMT23 / Wang et al. 2024 — see the
    FMT23 erratum: not claimed here for general randomizers). Domain: any eps0 > 0, n >= 1.
``clones_closed_form``
    FMT21 Thm 3.1: ``ln(1 + (e^eps0-1)/(e^eps0+1) (8 sqrt(e^eps0 ln(4/delta)/n) + 8 e^eps0/n))``,
    domain ``eps0 <= ln(n / (16 ln(2/delta)))`` (``variant="paper"``); ``variant="code"`` is the
    authors' code's variant with domain ``eps0 <= ln(n/(16 ln(4/delta)))``.
``erlingsson2019``
    Erlingsson et al. SODA'19 Thm (survey Thm 1): ``12 eps0 sqrt(ln(1/delta)/n)``, domain
    ``eps0 < 1/2, n > 1000, delta < 0.01``.
``blanket``
    Balle, Bell, Gascón, Nissim CRYPTO'19 (survey Thm 2 / Thm 4). ``bound="hoeffding"`` (default) or
    ``"bennett"``: the numeric privacy-blanket bounds (BBGN19 §5; as in the authors' code) for ``randomizer="generic"``
    (any eps0-LDP randomizer, blanket mass >= e^{-eps0}) or ``"krr"`` (k-ary RR, option ``k``); domain:
    all. ``bound="closed_form"`` with ``randomizer="krr"``: BBGN19 Thm 3.1 (survey Thm 4, eq. 8–9),
    ``eps_c = max(sqrt(14 k ln(2/delta)/((n-1) lambda)), 27 k/((n-1) lambda))``, lambda =
    k/(e^eps0+k-1), domain eps_c <= 1.
``cheu2019``
    Cheu, Smith, Ullman, Zeber, Zhilyaev EUROCRYPT'19 (survey Thm 3), binary RR only.
    ``form="corollary4.7"`` (default): the paper's own Corollary 4.7 (read in the paper, see
    docs/protocols-counting-sums.md): with ``L = n·lambda`` the expected number of users who
    randomize (lambda = 2/(e^eps0+1)) and ``s = L - sqrt(2 L ln(2/delta))``,
    ``eps_c = sqrt(32 ln(4/delta)/s) (1 - s/n)``, domain ``14 ln(4/delta) <= L <= n``.
    ``form="exact"``: the survey's Thm 3 as printed, ``sqrt(32 ln(4/delta)/(lambda n))``, domain
    ``lambda >= 14 ln(4/delta)/n``; ``form="eq7"`` the survey's simplification
    ``sqrt(32 ln(4/delta) e^eps0 / n)`` with domain ``eps0 <= ln n - ln(14 ln(4/delta))`` [R].
    The survey forms are used to reproduce its Tables 1-4. They are **not** the paper's theorem: the
    paper's Claim 4.4 holds for a fixed number of randomizers, and Cor. 4.7 pays for the randomness
    of that number with ``s``; where ``L << n`` the survey form is smaller (0.636 vs 0.692 at n=1e6,
    L=1201.13, delta=1e-6). Exact accounting (``clones`` with ``randomizer="binary_rr"``) is far
    below both.

Every method returns ``min(eps0, bound)`` (shuffling is post-processing of eps0-LDP reports, so eps0
itself is always valid), rounded up with :func:`~shuffledp.core.privacy.round_up`. Parameters outside
a method's domain raise :class:`~shuffledp.core.OutOfDomainError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Literal

import numpy as np
from scipy import optimize, special, stats

from ..core.errors import OutOfDomainError, ValidationError
from ..core.privacy import PrivacyStatement, round_up
from ..core.validation import check_delta, check_epsilon, check_positive_int

__all__ = [
    "shuffled_batch_epsilon", "min_batch_for_target",
    "METHODS",
    "shuffle_amplification",
    "shuffle_amplification_delta",
    "shuffle_statement",
    "local_epsilon_for",
    "min_users_for",
    "ShuffledBinaryRR",
    "shuffled_binary_rr_epsilon",
]

Method = Literal["clones", "clones_closed_form", "erlingsson2019", "blanket", "cheu2019"]
METHODS: tuple[str, ...] = ("clones", "clones_closed_form", "erlingsson2019", "blanket", "cheu2019")

_OPTIONS: dict[str, dict[str, tuple]] = {
    "clones": {"randomizer": ("generic", "binary_rr")},
    "clones_closed_form": {"variant": ("paper", "code")},
    "erlingsson2019": {},
    "blanket": {"bound": ("hoeffding", "bennett", "closed_form"), "randomizer": ("generic", "krr"), "k": ()},
    "cheu2019": {"form": ("corollary4.7", "exact", "eq7")},
}
_DEFAULTS: dict[str, dict[str, Any]] = {
    "clones": {"randomizer": "generic"},
    "clones_closed_form": {"variant": "paper"},
    "erlingsson2019": {},
    "blanket": {"bound": "hoeffding", "randomizer": "generic", "k": 2},
    "cheu2019": {"form": "corollary4.7"},
}


def _round_down(x: float) -> float:
    if x <= 0.0 or math.isinf(x):
        return x
    return math.nextafter(x - abs(x) * 1e-12, 0.0)


def _resolve(method: str, options: dict[str, Any]) -> dict[str, Any]:
    if method not in METHODS:
        raise ValidationError(f"method must be one of {METHODS}, got {method!r}", parameter="method")
    allowed = _OPTIONS[method]
    for key, val in options.items():
        if key not in allowed:
            raise ValidationError(f"method {method!r} takes options {tuple(allowed) or '()'}, got {key!r}",
                                  parameter=key)
        if allowed[key] and val not in allowed[key]:
            raise ValidationError(f"{key} must be one of {allowed[key]}, got {val!r}", parameter=key)
    opts = {**_DEFAULTS[method], **options}
    if method == "blanket":
        if "k" in options and opts["randomizer"] != "krr":
            raise ValidationError("blanket option k (the k-ary RR's domain size) applies only to randomizer='krr'; "
                                  f"randomizer={opts['randomizer']!r} covers every eps0-LDP randomizer and takes no k",
                                  parameter="k")
        opts["k"] = check_positive_int(opts["k"], "k", minimum=2)
        if opts["bound"] == "closed_form" and opts["randomizer"] != "krr":
            raise ValidationError("blanket bound='closed_form' (BBGN19 Thm 3.1) needs randomizer='krr'",
                                  parameter="randomizer")
    return opts


# =========================================================================== numeric delta(eps) bounds

class _CloneDelta:
    """Hockey-stick divergence of the FMT21 dominating pair, as a function of eps (upper bound on delta).

    C ~ Bin(n-1, p_clone) clones; A | C ~ Bin(C, 1/2); user 1 adds one to the counted type w.p.
    alpha = e^eps0/(e^eps0+1) (P) or 1-alpha (Q). Given C = c the likelihood ratio is increasing in
    the count, so the divergence is a tail difference at a threshold. Binomial mass of C outside a
    window (built once per (eps0, n)) is added as if fully leaking (H <= 1), keeping the result an
    upper bound. Cost per call: O(window) = O(sqrt(n p_clone)), capped at ``max_points`` evaluations
    by grouping c into blocks bounded by their first element (still an upper bound).
    """

    def __init__(self, eps0: float, n: int, p_clone: float, delta_target: float, max_points: int = 1 << 13) -> None:
        self.eps0 = eps0
        self.alpha = float(special.expit(eps0))
        m = n - 1
        if m == 0:
            self.c, self.w, self.tail = np.zeros(1), np.ones(1), 0.0
            return
        tail_tol = max(min(delta_target * 1e-6, 1e-12), 1e-300)
        # Window mean +- k sd with a generous Chernoff-style k (scipy's binom.isf is unreliable in far
        # tails); its exact complement mass is added to delta below, so any window stays valid.
        mean, sd = m * p_clone, math.sqrt(m * p_clone * (1.0 - p_clone))
        half = math.ceil(1.5 * math.sqrt(2.0 * math.log(2.0 / tail_tol)) * sd + 10.0)
        lo, hi = max(int(mean) - half, 0), min(int(mean) + half, m)
        self.tail = float(stats.binom.cdf(lo - 1, m, p_clone) + stats.binom.sf(hi, m, p_clone))
        width = hi - lo + 1
        if width <= max_points:
            self.c = np.arange(lo, hi + 1, dtype=float)
            self.w = stats.binom.pmf(self.c, m, p_clone)
        else:
            # Blocks of consecutive c (at most sd/64 wide): H_c is non-increasing in c (one more
            # clone adds an independent fair coin: post-processing), so the block's mass times H at
            # its first c bounds the block.
            step = max(1, int(sd // 64))
            starts = np.arange(lo, hi + 1, step, dtype=float)
            ends = np.minimum(starts + step - 1, hi)
            self.c = starts
            self.w = stats.binom.cdf(ends, m, p_clone) - stats.binom.cdf(starts - 1, m, p_clone)

    def __call__(self, eps: float) -> float:
        if eps >= self.eps0:
            return 0.0
        E = math.exp(eps)
        alpha = self.alpha
        denom = alpha - E * (1.0 - alpha)
        if denom <= 0.0:
            return 0.0
        u = (E * alpha - (1.0 - alpha)) / denom
        beta = u / (1.0 + u)
        c = self.c
        t = np.floor(beta * (c + 1.0)) + 1.0
        sf1 = stats.binom.sf(t - 1.0, c, 0.5)           # P[A > t-1] = P[A >= t]
        k = t - 1.0                                        # P[A = t-1], A ~ Bin(c, 1/2)
        ok = (k >= 0) & (k <= c)
        kk = np.where(ok, k, 0.0)
        log_pmf = special.gammaln(c + 1) - special.gammaln(kk + 1) - special.gammaln(c - kk + 1) - c * math.log(2.0)
        sf2 = sf1 + np.where(ok, np.exp(log_pmf), 0.0)     # P[A > t-2]
        p_tail = alpha * sf2 + (1.0 - alpha) * sf1
        q_tail = (1.0 - alpha) * sf2 + alpha * sf1
        h = np.maximum(p_tail - E * q_tail, 0.0)
        return float(min(1.0, math.fsum((self.w * h).tolist()) + self.tail))


def _blanket_params(eps: float, eps0: float, randomizer: str, k: int) -> tuple[float, float, float, float, float]:
    """(gamma_lb, range b, max b_plus, variance bound c, a = e^eps - 1) of the BBGN19 privacy
    amplification random variable (their Sec. 5; generic and k-RR cases)."""
    a = math.expm1(eps)
    if randomizer == "generic":
        g_lb, g_ub = math.exp(-eps0), 1.0
        b = g_ub * (math.exp(eps) + 1.0) * (math.exp(eps0) - math.exp(-eps0))
        b_plus = g_ub * math.exp(eps0) * (1.0 - math.exp(eps - 2.0 * eps0))
        c = g_ub * (math.exp(eps0) * (math.exp(2 * eps) + 1.0) - 2.0 * g_lb * math.exp(eps - 2.0 * eps0))
    else:
        g = k / (math.exp(eps0) + k - 1.0)
        g_lb = g
        b = (1.0 - g) * k * (math.exp(eps) + 1.0)
        b_plus = g * (1.0 - math.exp(eps)) + (1.0 - g) * k
        c = g * (2.0 - g) * math.expm1(eps) ** 2 + (1.0 - g) ** 2 * k * (math.exp(2 * eps) + 1.0)
    return g_lb, b, b_plus, c, a


def _blanket_delta(eps: float, eps0: float, n: int, bound: str, randomizer: str, k: int) -> float:
    """BBGN19 numeric blanket bound on delta at eps (Hoeffding or Bennett)."""
    if eps >= eps0:
        return 0.0
    if eps <= 0.0:
        return 1.0
    g, b, b_plus, c, a = _blanket_params(eps, eps0, randomizer, k)
    if bound == "hoeffding":
        log_d = (-math.log(g * n) + 2.0 * math.log(b) - math.log(4.0 * a)
                 + n * math.log1p(-g * -math.expm1(-2.0 * a * a / (b * b))))
        return min(1.0, math.exp(min(log_d, 0.0)))
    # Bennett: E_{m ~ Bin(n, g), m >= 1}[exp(-m alpha' phi(beta'))] / (eta ln(1 + beta')) / (g n),
    # with the binomial expectation in closed form via the probability generating function.
    if b_plus <= 0.0:
        return 1.0
    alpha_p = c / b_plus**2
    beta_p = a * b_plus / c
    phi = (1.0 + beta_p) * math.log1p(beta_p) - beta_p
    if phi <= 0.0:
        phi = beta_p**2
    x = math.exp(-alpha_p * phi)
    A = n * math.log1p(-g * (1.0 - x))
    B = n * math.log1p(-g) if g < 1.0 else -math.inf
    if B >= A:
        return 0.0
    log_e = A + math.log(-math.expm1(B - A))
    log_d = log_e - math.log(g * n) + math.log(b_plus) - math.log(math.log1p(beta_p))
    return min(1.0, math.exp(min(log_d, 0.0)))


def _numeric_delta_fn(method: str, opts: dict[str, Any], delta_target: float) -> Callable[[float, float, int], float] | None:
    if method == "clones":
        rr = opts["randomizer"] == "binary_rr"

        def f(eps: float, eps0: float, n: int) -> float:
            p = 2.0 / (math.exp(eps0) + 1.0) if rr else math.exp(-eps0)
            return _CloneDelta(eps0, n, p, delta_target)(eps)
        return f
    if method == "blanket" and opts["bound"] in ("hoeffding", "bennett"):
        bound, rz, k = opts["bound"], opts["randomizer"], opts["k"]
        return lambda eps, eps0, n: _blanket_delta(eps, eps0, n, bound, rz, k)
    return None


def _bisect_eps(delta_fn: Callable[[float], float], eps0: float, delta: float) -> float:
    """Smallest eps in [0, eps0] (to relative ~1e-10) with delta_fn(eps) <= delta.

    Brent's method on ``log delta_fn(eps) - log delta`` finds the crossing; the answer is then
    nudged upward until ``delta_fn`` *evaluated there* is <= delta, so the returned value always
    satisfies the inequality (eps0 does trivially; it is the fallback).
    """
    if delta_fn(0.0) <= delta:
        return 0.0
    target = math.log(delta)

    def f(e: float) -> float:
        return math.log(max(delta_fn(e), 1e-300)) - target

    try:
        root = optimize.brentq(f, 0.0, eps0, xtol=1e-13, rtol=1e-11, maxiter=200)
    except ValueError:  # no sign change: no amplification certified
        return eps0
    step = 1e-10 * max(root, 1e-12)
    x = root
    for _ in range(60):
        if x >= eps0:
            return eps0
        if delta_fn(x) <= delta:
            return x
        x = x + step
        step *= 2.0
    return eps0


# =========================================================================== closed forms

def _erlingsson(eps0: float, n: int, delta: float) -> float:
    if not (eps0 < 0.5 and n > 1000 and delta < 0.01):
        bad = "eps0" if not eps0 < 0.5 else ("delta" if not delta < 0.01 else "n")
        raise OutOfDomainError("erlingsson2019 (EFMRTT19 Thm) needs eps0 < 0.5, n > 1000 and delta < 0.01; "
                               f"got eps0={eps0!r}, n={n}, delta={delta!r}", parameter=bad)
    return 12.0 * eps0 * math.sqrt(math.log(1.0 / delta) / n)


def _cheu_cor47(eps0: float, n: int, delta: float) -> float:
    """Cheu et al. 2019 Cor. 4.7 at flip probability 2/(e^eps0+1) (expected randomizers n·flip)."""
    L = math.log(4.0 / delta)
    lam = n * 2.0 / (math.exp(eps0) + 1.0)
    if not (14.0 * L <= lam <= n):
        raise OutOfDomainError(f"cheu2019 (Cor. 4.7) needs the expected number of randomizing users "
                               f"n·2/(e^eps0+1) = {lam:.6g} in [14 ln(4/delta), n] = [{14 * L:.6g}, {n}] "
                               f"(eps0={eps0!r}, n={n})", parameter="eps0")
    s = lam - math.sqrt(2.0 * lam * math.log(2.0 / delta))
    return math.sqrt(32.0 * L / s) * (1.0 - s / n)


def _cheu(eps0: float, n: int, delta: float, form: str) -> float:
    L = math.log(4.0 / delta)
    if form == "corollary4.7":
        return _cheu_cor47(eps0, n, delta)
    if form == "exact":
        lam = 2.0 / (math.exp(eps0) + 1.0)
        if lam < 14.0 * L / n:
            raise OutOfDomainError(f"cheu2019 needs lambda = 2/(e^eps0+1) >= 14 ln(4/delta)/n = {14 * L / n:.4g}; "
                                   f"got lambda = {lam:.4g} (eps0={eps0!r}, n={n})", parameter="eps0")
        return math.sqrt(32.0 * L / (lam * n))
    if eps0 > math.log(n) - math.log(14.0 * L):
        raise OutOfDomainError("cheu2019 form='eq7' needs eps0 <= ln n - ln(14 ln(4/delta)) = "
                               f"{math.log(n) - math.log(14 * L):.4g}; got eps0={eps0!r}", parameter="eps0")
    return math.sqrt(32.0 * L * math.exp(eps0) / n)


def _blanket_closed(eps0: float, n: int, delta: float, k: int) -> float:
    if n < 2:
        raise OutOfDomainError("blanket closed form needs n >= 2", parameter="n")
    lam = k / (math.exp(eps0) + k - 1.0)
    eps_c = max(math.sqrt(14.0 * k * math.log(2.0 / delta) / ((n - 1) * lam)), 27.0 * k / ((n - 1) * lam))
    if eps_c > 1.0:
        raise OutOfDomainError(f"blanket closed form (BBGN19 Thm 3.1) is valid only for eps_c <= 1; "
                               f"eps0={eps0!r}, n={n}, k={k} would give {eps_c:.4g}", parameter="eps0")
    return eps_c


def _clones_closed(eps0: float, n: int, delta: float, variant: str) -> float:
    e0 = math.exp(eps0)
    if variant == "paper":
        limit = math.log(n / (16.0 * math.log(2.0 / delta))) if n > 16.0 * math.log(2.0 / delta) else -math.inf
        if eps0 > limit:
            raise OutOfDomainError(f"clones_closed_form (FMT21 Thm 3.1) needs eps0 <= ln(n/(16 ln(2/delta))) = "
                                   f"{limit:.4g}; got eps0={eps0!r}", parameter="eps0")
        inner = 8.0 * math.sqrt(e0 * math.log(4.0 / delta) / n) + 8.0 * e0 / n
        return math.log1p((e0 - 1.0) / (e0 + 1.0) * inner)
    limit = math.log(n / (16.0 * math.log(4.0 / delta))) if n > 16.0 * math.log(4.0 / delta) else -math.inf
    if eps0 > limit:
        raise OutOfDomainError(f"clones_closed_form variant='code' needs eps0 <= ln(n/(16 ln(4/delta))) = "
                               f"{limit:.4g}; got eps0={eps0!r}", parameter="eps0")
    a = 8.0 * math.sqrt(e0 * math.log(4.0 / delta) / n)
    c = 8.0 * e0 / n
    e_prime = math.log1p(a + c)
    return math.log1p((1.0 - math.exp(-eps0)) / (1.0 + math.exp(-eps0 - e_prime)) * (a + c))


def _raw(eps0: float, n: int, delta: float, method: str, opts: dict[str, Any]) -> float:
    """The bound itself (not min'ed with eps0, not rounded)."""
    if method == "clones":
        p = 2.0 / (math.exp(eps0) + 1.0) if opts["randomizer"] == "binary_rr" else math.exp(-eps0)
        return _bisect_eps(_CloneDelta(eps0, n, p, delta), eps0, delta)
    fn = _numeric_delta_fn(method, opts, delta)
    if fn is not None:
        return _bisect_eps(lambda e: fn(e, eps0, n), eps0, delta)
    if method == "erlingsson2019":
        return _erlingsson(eps0, n, delta)
    if method == "cheu2019":
        return _cheu(eps0, n, delta, opts["form"])
    if method == "blanket":
        return _blanket_closed(eps0, n, delta, opts["k"])
    if method == "clones_closed_form":
        return _clones_closed(eps0, n, delta, opts["variant"])
    raise ValidationError(f"unknown method {method!r}", parameter="method")  # pragma: no cover


def _check_n(n: Any) -> int:
    return check_positive_int(n, "n", minimum=1)


# =========================================================================== public API

def shuffle_amplification(eps0: float, n: int, delta: float, method: Method = "clones", **options: Any) -> float:
    """Central epsilon of the shuffled reports of ``n`` users, each ``eps0``-LDP, at ``delta``.

    Parameters
    ----------
    eps0 : float
        Local privacy parameter (> 0).
    n : int
        Number of users whose reports are shuffled together (>= 1).
    delta : float
        Target delta in (0, 1).
    method : str
        ``"clones"`` (default), ``"clones_closed_form"``, ``"erlingsson2019"``, ``"blanket"``,
        ``"cheu2019"`` — see the module docstring for each one's source, options and domain.

    Returns
    -------
    float
        eps_c with ``eps_c <= eps0``, rounded up. Replace-one neighbouring.

    Raises
    ------
    ValidationError
        Bad eps0 / n / delta / method / option.
    OutOfDomainError
        The parameters are outside the chosen theorem's validity domain.
    """
    eps0 = check_epsilon(eps0, "eps0")
    n = _check_n(n)
    delta = check_delta(delta)
    opts = _resolve(method, options)
    return _forward(eps0, n, delta, method, opts)


def _forward(eps0: float, n: int, delta: float, method: str, opts: dict[str, Any]) -> float:
    """eps_c of validated inputs, rounded outward (what :func:`shuffle_amplification` returns)."""
    return round_up(min(eps0, _raw(eps0, n, delta, method, opts)))


def shuffle_amplification_delta(eps_c: float, eps0: float, n: int, method: Method = "clones", **options: Any) -> float:
    """delta certified at ``eps_c`` by a numeric method (``clones`` or ``blanket`` Hoeffding/Bennett)."""
    eps_c = check_epsilon(eps_c, "eps_c")
    eps0 = check_epsilon(eps0, "eps0")
    n = _check_n(n)
    opts = _resolve(method, options)
    fn = _numeric_delta_fn(method, opts, 1e-12)
    if fn is None:
        raise ValidationError(f"method {method!r} has no delta(eps) form; use a numeric method", parameter="method")
    return min(1.0, round_up(fn(eps_c, eps0, n)))


def shuffle_statement(eps0: float, n: int, delta: float, method: Method = "clones", **options: Any) -> PrivacyStatement:
    """:func:`shuffle_amplification` as a :class:`PrivacyStatement` (model ``shuffle``, replace-one)."""
    eps_c = shuffle_amplification(eps0, n, delta, method, **options)
    extra = ", ".join(f"{k}={v}" for k, v in options.items())
    return PrivacyStatement(eps_c, delta, model="shuffle", neighbouring="replace_one",
                            note=f"shuffle amplification of eps0={eps0:g} over n={n} users, method {method}"
                                 + (f" ({extra})" if extra else ""))


def _converse_closed(eps_c: float, n: int, delta: float, method: str, opts: dict[str, Any]) -> float:
    """The closed-form theorems solved for eps0 (the survey's converse tables); OutOfDomainError
    when the solution falls outside the theorem's domain (the tables' "None")."""
    if method == "erlingsson2019":
        if not (n > 1000 and delta < 0.01):
            raise OutOfDomainError("erlingsson2019 needs n > 1000 and delta < 0.01", parameter="n")
        e0 = eps_c / (12.0 * math.sqrt(math.log(1.0 / delta) / n))
        if not e0 < 0.5:
            raise OutOfDomainError(f"erlingsson2019 converse gives eps0 = {e0:.4g}, outside eps0 < 0.5",
                                   parameter="eps_c")
        return e0
    if method == "cheu2019":
        L = math.log(4.0 / delta)
        if opts["form"] == "corollary4.7":
            # eps_c(eps0) increases with eps0 on the domain eps0 <= ln(2n/(14L) - 1): bisection
            if 2.0 * n / (14.0 * L) - 1.0 <= 1.0:
                raise OutOfDomainError(f"cheu2019 (Cor. 4.7) needs n > 28 ln(4/delta) = {28 * L:.4g}", parameter="n")
            hi = math.log(2.0 * n / (14.0 * L) - 1.0) * (1.0 - 1e-12)  # inside the domain despite rounding
            if _cheu_cor47(hi, n, delta) <= eps_c:
                return hi
            lo = 1e-12
            if 2.0 * n / (math.exp(lo) + 1.0) > n or _cheu_cor47(lo, n, delta) > eps_c:
                raise OutOfDomainError(f"cheu2019 (Cor. 4.7): no eps0 gives eps_c <= {eps_c!r} at n={n}",
                                       parameter="eps_c")
            for _ in range(200):
                if hi - lo <= 1e-12 * hi:
                    break
                mid = 0.5 * (lo + hi)
                if _cheu_cor47(mid, n, delta) <= eps_c:
                    lo = mid
                else:
                    hi = mid
            return lo
        if opts["form"] == "exact":
            lam = 32.0 * L / (eps_c**2 * n)
            if not (14.0 * L / n <= lam < 1.0):
                raise OutOfDomainError(f"cheu2019 converse gives lambda = {lam:.4g}, outside "
                                       f"[14 ln(4/delta)/n, 1) = [{14 * L / n:.4g}, 1)", parameter="eps_c")
            return math.log(2.0 / lam - 1.0)
        x = eps_c**2 * n / (32.0 * L)
        if not (x > 1.0 and math.log(x) <= math.log(n) - math.log(14.0 * L)):
            raise OutOfDomainError("cheu2019 form='eq7' converse is outside 0 < eps0 <= ln n - ln(14 ln(4/delta))",
                                   parameter="eps_c")
        return math.log(x)
    if method == "blanket":  # closed_form, krr
        k = opts["k"]
        if eps_c > 1.0 or n < 2:
            raise OutOfDomainError("blanket closed form (BBGN19 Thm 3.1) needs eps_c <= 1 and n >= 2",
                                   parameter="eps_c")
        lam = max(14.0 * k * math.log(2.0 / delta) / ((n - 1) * eps_c**2), 27.0 * k / ((n - 1) * eps_c))
        if not lam < 1.0:
            raise OutOfDomainError(f"blanket closed form converse gives lambda = {lam:.4g} >= 1", parameter="eps_c")
        return math.log1p(k * (1.0 - lam) / lam)
    # clones_closed_form: increasing in eps0 on (0, limit]; bisection
    variant = opts["variant"]
    L2 = math.log((2.0 if variant == "paper" else 4.0) / delta)
    if n <= 16.0 * L2:
        raise OutOfDomainError(f"clones_closed_form needs n > 16 ln({'2' if variant == 'paper' else '4'}/delta)",
                               parameter="n")
    limit = math.log(n / (16.0 * L2))
    if _clones_closed(limit, n, delta, variant) <= eps_c:
        return limit
    lo, hi = 0.0, limit
    if _clones_closed(1e-12, n, delta, variant) > eps_c:
        raise OutOfDomainError(f"clones_closed_form: no eps0 gives eps_c <= {eps_c!r}", parameter="eps_c")
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = 0.5 * (lo + hi)
        if _clones_closed(mid, n, delta, variant) <= eps_c:
            lo = mid
        else:
            hi = mid
    return lo


def local_epsilon_for(eps_c: float, n: int, delta: float, method: Method = "clones", **options: Any) -> float:
    """Largest eps0 whose shuffled reports over ``n`` users are (eps_c, delta)-DP (rounded down).

    Numeric methods (``clones``, ``blanket`` Hoeffding/Bennett): bisection on eps0 of
    ``delta(eps_c; eps0, n) <= delta``; the answer is >= eps_c up to the outward-rounding margin
    (no amplification is always valid). Closed forms: the theorem solved for eps0; raises
    OutOfDomainError if that lies outside the theorem's domain (the survey tables' "None").

    Guarantee: ``shuffle_amplification(local_epsilon_for(eps_c, ...), ...) <= eps_c`` exactly. The
    candidate is checked with the forward function itself (its own root finding and outward
    rounding, which may sit ~1e-10 relative above the crossing the bisection found) and moved down
    until that holds.
    """
    eps_c = check_epsilon(eps_c, "eps_c")
    n = _check_n(n)
    delta = check_delta(delta)
    opts = _resolve(method, options)
    fn = _numeric_delta_fn(method, opts, delta)
    if fn is None:
        return _below_forward(_converse_closed(eps_c, n, delta, method, opts), eps_c, n, delta, method, opts)

    def ok(e0: float) -> bool:
        return fn(eps_c, e0, n) <= delta

    lo = eps_c  # delta(eps_c; eps_c, n) = 0
    hi = max(2.0 * lo, lo + 1.0)
    while ok(hi):
        lo = hi
        hi *= 2.0
        if hi > 1e4:
            return _below_forward(lo, eps_c, n, delta, method, opts)
    for _ in range(200):
        if hi - lo <= 1e-11 * hi:
            break
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return _below_forward(lo, eps_c, n, delta, method, opts)


def _below_forward(e0: float, eps_c: float, n: int, delta: float, method: str, opts: dict[str, Any]) -> float:
    """``e0`` rounded down, then moved down (relative steps 1e-10, doubling) until the forward map
    *exactly as* :func:`shuffle_amplification` computes and rounds it is <= eps_c. The forward is
    non-decreasing in eps0 and <= round_up(eps0), so the walk ends at the latest near
    eps_c / (1 + 1e-12) (no amplification); usually the first candidate passes."""
    x = _round_down(e0)
    step = 1e-10
    for _ in range(64):
        if _forward(x, n, delta, method, opts) <= eps_c:
            return x
        x = _round_down(x * (1.0 - step))
        step = min(2.0 * step, 0.5)
    raise RuntimeError(f"local_epsilon_for: no eps0 below {e0!r} verified for eps_c={eps_c!r}")  # pragma: no cover


def min_users_for(eps0: float, eps_c: float, delta: float, method: Method = "clones", **options: Any) -> int:
    """Smallest n such that eps0-LDP reports of n users, shuffled, are (eps_c, delta)-DP.

    Exponential then binary search over n (methods are non-increasing in n). Returns 1 when
    eps_c >= eps0. Raises OutOfDomainError if no n <= 2^50 suffices; for a closed form whose domain
    excludes (eps0, delta) at every n (e.g. erlingsson2019 with eps0 >= 1/2) that is the theorem's own
    domain error, not "no n reaches eps_c". Every closed-form domain only widens as n grows, so the
    probe at n = 2^50 decides this.
    """
    eps0 = check_epsilon(eps0, "eps0")
    eps_c = check_epsilon(eps_c, "eps_c")
    delta = check_delta(delta)
    opts = _resolve(method, options)
    if eps_c >= eps0:
        return 1
    fn = _numeric_delta_fn(method, opts, delta)
    n_max = 2**50
    if fn is None:
        try:
            _raw(eps0, n_max, delta, method, opts)
        except OutOfDomainError as err:
            raise OutOfDomainError(f"method {method!r}: eps0={eps0!r}, delta={delta!r} lie outside the theorem's "
                                   f"domain for every n <= 2^50: {err}", parameter=err.parameter) from err

    def ok(n: int) -> bool:
        if fn is not None:
            return fn(eps_c, eps0, n) <= delta
        try:
            return _raw(eps0, n, delta, method, opts) <= eps_c
        except OutOfDomainError:
            return False

    lo, hi = 1, 2
    while not ok(hi):
        lo = hi
        hi *= 2
        if hi > n_max:
            raise OutOfDomainError(f"method {method!r}: no n <= 2^50 reaches eps_c={eps_c!r} from eps0={eps0!r}",
                                   parameter="eps_c")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


# =========================================================================== exact binary RR

@dataclass(frozen=True)
class ShuffledBinaryRR:
    """Exact privacy curve of the shuffled output of n binary randomized-response reports.

    The shuffled multiset of bits is equivalent to the count of ones. User 1 holds 0 or 1
    (replace-one neighbours); the other ``n-1`` users hold fixed bits, ``others_ones`` of them 1.
    Each user reports the truth w.p. ``p = e^eps0/(e^eps0+1)``. The count of the others is the
    convolution ``Bin(others_ones, p) * Bin(n-1-others_ones, 1-p)``; the two output laws are its
    mixtures with user 1's bit. ``delta(eps)`` is the larger hockey-stick divergence of the two
    directions, ``epsilon(delta)`` its exact inverse (piecewise solve over the sorted likelihood
    ratios). Cost O(n^2) to build (direct convolution), O(n log n) per query.

    For one dataset this is the exact (eps, delta); the maximum over datasets
    (:func:`shuffled_binary_rr_epsilon`) is the exact eps_c of shuffled binary RR, so every valid
    amplification bound that covers binary RR must be >= it.
    """

    eps0: float
    n: int
    others_ones: int = 0

    def __post_init__(self) -> None:
        check_epsilon(self.eps0, "eps0")
        n = _check_n(self.n)
        if n > 20000:
            raise ValidationError("ShuffledBinaryRR is an exact O(n^2) computation; n must be <= 20000",
                                  parameter="n")
        if not (0 <= int(self.others_ones) <= n - 1):
            raise ValidationError(f"others_ones must lie in [0, {n - 1}], got {self.others_ones!r}",
                                  parameter="others_ones")
        p = float(special.expit(self.eps0))
        n1 = int(self.others_ones)
        n0 = n - 1 - n1
        s = np.convolve(stats.binom.pmf(np.arange(n1 + 1), n1, p), stats.binom.pmf(np.arange(n0 + 1), n0, 1.0 - p))
        s_prev = np.concatenate([[0.0], s])   # S(c-1), c = 0..n
        s_cur = np.concatenate([s, [0.0]])    # S(c)
        P = p * s_prev + (1.0 - p) * s_cur    # user 1 holds 1: count of ones
        Q = (1.0 - p) * s_prev + p * s_cur    # user 1 holds 0
        object.__setattr__(self, "_P", P)
        object.__setattr__(self, "_Q", Q)

    def delta(self, eps: float) -> float:
        """Exact delta(eps) = max(H_{e^eps}(P||Q), H_{e^eps}(Q||P))."""
        E = math.exp(eps)
        P, Q = self._P, self._Q  # type: ignore[attr-defined]
        d1 = math.fsum(np.maximum(P - E * Q, 0.0).tolist())
        d2 = math.fsum(np.maximum(Q - E * P, 0.0).tolist())
        return min(1.0, max(d1, d2))

    @staticmethod
    def _eps_one_way(P: np.ndarray, Q: np.ndarray, delta: float) -> float:
        pos = P > 0
        inf_mass = float(P[pos & (Q == 0)].sum())
        if inf_mass > delta:
            return math.inf
        fin = pos & (Q > 0)
        L = np.log(P[fin]) - np.log(Q[fin])
        order = np.argsort(-L)
        L, Ps, Qs = L[order], P[fin][order], Q[fin][order]
        cP = inf_mass + np.concatenate([[0.0], np.cumsum(Ps)])  # mass with index < j
        cQ = np.concatenate([[0.0], np.cumsum(Qs)])
        d_at = cP[:-1] - np.exp(L) * cQ[:-1]                     # delta(L_j), non-decreasing in j
        J = int(np.searchsorted(d_at, delta, side="right"))     # d_at[:J] <= delta
        if J == len(L):
            num, den = cP[-1] - delta, cQ[-1]
        else:
            num, den = cP[J] - delta, cQ[J]
        if num <= 0 or den <= 0:
            return 0.0
        return max(0.0, math.log(num / den))

    def epsilon(self, delta: float) -> float:
        """Exact smallest eps with delta(eps) <= delta (not rounded)."""
        delta = check_delta(delta)
        P, Q = self._P, self._Q  # type: ignore[attr-defined]
        return max(self._eps_one_way(P, Q, delta), self._eps_one_way(Q, P, delta))


def shuffled_binary_rr_epsilon(eps0: float, n: int, delta: float, others_ones: int | None = None) -> float:
    """Exact eps of shuffled binary RR at ``delta`` (see :class:`ShuffledBinaryRR`).

    ``others_ones=None`` maximises over the other users' data: every configuration for n <= 128,
    else 33 evenly spaced ones (then the value is a lower bound on the worst case; the
    configurations are symmetric, ``k`` and ``n-1-k`` give the same value). Not rounded: this is
    the reference *lower* bound.
    """
    eps0 = check_epsilon(eps0, "eps0")
    n = _check_n(n)
    delta = check_delta(delta)
    if others_ones is not None:
        return ShuffledBinaryRR(eps0, n, int(others_ones)).epsilon(delta)
    half = (n - 1) // 2
    configs = range(half + 1) if n <= 128 else sorted(set(np.linspace(0, half, 33).round().astype(int).tolist()))
    return max(ShuffledBinaryRR(eps0, n, k).epsilon(delta) for k in configs)


def shuffled_batch_epsilon(eps0: float, n: int, delta: float) -> tuple[float, str]:
    """eps_c of one shuffled batch of ``n`` eps0-LDP reports at ``delta``: ``(eps_c, how)``.

    The numerical clone bound of Feldman, McMillan and Talwar (FOCS 2021; :func:`shuffle_amplification`,
    ``method="clones"``), valid for every eps0-LDP randomizer (replace-one neighbouring). Outside
    the bound's domain, or with no report, no amplification is claimed: ``eps_c = eps0`` (the
    shuffled multiset is a post-processing of eps0-LDP reports). ``eps0 = inf`` (no local
    randomizer) gives ``inf``.
    """
    if not math.isfinite(eps0):
        return math.inf, "no local randomization (test mechanism): no privacy"
    if n < 1:
        return eps0, "no reports"
    try:
        eps = float(shuffle_amplification(eps0, n, delta, method="clones"))
    except OutOfDomainError:
        return eps0, "shuffledp.accounting: outside the bound's domain, no amplification claimed"
    return min(eps, eps0), "shuffledp.accounting (clones)"


def min_batch_for_target(eps0: float, eps_c: float, delta: float, n_max: int = 10**8) -> int:
    """Smallest batch ``n`` with :func:`shuffled_batch_epsilon` ``<= eps_c``; ValidationError naming
    ``target_central`` when unreachable (``n_max``: the operational cap on one batch)."""
    if not (eps_c > 0 and 0 < delta < 1):
        raise ValidationError(f"target central (eps, delta) must have eps > 0 and delta in (0, 1), got "
                              f"({eps_c}, {delta})", parameter="target_central")
    if eps0 <= eps_c:
        return 1
    if not math.isfinite(eps0):
        raise ValidationError("a mechanism without local randomization cannot reach a central target",
                              parameter="target_central")
    try:
        n = int(min_users_for(eps0, eps_c, delta, method="clones"))
    except OutOfDomainError as e:
        raise ValidationError(f"target eps_c={eps_c} at delta={delta} is unreachable from eps0={eps0}: {e}",
                              parameter="target_central") from e
    if n > n_max:
        raise ValidationError(f"target eps_c={eps_c} at delta={delta} is unreachable from eps0={eps0} with "
                              f"at most {n_max} reports per batch (needs {n})", parameter="target_central")
    return n

