"""Hadamard response (Acharya, Sun, Zhang, AISTATS 2019) and a vectorized fast Walsh–Hadamard transform."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from ..core.validation import check_int_values
from ._device import bincount_device, fwht_device, resolve_device
from .base import FrequencyOracle, Reports, check_n
from .bits import UNIFORM_PRECISION, calibrate_probability

__all__ = ["HadamardResponse", "fwht", "simulate_statistic_direct"]

_VARIANTS = ("general", "high_privacy")


def fwht(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """Fast Walsh–Hadamard transform along ``axis`` (length a power of 2), unnormalised.

    Returns ``a @ H`` along that axis with Sylvester's ``H[i, j] = (-1)^popcount(i & j)``
    (symmetric, so also ``H @ a``). O(K log K) per transform; all other axes are batched.
    Integer input stays integer (exact).
    """
    x = np.moveaxis(np.array(a, copy=True), axis, -1)
    K = x.shape[-1]
    if K < 1 or K & (K - 1):
        raise ValidationError(f"fwht needs a power-of-2 length, got {K}", parameter="a")
    lead = x.shape[:-1]
    h = 1
    while h < K:  # log2 K butterfly stages, each vectorized over the whole array
        v = x.reshape(*lead, K // (2 * h), 2, h)
        top = v[..., 0, :] + v[..., 1, :]
        bot = v[..., 0, :] - v[..., 1, :]
        v[..., 0, :] = top
        v[..., 1, :] = bot
        h *= 2
    return np.moveaxis(x, -1, axis)


class HadamardResponse(FrequencyOracle):
    """Hadamard response (HR), the blocked scheme of Acharya, Sun and Zhang.

    The output space ``[K]``, ``K = B b``, is split into ``B`` blocks of ``b`` outputs (powers of 2).
    Item ``x`` lives in block ``beta(x) = x // (b-1)`` at Hadamard row ``s(x) = x mod (b-1) + 1``
    and owns the half-block ``C_x = {beta b + y : popcount(s & y) even}`` (``|C_x| = b/2``). The
    report is ``Y`` with ``Pr[Y = y | x] = e^eps c`` for ``y`` in ``C_x`` and ``c`` otherwise,
    ``c = 2 / (b (2B - 1 + e^eps))``.

    - ``variant="general"``: ``B = 2^floor(log2 min(2d, e^eps))``,
      ``b = 2^ceil(log2(d/B + 1))`` (authors' ``Hadamard_Rand_general_original``). For
      ``e^eps < 2`` this is ``B = 1``, the high-privacy scheme.
    - ``variant="high_privacy"``: ``B = 1``, ``K = 2^ceil(log2(d+1))`` for every eps
      (authors' ``Hadamard_Rand_high_priv``).
    - ``variant=None`` (default): the one of the two with the smaller
      :meth:`~shuffledp.local.base.FrequencyOracle.uniform_variance` (the mean variance of the
      items' estimates when the true distribution is uniform) at this ``(epsilon, d)``;
      :attr:`variant_used` says which (``"general"`` on a tie). Several blocks help only when the
      mass spreads over the blocks: items ``x`` fill the blocks in order, ``b - 1`` per block, so
      at ``eps = 1, d = 1024`` the general scheme (``B = 2``, block 0 holding 1023 items) has
      1.54x the uniform variance of the single block, while at ``eps = 4`` (``B = 32``) it has
      0.2x.

    Sampling: with probability ``u = 2B / A`` the report is uniform on ``[K]``, else uniform on
    ``C_x``; this gives exactly the two probabilities above. The sampled ``u`` is ``2B / A`` rounded
    **up** to the ``2^-53`` grid (``rng.random() < u`` draws it exactly), raised further until
    ``1 + 2B (1-u)/u <= e^eps`` holds exactly. The mechanism is then the scheme above with ``e^eps``
    replaced by ``e_eff = 1 + 2B (1-u)/u`` (``A = 2B/u``, ``c = u/K``), and ``e_eff`` is used
    everywhere (:attr:`e`, estimator, variance, :meth:`probabilities`).

    Privacy: exactly ``effective_epsilon``-LDP, ``effective_epsilon = ln e_eff <= epsilon``
    (rounded up; max/min of Pr[y | x] over x is e_eff).
    Source: J. Acharya, Z. Sun, H. Zhang, "Hadamard response: estimating distributions privately,
    efficiently, and with little communication", AISTATS 2019.
    Estimator: ``p_x = A (2 F_S - F_blk) / (e^eps - 1)`` with ``A = 2B - 1 + e^eps``, ``F_S`` the
    fraction of reports in ``C_x`` and ``F_blk`` in ``x``'s block, all ``x`` at once by one FWHT
    per block of the report histogram.
    Variance of the count: ``n A (2 + (e^eps - 1) P_beta) / (e^eps - 1)^2 - n_x`` (``P_beta`` the
    true mass of ``x``'s block), derived from the two probabilities above.
    Cost: O(n) encode, O(n) aggregate (a bincount over K ~ 2d outputs), O(K log b) estimate and
    exact simulation of the histogram (:meth:`simulate_statistic`);
    ``ceil(log2 K)`` bits per report. The bincount dominates.

    ``device`` (``'cpu'``: numpy, default; ``'torch-cpu'``, ``'cuda[:N]'``: PyTorch) is where the
    output histogram and the estimate's Walsh-Hadamard transform are computed: int64 on every
    device, so statistics and estimates are bit-identical (``device_fallback``: an unavailable
    CUDA device counts on the CPU instead of raising). :meth:`simulate_statistic` draws with
    numpy's generator and does not use it.
    """

    name = "hr"
    accepts_device = True

    def __init__(self, epsilon: float, d: int, variant: str | None = None, device: str = "cpu",
                 device_fallback: bool = False) -> None:
        super().__init__(epsilon, d)
        self.device = resolve_device(device, bool(device_fallback))
        if variant is not None and variant not in _VARIANTS:
            raise ValidationError(f"variant must be None (the smaller variance) or one of {_VARIANTS}, "
                                  f"got {variant!r}", parameter="variant")
        #: the variant asked for (``None``: the one with the smaller uniform variance)
        self.variant = variant
        if variant is None:
            merit = {}
            for v in ("high_privacy", "general"):
                self._setup(v)
                merit[v] = self.uniform_variance()
            variant = "general" if merit["general"] <= merit["high_privacy"] else "high_privacy"
        self._setup(variant)

    def _setup(self, variant: str) -> None:
        """Blocks, block size and the calibrated sampling probability of ``variant``."""
        #: the variant in use (``"general"`` or ``"high_privacy"``)
        self.variant_used = variant
        e = math.exp(self.epsilon) if self.epsilon < 700.0 else math.inf
        if variant == "high_privacy":
            B = 1
        else:
            # e^eps computed in floating point can land one ulp below a power of 2 (exp(ln 8) =
            # 7.999...): a relative slack of 1e-12 keeps B = 8 there. B only shapes the code;
            # privacy holds for every B because u is calibrated for the chosen B.
            lim = min(2 * self.d, e * (1 + 1e-12))
            B = 1
            while 2 * B <= lim:  # largest power of 2 <= min(2d, e^eps)
                B *= 2
        b = 2
        while b < self.d / B + 1:  # b = 2^ceil(log2(d / B + 1))
            b *= 2
        self.blocks, self.block_size = B, b
        self.K = B * b
        u_ideal = 2 * B / (2 * B - 1 + e) if e < math.inf else 0.0
        u, self.effective_epsilon = calibrate_probability(u_ideal, self.epsilon, lambda t: 1 + 2 * B * (1 - t) / t, "up")
        #: exact probability of a uniform report (a double on the 2^-53 grid)
        self.u_exact = u
        self.u = float(u)
        e_eff = 1 + 2 * B * (1 - u) / u
        #: the realized ratio e_eff = e^(ln-ratio) of the sampled scheme (<= e^epsilon)
        self.e = float(e_eff)
        self.A = float(2 * B / u)  # = 2B - 1 + e_eff
        self.c = float(u / self.K)  # Pr[Y = y | x] for y outside C_x
        self.p_in = float(e_eff * u / self.K)  # Pr[Y = y | x] for y in C_x
        items = np.arange(self.d, dtype=np.int64)
        self._block = items // (b - 1)
        self._row = items % (b - 1) + 1

    def _privacy(self) -> PrivacyStatement:
        """Each report is ``effective_epsilon``-LDP (replace-one), ``effective_epsilon <= epsilon``."""
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"HadamardResponse: uniform-report probability u={self.u!r} on the grid "
                                     f"2^-{UNIFORM_PRECISION}; exact eps of the sampled u <= requested {self.epsilon:g}")

    # --- client -----------------------------------------------------------------------
    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        x = self.check_values(values)
        n = x.shape[0]
        b = self.block_size
        uniform = rng.random(n) < self.u  # exact Bernoulli(u): u is on the 2^-53 grid
        u = rng.integers(0, self.K, size=n, dtype=np.int64)  # the uniform output; u mod b is uniform on [b]
        s = self._row[x]
        y0 = u & (b - 1)
        odd = (np.bitwise_count(s & y0) & 1).astype(bool)
        y0 ^= np.where(odd, s & -s, 0)  # flip the lowest set bit of s: complement of C_x -> C_x
        y = np.where(uniform, u, self._block[x] * b + y0)
        return {"y": y}

    def validate_reports(self, reports: Reports) -> Reports:
        if not isinstance(reports, dict) or set(reports) != {"y"}:
            raise ValidationError("Hadamard response reports must have exactly the field 'y'", parameter="reports")
        return {"y": check_int_values(reports["y"], self.K, "y")}

    # --- analyzer ---------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """Histogram of the K outputs (mergeable)."""
        if self.device != "cpu":
            return bincount_device(reports["y"], self.K, self.device)
        return np.bincount(np.asarray(reports["y"]), minlength=self.K).astype(np.int64)

    def _statistic_shape(self) -> tuple[int, ...]:
        return (self.K,)

    def _recorded_users(self, statistic: np.ndarray) -> float:
        """Every report adds 1 to one output's count: the counts sum to n."""
        return float(np.sum(statistic))

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = self._check_statistic(statistic)
        blocks = stat.reshape(self.blocks, self.block_size).astype(np.int64)
        W = fwht(blocks, axis=1) if self.device == "cpu" else fwht_device(blocks, self.device)
        # W[beta, s] = N(C) - N(block \ C) = 2 N_S - N_blk for row s of block beta.
        f = self.A * W[self._block, self._row] / (n * (self.e - 1))
        fc = np.clip(f, 0.0, 1.0)
        block_mass = np.bincount(self._block, weights=fc, minlength=self.blocks)[self._block]
        var = self._count_variance(1.0, fc, np.minimum(block_mass, 1.0)) / n
        return Estimate(f, np.sqrt(np.maximum(var, 0.0)), n, self.privacy(), "frequency",
                        extra={"blocks": self.blocks, "block_size": self.block_size})

    def _count_variance(self, n: float, f: Any, block_mass: Any) -> Any:
        """Var[count estimate] = n A (2 + (e-1) P_beta)/(e-1)^2 - n_x."""
        em1 = self.e - 1
        return n * self.A * (2 + em1 * np.asarray(block_mass)) / em1**2 - n * np.asarray(f)

    def variance(self, n: int | None = None, value: float = 0.0, block_mass: float | None = None) -> float:
        """Exact variance of one fraction estimate.

        ``block_mass`` is the true total fraction of the item's block; default ``value`` for the
        general scheme (the item is alone in its block) and 1 when ``B = 1`` (one block).
        """
        n = check_n(n)
        if block_mass is None:
            block_mass = 1.0 if self.blocks == 1 else value
        return float(self._count_variance(n, value, block_mass)) / n**2

    def uniform_variance(self) -> float:
        """Mean over the items of the variance of one fraction estimate from one user when the
        true distribution is uniform (block masses = each block's share of the ``d`` items)."""
        return float(np.mean(self.variances(1, np.full(self.d, 1.0 / self.d))))

    def variances(self, n: int, freqs: Any) -> np.ndarray:
        """Exact variance of every item's fraction estimate for the true distribution ``freqs``."""
        fr = np.asarray(freqs, dtype=np.float64)
        if fr.shape != (self.d,):
            raise ValidationError(f"freqs must have shape ({self.d},), got {fr.shape}", parameter="freqs")
        mass = np.bincount(self._block, weights=fr, minlength=self.blocks)[self._block]
        return self._count_variance(n, fr, mass) / n**2

    # --- privacy ----------------------------------------------------------------------
    def in_support(self, y: np.ndarray, x: int) -> np.ndarray:
        """Whether output ``y`` lies in ``C_x``."""
        y = np.asarray(y, dtype=np.int64)
        b = self.block_size
        s = self._row[x]
        return (y // b == self._block[x]) & ((np.bitwise_count((y % b) & s) & 1) == 0)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact Pr[Y = y | x]: ``e_eff c`` on ``C_x``, ``c`` elsewhere (sampled ``u``)."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        return np.where(self.in_support(reports["y"], xv), self.p_in, self.c)

    def simulate_statistic(self, true_counts: Any, rng: np.random.Generator) -> np.ndarray:
        """Exact sample of the output histogram in O(K log b) binomial draws, independent of n and d.

        Each user of item ``x`` reports uniformly on ``[K]`` with probability ``u``
        (``Binomial(n_x, u)`` of them; together ``Multinomial`` over the ``B`` blocks), and otherwise
        uniformly on ``C_x = {y in block beta(x) : popcount(s(x) & y) even}``. A report uniform on
        ``C_x`` is drawn bit by bit from the top: the state of a group of users is the part ``s'``
        of the row below the bits already fixed and the parity ``p`` the remaining bits must have.
        For the next bit ``t`` with ``s'``'s top bit ``0``, or ``1`` and the rest ``r != 0``, both
        values of ``t`` leave exactly half of the admissible suffixes, so ``t`` is a fair coin and the
        group splits ``Binomial(N, 1/2)``, the state becoming ``(r, p)`` or (top bit 1, ``t = 1``)
        ``(r, p xor 1)``. If ``s'`` is its top bit alone, ``t = p`` surely and the state becomes
        ``(0, 0)``, uniform on what remains. The state ``(0, 1)`` is never reached. Users sharing a
        state at a node are i.i.d., so the binomial splits give the exact law of the histogram. At
        depth ``k`` a block holds ``2^k`` nodes of ``2 b / 2^k`` states: ``2 K`` counts per level,
        ``log2 b`` levels; only non-zero counts are drawn. The direct method (a multinomial per
        item, O(d K)) is :func:`simulate_statistic_direct`, the test oracle.
        """
        c = self.check_counts(true_counts)
        B, b = self.blocks, self.block_size
        uniform = rng.binomial(c, self.u_exact)  # users reporting uniformly on [K], per item
        # counts of the states (block, node, p, s'); the root holds s' = s(x) and the uniform users at (0, 0)
        cnt = np.zeros((B, 1, 2, b), dtype=np.int64)
        cnt[self._block, 0, 0, self._row] = c - uniform  # rows are distinct within a block
        cnt[:, 0, 0, 0] = rng.multinomial(int(uniform.sum()), np.full(B, 1.0 / B))
        width = b
        while width > 1:
            half = width // 2
            nodes = cnt.shape[1]
            new = np.zeros((B, nodes, 2, 2, half), dtype=np.int64)  # (block, node, next bit, p, s')
            top0, rest1 = cnt[..., :half], cnt[..., half + 1:]  # s' top bit 0; top bit 1 with r != 0
            left0, left1 = _fair_split(top0, rng), _fair_split(rest1, rng)
            new[:, :, 0] = left0
            new[:, :, 1] = top0 - left0
            new[:, :, 0, :, 1:] += left1
            new[:, :, 1, :, 1:] += (rest1 - left1)[:, :, ::-1]  # the bit is 1: the parity flips
            new[:, :, 0, 0, 0] += cnt[:, :, 0, half]  # s' = top bit alone: the bit is p
            new[:, :, 1, 0, 0] += cnt[:, :, 1, half]
            cnt = new.reshape(B, 2 * nodes, 2, half)
            width = half
        return cnt[:, :, 0, 0].reshape(self.K)

    def __repr__(self) -> str:
        dev = "" if self.device == "cpu" else f", device={self.device!r}"
        return (f"HadamardResponse(epsilon={self.epsilon:g}, d={self.d}, variant_used={self.variant_used!r}, "
                f"B={self.blocks}, b={self.block_size}{dev})")


def _fair_split(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``Binomial(N, 1/2)`` for every count ``N`` (drawn for the non-zero counts only)."""
    out = np.zeros(counts.shape, dtype=np.int64)
    nz = np.flatnonzero(counts)
    if nz.size:
        out.flat[nz] = rng.binomial(counts.flat[nz], 0.5)
    return out


def simulate_statistic_direct(oracle: HadamardResponse, true_counts: Any, rng: np.random.Generator) -> np.ndarray:
    """The histogram of :meth:`HadamardResponse.simulate_statistic` by one multinomial per item
    (``Pr[y | x]`` over all ``K`` outputs; O(d K)): the test oracle of the bitwise sampler."""
    c = oracle.check_counts(true_counts)
    out = np.zeros(oracle.K, dtype=np.int64)
    ys = np.arange(oracle.K, dtype=np.int64)
    b = oracle.block_size
    rows_per = max(1, (1 << 22) // oracle.K)
    for lo in range(0, oracle.d, rows_per):  # blocks of source items
        xs = np.arange(lo, min(oracle.d, lo + rows_per))
        inside = (ys[None, :] // b == oracle._block[xs, None]) & \
                 ((np.bitwise_count((ys[None, :] % b) & oracle._row[xs, None]) & 1) == 0)
        probs = np.where(inside, oracle.p_in, oracle.c)
        probs /= probs.sum(axis=1, keepdims=True)  # exact up to rounding; rows sum to 1
        out += rng.multinomial(c[xs], probs).sum(axis=0)
    return out
