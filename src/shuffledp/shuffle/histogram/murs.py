"""``murs``: several shufflers that each inject uniform fake reports (Wang et al., "Improving
Utility and Security of the Shuffler-based Differential Privacy", PVLDB 13(13) 2020).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.errors import OutOfDomainError, ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, round_up
from ...core.validation import check_positive_int
from ...local.grr import GeneralizedRandomizedResponse
from ...local.hashing import LocalHashing
from ..base import Messages, Protocol, bits_for, n_messages
from ._base import HistogramProtocol, _local_statement, _MARGIN, _PureOracleMixin, blanket_epsilon, blanket_required

__all__ = ["MURS", "PROTOCOLS"]


class MURS(_PureOracleMixin, HistogramProtocol):
    """MURS: multiple uniform random shufflers that each inject uniform fake reports.

    Users send one GRR report over [d] or one OLH report ``(seed, y)`` over [g] at eps_l.
    ``shufflers = r`` shufflers each add their share of ``n_fake`` uniformly random fake reports
    (GRR: ``y ~ U[d]``; OLH: a fresh seed and ``y ~ U[g]``, which supports any fixed value with
    probability exactly ``pi_f = 1/g``); the analyzer knows how many fakes were added and
    subtracts their expected contribution::

        c^_j = (C_j - n q* - n_fake pi_f) / (p* - q*)

    ``mode="chain"``: the shufflers process the whole batch one after another (onion routing in
    the paper); the analyzer receives one uniformly shuffled batch of ``n + n_fake`` reports.
    ``mode="parallel"``: each user sends her report to a uniformly random shuffler; each shuffler
    adds its fakes and forwards its own batch (``n_shufflers = r``).

    Privacy (all shufflers honest; the authors' code, and derived here from the BBGN19 Thm 3.1
    proof with independent Bernoulli blanket sources): the expected blanket per value is
    ``c = (n-1)/m + n_fake/g_eff`` (chain) or ``(n-1)/(r m) + min_j fakes_j/g_eff`` (parallel),
    with ``m = e^eps_l + g_eff - 1`` and ``g_eff = d`` (GRR) or g (OLH);
    eps = ``max(sqrt(14 ln(2/delta)/c), 27/c)`` (eps <= 1). eps_l is solved from the target.
    :meth:`privacy_collusion` is the guarantee left when the analyzer colludes with r-1 shufflers
    and n-1 users (only the honest shuffler's fakes remain; author code ``blanket_naive_fn_alone``).

    [R] ``n_fake`` is the **total** number of fakes (default 1% of n, the survey's setting) split
    evenly across shufflers; whether each shuffler adds n_fake or n_fake/r is not confirmed.

    ``oracle="auto"`` (default, as the author code) picks GRR or OLH, whichever has the smaller
    zero-count variance; OLH's g is chosen by minimising that variance. When the fakes alone
    already form the blanket (``n_fake/d >= max(14 ln(2/delta)/eps^2, 27/eps)``, e.g. n = 10^7,
    d = 100 with 1% fakes), users send their true value (``oracle_kind="none"``, no local DP).
    Source: Wang et al., PVLDB 13(13) 2020 (author code vvv214/LDP_Protocols ``murs/``).
    Error: exact ``Var = [c p(1-p) + (n-c) q*(1-q*) + n_fake pi_f(1-pi_f)] / (p-q*)^2``.
    """

    name = "murs"
    one_message_per_user = True

    def __init__(self, epsilon: float, delta: float, n: int, d: int, n_fake: int | None = None,
                 shufflers: int = 2, mode: str = "chain", oracle: str = "auto") -> None:
        super().__init__(epsilon, delta, n, d)
        if mode not in ("chain", "parallel"):
            raise ValidationError(f"mode must be 'chain' or 'parallel', got {mode!r}", parameter="mode")
        if oracle not in ("auto", "grr", "olh"):
            raise ValidationError(f"oracle must be 'auto', 'grr' or 'olh', got {oracle!r}", parameter="oracle")
        self.mode = mode
        self.shufflers = check_positive_int(shufflers, "shufflers")
        n_fake = math.ceil(0.01 * self.n) if n_fake is None else n_fake
        self.fake_total = check_positive_int(n_fake, "n_fake", minimum=0)
        r = self.shufflers
        self.fakes = np.full(r, self.fake_total // r, dtype=np.int64)
        self.fakes[: self.fake_total % r] += 1
        self.n_shufflers = r if mode == "parallel" else 1
        eps, delta, n = self.epsilon, self.delta, self.n
        if eps > 1.0:
            raise OutOfDomainError(f"murs uses BBGN19 Thm 3.1 and needs epsilon <= 1, got {eps!r}", parameter="epsilon")
        if n < 2:
            raise ValidationError("murs needs n >= 2 users", parameter="n")
        self._c_req = blanket_required(eps, delta) * _MARGIN

        grr = self._solve(self.d)  # (eps_l, var) or None
        olh = self._best_olh() if oracle in ("auto", "olh") else None
        if oracle in ("auto", "grr") and self._c_req - float(self._fake_blanket(self.d)) <= 0:
            # the fakes alone form the blanket: users may report their true value (no local noise)
            self.oracle_kind, self.g, self.eps_l = "none", self.d, math.inf
            self.oracle = None  # type: ignore[assignment]
            self.p_star, self.q_star = 1.0, 0.0
        elif oracle == "grr" or (oracle == "auto" and grr is not None and (olh is None or grr[1] <= olh[1])):
            if grr is None:
                raise self._impossible("GRR")
            self.oracle_kind, self.g = "grr", self.d
            self.eps_l = grr[0]
            self.oracle: GeneralizedRandomizedResponse | LocalHashing = GeneralizedRandomizedResponse(self.eps_l, self.d)
            self.p_star, self.q_star = self.oracle.p, self.oracle.q
        else:
            if olh is None:
                raise self._impossible("OLH")
            self.oracle_kind, self.g, self.eps_l = "olh", olh[2], olh[0]
            self.oracle = LocalHashing(self.eps_l, self.d, self.g)
            self.p_star, self.q_star = self.oracle.p_star, self.oracle.q_star
        self.fake_support = 1.0 / self.g

    # --- parameter choice ---------------------------------------------------------------
    def _fake_blanket(self, g: np.ndarray | float) -> np.ndarray | float:
        f = self.fake_total if self.mode == "chain" else int(self.fakes.min())
        return f / np.asarray(g, dtype=np.float64)

    def _user_share(self) -> float:
        return 1.0 if self.mode == "chain" else float(self.shufflers)

    def _m_for(self, g: np.ndarray | float) -> np.ndarray:
        """``m = e^eps_l + g - 1`` that makes the blanket exactly c_req (nan where impossible)."""
        need = self._c_req - self._fake_blanket(g)
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.where(need > 0, (self.n - 1) / (self._user_share() * need), np.nan)
        return np.asarray(m, dtype=np.float64)

    def _solve(self, g: int) -> tuple[float, float] | None:
        m = float(self._m_for(g))
        if not np.isfinite(m) or m - g + 1.0 <= 1.0:
            return None
        e = m - g + 1.0
        p, q, f = e / m, 1.0 / m, 1.0 / g
        var = (self.n * q * (1 - q) + self.fake_total * f * (1 - f)) / (p - q) ** 2
        return math.log(e), var

    def _best_olh(self) -> tuple[float, float, int] | None:
        m_max = float(self._m_for(1e18)) if self._c_req > 0 else np.nan
        if not np.isfinite(m_max) or m_max < 4:
            return None
        g = np.arange(2, int(min(m_max, 1 << 22)) + 1, dtype=np.float64)
        m = self._m_for(g)
        e = m - g + 1.0
        ok = np.isfinite(m) & (e > 1.0)
        if not ok.any():
            return None
        g, m, e = g[ok], m[ok], e[ok]
        p, q, f = e / m, 1.0 / g, 1.0 / g  # support probability of a non-holder ~ 1/g
        var = (self.n * q * (1 - q) + self.fake_total * f * (1 - f)) / (p - q) ** 2
        i = int(np.argmin(var))
        return float(math.log(e[i])), float(var[i]), int(g[i])

    def _impossible(self, kind: str) -> OutOfDomainError:
        fb = self._fake_blanket(self.d if kind == "GRR" else 2)
        if fb >= self._c_req:
            why = (f"the fakes alone already give a blanket of {float(fb):.4g} >= {self._c_req:.4g} per value; "
                   "use fewer fakes")
        else:
            why = f"n={self.n} users cannot supply the blanket of {self._c_req:.4g} per value with eps_l > 0"
        return OutOfDomainError(f"murs ({kind}) cannot reach epsilon={self.epsilon!r}, delta={self.delta!r}: {why}",
                                parameter="n")

    # --- client and shufflers -------------------------------------------------------------
    @property
    def local_randomizer(self) -> GeneralizedRandomizedResponse | LocalHashing | None:
        """The users' eps_l-LDP randomizer (``None`` when the fakes alone form the blanket)."""
        return self.oracle

    def _fake_batch(self, k: int, rng: np.random.Generator) -> Messages:
        if self.oracle_kind in ("grr", "none"):
            return {"y": rng.integers(0, self.d, size=k, dtype=np.int64)}
        assert isinstance(self.oracle, LocalHashing)
        return {"seed": rng.integers(0, self.oracle.n_seeds, size=k, dtype=np.int64).astype(np.uint64),
                "y": rng.integers(0, self.g, size=k, dtype=np.int64)}

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = self.check_values(values)
        msgs = {"y": x.copy()} if self.oracle is None else dict(self.oracle.randomize(x, rng))
        if self.mode == "parallel":
            msgs["shuffler"] = rng.integers(0, self.shufflers, size=n_messages(msgs), dtype=np.int64)
        return msgs

    def shuffler_messages(self, shuffler: int, rng: np.random.Generator) -> Messages:
        """Shuffler ``shuffler``'s uniform fakes (chain mode: every shuffler's fakes, in one batch)."""
        k = self.fake_total if self.mode == "chain" else int(self.fakes[shuffler])
        return self._fake_batch(k, rng) if k else {}

    # --- analyzer -----------------------------------------------------------------------
    def aggregate(self, messages: Messages) -> np.ndarray:
        if self.oracle_kind in ("grr", "none"):
            return np.bincount(self._column(messages, "y", self.d), minlength=self.d).astype(np.int64)
        assert isinstance(self.oracle, LocalHashing)
        return self.oracle.aggregate({"seed": self._column(messages, "seed", self.oracle.n_seeds),
                                      "y": self._column(messages, "y", self.g)})

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """Debiased counts; assumes the statistic includes all ``n_fake`` fakes."""
        est = self._debias(statistic, n)
        return self._estimate(est, self._var_counts(n, est), n)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: GRR in O(d) (keep w.p. 1-gamma, else uniform; fakes uniform); OLH by chunked
        client simulation plus the fakes' support counts."""
        c = self.check_counts(data)
        if self.oracle_kind in ("grr", "none"):
            kept = rng.binomial(c, self.p_star - self.q_star)
            rest = int(c.sum() - kept.sum()) + self.fake_total
            return kept + rng.multinomial(rest, np.full(self.d, 1.0 / self.d))
        assert isinstance(self.oracle, LocalHashing)
        out = self.oracle.simulate_statistic(c, rng)
        if self.fake_total:
            out = out + self.oracle.aggregate(self._fake_batch(self.fake_total, rng))
        return out

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Exact variance of one item's estimated count when ``value`` users hold it."""
        return float(self._var_counts(self._n_of(n), value))

    # --- privacy ------------------------------------------------------------------------
    def blanket(self, n: int | None = None) -> float:
        """Expected blanket reports per value seen by a target user (users' plus fakes)."""
        n = self._n_of(n)
        if self.oracle is None:
            return float(self._fake_blanket(self.g))
        m = math.exp(self.eps_l) + self.g - 1.0
        return (n - 1) / (self._user_share() * m) + float(self._fake_blanket(self.g))

    def _privacy(self, n: int) -> PrivacyStatement:
        eps = blanket_epsilon(self.blanket(n), self.delta)
        if eps > 1.0 or eps >= self.eps_l:
            return _local_statement(self.eps_l, f"the blanket bound exceeds 1 at n={n}")
        return PrivacyStatement(round_up(eps), self.delta, model="shuffle",
                                note=f"murs ({self.mode}, {self.oracle_kind}, r={self.shufflers}, "
                                     f"n_fake={self.fake_total}): blanket of users and fakes, eps_l={self.eps_l:.6g}")

    def privacy_collusion(self) -> PrivacyStatement:
        """Guarantee against the analyzer colluding with r-1 shufflers and n-1 users: the honest
        shuffler's fakes alone form the blanket (author code ``blanket_naive_fn_alone``); never
        worse than the users' eps_l-LDP."""
        f = int(self.fakes.min())
        eps = blanket_epsilon(f / self.g, self.delta) if f else math.inf
        if eps > 1.0 or eps >= self.eps_l:
            return _local_statement(self.eps_l, "colluding analyzer, r-1 shufflers and n-1 users")
        return PrivacyStatement(round_up(eps), self.delta, model="shuffle",
                                note=f"murs: {f} fakes of the honest shuffler against collusion")

    @property
    def messages_per_user(self) -> float:
        return 1.0

    @property
    def fake_messages(self) -> int:
        return self.fake_total

    @property
    def bits_per_message(self) -> float:
        if self.oracle_kind in ("grr", "none"):
            return bits_for(self.d)
        assert isinstance(self.oracle, LocalHashing)
        return bits_for(self.oracle.n_seeds) + bits_for(self.g)


PROTOCOLS: dict[str, type[Protocol]] = {"murs": MURS}
