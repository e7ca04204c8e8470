"""Private selection: the exponential mechanism as permute-and-flip with exact coins."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement
from ..core.validation import check_epsilon, check_positive_int
from . import exact
from .base import refuse_seed
from .calibration import check_sensitivity

__all__ = ["PermuteAndFlip", "ExponentialMechanism"]


def _check_utilities(utilities: Any) -> np.ndarray:
    u = np.asarray(utilities)
    if u.ndim != 1 or u.size < 1:
        raise ValidationError(f"utilities must be a non-empty 1-D array, got shape {u.shape}", parameter="utilities")
    if u.dtype == np.bool_ or not (np.issubdtype(u.dtype, np.floating) or np.issubdtype(u.dtype, np.integer)):
        raise ValidationError(f"utilities must be real numbers, got dtype {u.dtype}", parameter="utilities")
    u = u.astype(np.float64)
    if not np.all(np.isfinite(u)):
        raise ValidationError("utilities must be finite, found NaN or inf", parameter="utilities")
    return u


class PermuteAndFlip:
    """The exponential mechanism in its permute-and-flip form (McKenna & Sheldon, NeurIPS 2020).

    Visit the candidates in a uniformly random order; at candidate r flip a coin with
    P(heads) = exp(-eps (u* - u_r) / (2 Delta)) (u* the best utility) and return the first
    candidate whose coin lands heads (the best candidate's coin always does).

    Privacy: pure eps-DP for utilities with sensitivity Delta (``monotonic=True``: when every
    utility moves in the same direction between neighbours, the factor 2 is dropped,
    McKenna–Sheldon Thm 1). It is never worse than the exponential mechanism with weights
    exp(eps u/(2 Delta)) in expected utility, and equals report-noisy-max with exponential noise.
    Exactness: the coin is an exact Bernoulli(exp(-x)) with x the exact rational value of
    eps (u* - u_r)/(2 Delta) computed from the float inputs (CKS20 Alg. 1), and the order is a
    Fisher–Yates permutation from :mod:`secrets` — no float ``exp``/softmax on the release path.
    Cost: O(d) to find u*, then O(1) expected coins per visited candidate; worst case O(d)
    candidates visited (Python loop), so meant for selection among up to ~1e5 candidates.
    """

    name = "permute_and_flip"

    def __init__(self, epsilon: float, sensitivity: float = 1.0, *, monotonic: bool = False,
                 neighbouring: str = "replace_one") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_sensitivity(sensitivity)
        if not isinstance(monotonic, bool):
            raise ValidationError(f"monotonic must be a bool, got {monotonic!r}", parameter="monotonic")
        self.monotonic = monotonic
        if neighbouring not in ("replace_one", "add_remove_one"):
            raise ValidationError(f"neighbouring must be 'replace_one' or 'add_remove_one', got {neighbouring!r}",
                                  parameter="neighbouring")
        self.neighbouring = neighbouring
        factor = 1 if monotonic else 2
        #: exact rational eps / (factor * Delta)
        self._rate = Fraction(self.epsilon) / (factor * Fraction(self.sensitivity))
        self.rate = float(self._rate)

    def privacy(self, n: int | None = None) -> PrivacyStatement:
        """The guarantee of one selection (model ``"central"``); ``n``, the number of users, is
        only validated (an integer >= 1): the guarantee depends on the utilities' sensitivity."""
        if n is not None:
            check_positive_int(n, "n")
        return PrivacyStatement(self.epsilon, 0.0, "central", self.neighbouring,  # type: ignore[arg-type]
                                note=f"PermuteAndFlip(sensitivity={self.sensitivity:g}, monotonic={self.monotonic})")

    def flip_probabilities(self, utilities: Any) -> np.ndarray:
        """p_r = exp(-rate (u* - u_r)) for each candidate."""
        u = _check_utilities(utilities)
        return np.exp(-self.rate * (u.max() - u))

    def probabilities(self, utilities: Any) -> np.ndarray:
        """Exact output distribution P(return r) (to float precision).

        Giving each candidate an independent uniform arrival time T makes the visiting order a
        uniform permutation, and given T_r = t each other candidate comes first independently
        with probability t, so P(r) = p_r int_0^1 prod_{j != r} (1 - t p_j) dt. The integrand
        is a polynomial of degree d - 1, integrated exactly by Gauss–Legendre with
        ceil(d/2) + 1 nodes. Cost O(d^2).
        """
        p = self.flip_probabilities(utilities)
        d = p.size
        nodes, weights = np.polynomial.legendre.leggauss(d // 2 + 1)
        t = 0.5 * (nodes + 1.0)
        w = 0.5 * weights
        with np.errstate(divide="ignore"):
            logs = np.log1p(-np.outer(t, p))  # K x d
        total = logs.sum(axis=1, keepdims=True)
        # product over j != r: handle candidates with p = 1 (log1p(-t) at t=1 is -inf) robustly
        others = np.exp(total - logs) if np.all(np.isfinite(logs)) else self._products_without(t, p)
        return p * (w[:, None] * others).sum(axis=0)

    @staticmethod
    def _products_without(t: np.ndarray, p: np.ndarray) -> np.ndarray:
        f = 1.0 - np.outer(t, p)
        d = p.size
        prefix = np.ones((t.size, d + 1))
        suffix = np.ones((t.size, d + 1))
        for j in range(d):  # O(d) vector operations over the K nodes (probabilities only)
            prefix[:, j + 1] = prefix[:, j] * f[:, j]
            suffix[:, d - j - 1] = suffix[:, d - j] * f[:, d - j - 1]
        return prefix[:, :d] * suffix[:, 1:]

    def expected_utility(self, utilities: Any) -> float:
        """E[u_R] of the released index."""
        u = _check_utilities(utilities)
        return float((self.probabilities(u) * u).sum())

    def release(self, utilities: Any, *, rng: object = None, seed: object = None) -> int:
        """Index of the selected candidate (exact coins and permutation from the OS)."""
        refuse_seed(rng, seed)
        u = _check_utilities(utilities)
        src = exact.system_source()
        best = Fraction(float(u.max()))
        order = list(range(u.size))
        for i in range(u.size):  # lazy Fisher–Yates: visit a uniformly random unvisited candidate
            j = i + src.randbelow(u.size - i)
            order[i], order[j] = order[j], order[i]
            r = order[i]
            gap = best - Fraction(float(u[r]))
            if gap == 0 or exact.bernoulli_exp(self._rate * gap, src):
                return r
        raise AssertionError("unreachable: the best candidate always flips heads")  # pragma: no cover

    def simulate(self, utilities: Any, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` independent selections, vectorized (float coins; simulation only).

        Uses the arrival-time view: candidate r arrives at T_r ~ U(0, 1) and flips heads with
        probability p_r; the earliest heads wins. Cost O(size * d), chunked.
        """
        if not isinstance(rng, np.random.Generator):
            raise ValidationError("simulate() needs an explicit numpy Generator", parameter="rng")
        p = self.flip_probabilities(utilities)
        d = p.size
        out = np.empty(int(size), dtype=np.int64)
        chunk = max(1, (1 << 22) // d)
        for s in range(0, out.size, chunk):
            m = min(chunk, out.size - s)
            heads = rng.random((m, d)) < p
            times = np.where(heads, rng.random((m, d)), np.inf)
            out[s:s + m] = times.argmin(axis=1)
        return out

    def __repr__(self) -> str:
        return f"PermuteAndFlip(epsilon={self.epsilon:g}, sensitivity={self.sensitivity:g})"


#: The exponential mechanism, released as permute-and-flip (same guarantee, never worse utility).
ExponentialMechanism = PermuteAndFlip
