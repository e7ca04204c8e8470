"""Shuffle-model summation: each user holds x in [0, 1], the analyzer estimates sum(x).

One protocol per module (survey §4.3), all built on randomized rounding
``fe_p(x) = floor(x p) + Ber(frac(x p))`` (unbiased, Var <= 1/4 per user):

- ``rsum_rr``  RSum_RR  (:mod:`.rsum_rr`) -- Cheu et al. EUROCRYPT 2019 multi-message sum:
  r = ceil(eps sqrt(n)) unary bits per user, each through shuffled binary RR; calibration by group
  privacy over the n r "virtual users" (or the paper's Thm 5.4).
- ``rsum_kr``  RSum_KR  (:mod:`.rsum_kr`) -- Balle, Bell, Gascon, Nissim CRYPTO 2019 Alg. 2: one
  (k+1)-ary RR message of fe_k(x), blanket gamma from Thm 3.1 (or the numeric Bennett bound).
- ``rsum_rm``  RSum_RM  (:mod:`.rsum_rm`) -- Balle, Bell, Gascon, Nissim CCS 2020 recursive
  protocol: m labelled messages, digit j of x in base p_j through a shuffled K_j-ary RR.
- ``rsum_dsg`` RSum_DSG (:mod:`.rsum_dsg`) -- distributed symmetric geometric noise (Polya shares)
  + split-and-mix with precision p = ceil(sqrt(n)).

``rsum_pure`` (Ghazi, Golowich, Kumar, Manurangsi, Pagh, Velingker, ITC 2020) is **not implemented**: it is
built on Cnt_PURE, whose protocol text was not available (see ``docs/protocols-counting-sums.md``).

Estimates are sums. ``summarize(values)`` returns the validated values themselves: the
statistic's law depends on every user's fractional part, so ``simulate_statistic`` draws the
randomized rounding per user (one uniform each, vectorized) and everything after it at count
level (O(k) per protocol), exactly in law. ``variance(n)`` is the worst case over inputs in
[0, 1]^n, ``sum_variance(values)`` the exact variance for given values.
"""

from __future__ import annotations

from ..base import Protocol
from ._base import _krr_gamma_bound, blanket_gamma, blanket_gamma_or_none
from .rsum_dsg import RSumDSG
from .rsum_kr import RSumKR
from .rsum_rm import RSumRM
from .rsum_rr import RSumRR

__all__ = ["RSumRR", "RSumKR", "RSumRM", "RSumDSG", "PROTOCOLS", "blanket_gamma"]

#: every summation protocol by registry name
PROTOCOLS: dict[str, type[Protocol]] = {"rsum_rr": RSumRR, "rsum_kr": RSumKR, "rsum_rm": RSumRM, "rsum_dsg": RSumDSG}
