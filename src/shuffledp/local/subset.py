"""Subset selection (Ye & Barg 2018; Wang, Wu, Hu 2016): report a random omega-subset of the domain."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from ._device import bincount_device, resolve_device
from .base import FrequencyOracle, Reports, check_n, smallest_variance
from .bits import UNIFORM_PRECISION, calibrate_probability
from .packed import random_words

__all__ = ["SubsetSelection"]

_CELLS = 1 << 24


class SubsetSelection(FrequencyOracle):
    """Subset selection (SS): each user reports a set ``S`` of ``omega`` distinct items with
    ``Pr[S | x] = e^eps / Z`` if ``x`` is in ``S`` and ``1 / Z`` otherwise,
    ``Z = e^eps C(d-1, omega-1) + C(d-1, omega)``.

    ``omega``: by default the subset size with the smallest variance (:meth:`best_omega`, about
    ``d / (e^eps + 1)``); ``omega=`` overrides it, :attr:`omega_chosen` says which happened. The client
    includes ``x`` with probability ``p* = omega e^eps / (omega e^eps + d - omega)`` and fills the
    rest of the set with uniformly random distinct other items.

    The sampled ``p*`` is the ideal value rounded **down** to the ``2^-53`` grid (``rng.random() <
    p*`` draws it exactly), lowered further until ``R = p*/(1-p*) (d-omega)/omega <= e^eps`` holds
    exactly: ``Pr[S | x] = p*/C(d-1, omega-1)`` if ``x`` is in ``S`` and ``(1-p*)/C(d-1, omega)``
    otherwise, so ``R`` is the worst-case ratio (``= e^eps`` for the ideal ``p*``).

    Privacy: exactly ``effective_epsilon``-LDP, ``effective_epsilon = ln R <= epsilon`` for the
    sampled ``p*`` (rounded up), the eps the privacy statement carries; ``q*``, the estimator,
    variance and :meth:`log_probabilities` use the sampled ``p*``.
    Source: M. Ye, A. Barg, "Optimal schemes for discrete distribution estimation under locally
    differential privacy", IEEE Trans. IT 2018; S. Wang et al., "Mutual information optimally local
    private discrete distribution estimation", 2016.
    Estimator: pure protocol with ``p*`` above and
    ``q* = (p* (omega-1) + (1-p*) omega) / (d-1)`` (``= omega ((omega-1) e^eps + d - omega) /
    ((d-1)(omega e^eps + d - omega))`` for the ideal ``p*``).
    Variance of one fraction: [q*(1-q*) + f(1-p*-q*)(p*-q*)] / (n (p*-q*)^2).
    Cost: O(n d) encode (a random bit mask over the domain, chunked), O(n omega) aggregate (a bincount),
    ``omega ceil(log2 d)`` bits per report. Encoding dominates.

    Reports: ``{"items": (n, omega) int array}``, each row strictly increasing (the canonical
    encoding of a set: any order would leak which slot the true item took).

    ``device`` (``'cpu'``: numpy, default; ``'torch-cpu'``, ``'cuda[:N]'``: PyTorch) is where
    :meth:`aggregate` counts the ``n omega`` reported items (int64 on every device: bit-identical
    counts; ``device_fallback``: an unavailable CUDA device counts on the CPU instead of raising).
    """

    name = "ss"
    accepts_device = True

    def __init__(self, epsilon: float, d: int, omega: int | None = None, device: str = "cpu",
                 device_fallback: bool = False) -> None:
        super().__init__(epsilon, d)
        self.device = resolve_device(device, bool(device_fallback))
        e = math.exp(self.epsilon) if self.epsilon < 700.0 else math.inf
        #: whether ``omega`` was chosen by the mechanism (``omega=None``) rather than given
        self.omega_chosen = omega is None
        if omega is None:
            omega = self.best_omega(self.epsilon, self.d)
        else:
            from ..core.validation import check_positive_int

            omega = check_positive_int(omega, "omega")
            if omega >= self.d:
                raise ValidationError(f"omega must be an integer in [1, {self.d - 1}], got {omega}",
                                      parameter="omega")
        self.omega = omega
        self.e = e
        d, w = self.d, omega
        p_ideal = w * e / (w * e + d - w) if e < math.inf else 1.0
        p, self.effective_epsilon = calibrate_probability(p_ideal, self.epsilon,
                                                          lambda t: t * (d - w) / ((1 - t) * w), "down")
        #: exact probability that the true item is in the set (a double on the 2^-53 grid)
        self.p_star_exact = p
        self.p_star = float(p)
        self.q_star = float((p * (w - 1) + (1 - p) * w) / (d - 1))
        # log Pr[S | x] for S containing x, and for S not containing x
        self._log_in = math.log(self.p_star) - _log_binom(d - 1, w - 1)
        self._log_out = math.log(float(1 - p)) - _log_binom(d - 1, w)
        self.item_dtype = np.int16 if d <= np.iinfo(np.int16).max + 1 else np.int32

    def _privacy(self) -> PrivacyStatement:
        """Each report is ``effective_epsilon``-LDP (replace-one), ``effective_epsilon <= epsilon``."""
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"SubsetSelection: p*={self.p_star!r} on the grid 2^-{UNIFORM_PRECISION}; "
                                     f"exact eps of the sampled p* <= requested {self.epsilon:g}")

    # --- client -----------------------------------------------------------------------
    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        x = self.check_values(values)
        n, d, w = x.shape[0], self.d, self.omega
        out = np.empty((n, w), dtype=self.item_dtype)
        step = max(1, _CELLS // d)  # 2^14 users at d = 1024 (cache friendly)
        for lo in range(0, n, step):  # chunks of users keep the n x d keys bounded
            out[lo:lo + step] = self._sample_chunk(x[lo:lo + step], rng)
        return {"items": out}

    def _sample_chunk(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exactly uniform subsets of the d-1 other items, then the true item added or not.

        Start from iid Bernoulli(t/256) bits (t/256 ~ omega/(d-1), from raw random bytes), then
        remove uniformly random members (or add uniformly random non-members, by rejection
        with exact integer draws) one at a time until each row has exactly ``k`` of the other
        items (``k = omega - 1`` when the true item is included, ``omega`` otherwise). Every
        step commutes with relabelling the other items, so the result is exactly uniform over
        the k-subsets. Rows come out sorted from the mask (canonical set encoding).
        """
        c, d, w = x.shape[0], self.d, self.omega
        m = d - 1
        include = rng.random(c) < self.p_star  # exact Bernoulli(p*): p* is on the 2^-53 grid
        k = w - include.astype(np.int64)
        thr = min(255, max(0, int(round(256 * w / m))))
        raw = random_words(rng)((c * d + 7) // 8).view(np.uint8)[: c * d]  # 64-bit words for any bit generator
        mask = (raw < thr).reshape(c, d)
        rows = np.arange(c)
        mask[rows, x] = False
        excess = np.count_nonzero(mask, axis=1) - k
        flat = mask.reshape(-1)
        for sign in (1, -1):  # 1: drop surplus members; -1: add missing ones
            todo = np.flatnonzero(excess * sign > 0)
            while todo.size:  # ~ (max |excess|) / acceptance rounds, on shrinking row sets
                t = rng.integers(0, m, size=todo.size)
                pos = todo * d + t + (t >= x[todo])
                hit = flat[pos] if sign > 0 else ~flat[pos]
                flat[pos[hit]] = sign < 0
                excess[todo[hit]] -= sign
                todo = todo[excess[todo] * sign > 0]
        mask[rows, x] = include
        cols = np.flatnonzero(mask).reshape(c, w) - (rows * d)[:, None]
        return cols.astype(self.item_dtype)

    def validate_reports(self, reports: Reports) -> Reports:
        if not isinstance(reports, dict) or set(reports) != {"items"}:
            raise ValidationError("subset selection reports must have exactly the field 'items'",
                                  parameter="reports")
        it = np.asarray(reports["items"])
        if it.ndim != 2 or it.shape[1] != self.omega:
            raise ValidationError(f"items must have shape (n, {self.omega}), got {it.shape}", parameter="items")
        if it.dtype == np.bool_ or not np.issubdtype(it.dtype, np.integer):
            raise ValidationError(f"items must be integers in [0, {self.d}), got dtype {it.dtype}",
                                  parameter="items")
        if it.size:
            if it.min() < 0 or it.max() >= self.d:
                raise ValidationError(f"items must be integers in [0, {self.d})", parameter="items")
            if self.omega > 1 and np.any(np.diff(it.astype(np.int64), axis=1) <= 0):
                raise ValidationError("each row of items must be strictly increasing (a set in canonical order)",
                                      parameter="items")
        return {"items": it.astype(self.item_dtype)}

    # --- analyzer ---------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """How many reported sets contain each item (mergeable)."""
        items = np.asarray(reports["items"])
        if self.device != "cpu":
            return bincount_device(items, self.d, self.device)
        out = np.zeros(self.d, dtype=np.int64)
        step = max(1, (1 << 20) // max(1, self.omega))
        for lo in range(0, items.shape[0], step):  # chunks of users; bincount is slow on int16
            out += np.bincount(items[lo:lo + step].ravel().astype(np.intp), minlength=self.d)
        return out

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = np.asarray(statistic)
        if stat.shape != (self.d,):
            raise ValidationError(f"statistic must have shape ({self.d},), got {stat.shape}", parameter="statistic")
        return self._pure_estimate(stat, n, self.p_star, self.q_star)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        return self._pure_variance(check_n(n), value, self.p_star, self.q_star)

    # --- privacy ----------------------------------------------------------------------
    def log_probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact log Pr[S | x]: ``log p* - log C(d-1, omega-1)`` if ``x`` is in ``S``, else
        ``log(1-p*) - log C(d-1, omega)`` (no underflow for large d)."""
        from ..core.validation import check_int_values

        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        inside = (np.asarray(reports["items"]) == xv).any(axis=1)
        return np.where(inside, self._log_in, self._log_out)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact Pr[S | x] (underflows to 0 once C(d-1, omega) > 1e308; use log_probabilities)."""
        return np.exp(self.log_probabilities(reports, x))

    def _recorded_users(self, statistic: np.ndarray) -> float:
        """Every report names ``omega`` distinct items: the counts sum to ``n omega``."""
        return float(np.sum(statistic)) / self.omega

    def simulate_statistic(self, true_counts: Any, rng: np.random.Generator) -> np.ndarray:
        """Exact sample of the aggregate by chunked randomize + aggregate: O(n d), not n-independent.

        (No closed form for the joint law of the subset counts is used.)
        """
        c = self.check_counts(true_counts)
        n = int(c.sum())
        out = np.zeros(self.d, dtype=np.int64)
        bounds = np.concatenate([[0], np.cumsum(c)])
        step = 1 << 18
        for lo in range(0, n, step):  # chunks of users
            vals = np.searchsorted(bounds, np.arange(lo, min(n, lo + step)), side="right") - 1
            out += self.aggregate(self.randomize(vals, rng))
        return out

    @staticmethod
    def best_omega(epsilon: float, d: int) -> int:
        """The subset size with the smallest :meth:`uniform_variance` for this ``(epsilon, d)``.

        Ye and Barg's ``omega ~ d / (e^eps + 1)`` is the optimum of the leading term; the search
        ranks every ``omega`` in ``[1, d - 1]`` by the ideal scheme's variance at the uniform
        distribution and compares the best three as built (:func:`~.base.smallest_variance`): at
        ``eps = 2, d = 16`` it is ``omega = 2`` (``rint(16 / (e^2 + 1)) = 2``), at ``eps = 0.5,
        d = 16`` it is 6 (7 would have 1.6 % more variance).
        """
        e = math.exp(epsilon) if epsilon < 700.0 else math.inf
        w = np.arange(1, d, dtype=np.float64)
        if e == math.inf:
            return 1
        p = w * e / (w * e + d - w)
        q = (p * (w - 1) + (1 - p) * w) / (d - 1)
        f = 1.0 / d
        v = (q * (1 - q) + f * (1 - p - q) * (p - q)) / (p - q) ** 2
        return int(smallest_variance(np.arange(1, d), v, lambda k: SubsetSelection(epsilon, d, omega=k)))

    def __repr__(self) -> str:
        dev = "" if self.device == "cpu" else f", device={self.device!r}"
        return f"SubsetSelection(epsilon={self.epsilon:g}, d={self.d}, omega={self.omega}{dev})"


def _log_binom(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
