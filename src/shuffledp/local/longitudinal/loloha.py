"""LOLOHA: longitudinal local hashing (Arcolezi, Pinzon, Palamidessi, Gambs, EDBT 2023).

Client, one user:

* setup (once, data independent): a hash ``H_s : [d] -> [g]`` from the affine family of
  :mod:`shuffledp.local.hashing` (``H_s(x) = ((a x + b) mod P) mod g``; the seed ``s`` is public);
* round with value ``v``: ``h = H_s(v)``; the permanent answer of ``h`` (memoized per hashed value,
  so at most ``g`` of them per user) is ``B = GRR_g(h)`` with ``p1 = e^{eps_perm} / (e^{eps_perm} + g - 1)``;
  the report is ``(s, y)`` with ``y = GRR_g(B)`` at ``eps_irr`` (as L-GRR on ``[g]``).

Guarantees
----------
* ``eps_perm`` for unboundedly many reports while ``H_s(v)`` stays the same (``p1 / q1 = e^{eps_perm}``);
* ``eps_1`` for one report: the chained GRR on ``[g]`` (``sigma1``, ``sigma0`` as in L-GRR with
  ``k = g``), exact loss ``ln(sigma1 / sigma0)`` (``= eps_1`` for ``g = 2``, below it for ``g > 2``);
* ``r >= 2`` reports with one hashed value: ``min(eps_perm, r ln(p2/q2))`` (a mixture over the
  permanent answer of product laws; not ``r eps_1``);
* **whatever the values and however often they change, at most** ``min(s, g) eps_perm`` where
  ``s`` is the number of distinct hashed values the user reported (the paper's longitudinal
  budget ``g eps_perm``, against ``d eps_perm`` for the per-value protocols).

Estimator: ``C(v) = #{u : H_{s_u}(v) = y_u}``. A user holding ``v`` supports it w.p. ``sigma1``;
any other user w.p. ``q* = coll sigma1 + (1 - coll) sigma0`` where ``coll`` is the family's exact
collision probability (``~ 1/g``; the paper's ``q1 = 1/g`` is the ideal-hash value of this), so
``f_hat(v) = (C(v) - n q*) / (n (sigma1 - q*))`` is exactly unbiased with variance
``[f sigma1 (1 - sigma1) + (1 - f) q* (1 - q*)] / (n (sigma1 - q*)^2)``.

``g``: BiLOLOHA is ``g = 2``; OLOLOHA (the default) is ``g = max(2, rint(g*))`` with the paper's
minimizer of the approximate variance,
``g* = [sqrt(e^{4a} - 14 e^{2a} - 12 e^{2a(al+1)} + 12 e^{a(al+1)} + 12 e^{a(al+3)} + 1)
- e^{2a} + 6 e^a - 6 e^{al a} + 1] / [6 (e^a - e^{al a})]`` with ``a = eps_perm`` and ``al = eps_1 / eps_perm``.

Source: Arcolezi, Pinzon, Palamidessi, Gambs, "Frequency Estimation of Evolving Data Under Local
Differential Privacy", EDBT 2023 (arXiv 2210.00262); the authors' code hharcolezi/LOLOHA.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, format_up
from ...core.validation import check_int_values, check_positive_int
from ..base import FrequencyOracle, Reports, check_n
from ..hashing import LocalHashing, affine_hash
from .l_grr import ChainedGRR, check_epsilons
from .memo import LongitudinalMixin

__all__ = ["LOLOHA", "optimal_g"]


def optimal_g(epsilon_perm: float, epsilon_one: float) -> float:
    """OLOLOHA's ``g*`` (module docstring); ``nan`` where the square root's argument is negative."""
    a, al = epsilon_perm, epsilon_one / epsilon_perm
    ex = math.exp
    rad = (ex(4 * a) - 14 * ex(2 * a) - 12 * ex(2 * a * (al + 1)) + 12 * ex(a * (al + 1)) + 12 * ex(a * (al + 3)) + 1)
    if rad < 0:
        return math.nan
    return (math.sqrt(rad) - ex(2 * a) + 6 * ex(a) - 6 * ex(al * a) + 1) / (6 * (ex(a) - ex(al * a)))


class LOLOHA(LongitudinalMixin, FrequencyOracle):
    """LOLOHA: local hashing to ``[g]`` with a memoized GRR per hashed value and a fresh GRR per report.

    Privacy: ``epsilon`` is ``eps_perm`` (reports while the hashed value is unchanged; realized
    exactly as ``epsilon_perm <= epsilon``); one report is ``epsilon_one``-LDP (exact); any
    sequence of values costs at most ``min(s, g) eps_perm`` (``s`` distinct hashed values).
    Source: Arcolezi, Pinzon, Palamidessi, Gambs, EDBT 2023.
    Cost: O(n) encode; aggregate as OLH (:class:`~shuffledp.local.hashing.LocalHashing`).

    Parameters
    ----------
    epsilon : float
        ``eps_perm``, > 0.
    d : int
        Domain size, >= 2.
    epsilon_one : float, optional
        One-report target ``0 < eps_1 < eps_perm``; default ``eps_perm / 2``.
    g : int, optional
        Hash range, >= 2; default OLOLOHA's ``max(2, rint(g*))`` (``g = 2`` is BiLOLOHA).
    prime : int, optional
        Field size of the hash family (default the smallest prime >= d).
    """

    name = "loloha"
    setup_width = 1
    answer_width = 1
    answer_dtype = np.int64

    def __init__(self, epsilon: float, d: int, epsilon_one: float | None = None, g: int | None = None,
                 prime: int | None = None) -> None:
        e_perm, e_one = check_epsilons(epsilon, epsilon_one)
        super().__init__(e_perm, d)
        self.epsilon_one_target = e_one
        if g is None:
            gs = optimal_g(e_perm, e_one)
            g = 2 if not math.isfinite(gs) else max(2, int(np.rint(gs)))
        self.g = check_positive_int(g, "g", minimum=2)
        self.key_space = self.g
        self.hashing = LocalHashing(e_perm, self.d, self.g, prime)
        self.prime = self.hashing.prime
        self.n_seeds = self.hashing.n_seeds
        self.chain = ChainedGRR(self.epsilon, e_one, self.g)
        self.epsilon_perm, self.epsilon_one = self.chain.epsilon_perm, self.chain.epsilon_one
        self.epsilon_irr = self.chain.epsilon_irr
        self.p1, self.q1 = float(self.chain.p1), float(self.chain.q1)
        self.p2, self.q2 = float(self.chain.p2), float(self.chain.q2)
        self.sigma1, self.sigma0 = float(self.chain.sigma1), float(self.chain.sigma0)
        coll = LocalHashing.exact_collision_probability(self.prime, self.g)
        q_star = coll * self.chain.sigma1 + (1 - coll) * self.chain.sigma0
        self.collision = float(coll)
        self.q_star = float(q_star)

    def _privacy(self) -> PrivacyStatement:
        """``eps_perm``-LDP per hashed value for any number of reports; one report ``eps_1``-LDP (note)."""
        ep, e1 = format_up(self.epsilon_perm, 9), format_up(self.epsilon_one, 9)
        return PrivacyStatement(self.epsilon_perm, 0.0, "local", "replace_one",
                                note=f"LOLOHA(g={self.g}): eps_perm={ep} (unbounded reports of one "
                                     f"hashed value, memoized PRR); eps_1={e1} (one report); any "
                                     f"value sequence: <= {self.g} eps_perm")

    # --- client ------------------------------------------------------------------------
    def setup(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Each user's public hash seed, ``(n, 1)``."""
        return rng.integers(0, self.n_seeds, size=(n, 1), dtype=np.int64)

    def hash(self, seeds: Any, x: Any) -> np.ndarray:
        """``H_s(x)`` (the client's and the server's shared function)."""
        return affine_hash(seeds, x, self.prime, self.g)

    def memo_keys(self, x: np.ndarray, setup: np.ndarray) -> np.ndarray:
        return self.hash(np.asarray(setup)[:, 0], x).astype(np.int64)

    def permanent(self, keys: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return ChainedGRR.grr(np.asarray(keys, dtype=np.int64), self.chain.p1, self.g, rng)[:, None]

    def instantaneous(self, answers: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> Reports:
        y = ChainedGRR.grr(np.asarray(answers)[:, 0], self.chain.p2, self.g, rng)
        return {"seed": np.asarray(setup)[:, 0].astype(np.uint64), "y": y}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"seed", "y"}:
            raise ValidationError("LOLOHA reports must have exactly the fields 'seed' and 'y'", parameter="reports")
        checked = self.hashing.validate_reports(reports)
        return checked

    # --- analyzer ----------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """Support counts ``C_i = #{u : H_{s_u}(i) = y_u}`` (the OLH aggregation)."""
        return self.hashing.aggregate(reports)

    def _total_per_user(self) -> tuple[float, float]:
        return self.sigma1 + (self.d - 1) * self.q_star, float(self.d) ** 2

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        return self._pure_estimate(np.asarray(statistic), n, self.sigma1, self.q_star)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        return self._pure_variance(check_n(n), value, self.sigma1, self.q_star)

    # --- privacy -----------------------------------------------------------------------
    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """One report: ``Pr[s, y | x] = (1 / #seeds) (sigma1 if y = H_s(x) else sigma0)``."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        s = np.asarray(reports["seed"]).astype(np.int64)
        hit = np.asarray(reports["y"]) == self.hash(s, xv)
        return np.where(hit, self.sigma1, self.sigma0) / self.n_seeds

    def permanent_probabilities(self, answers: Any, x: Any, setup: Any) -> np.ndarray:
        """``Pr[B | x, s]`` of the memoized answer: ``p1`` if ``B = H_s(x)`` else ``q1``."""
        xv = int(check_int_values(np.asarray([x]), self.d, "x")[0])
        s = np.asarray(setup, dtype=np.int64).reshape(-1)
        return np.where(np.asarray(answers).reshape(-1) == self.hash(s, xv), self.p1, self.q1)

    def __repr__(self) -> str:
        return (f"LOLOHA(epsilon={self.epsilon:g}, d={self.d}, epsilon_one={self.epsilon_one_target:g}, "
                f"g={self.g}, prime={self.prime})")
