"""Shuffle-model counting: each user holds a bit, the analyzer estimates the number of ones.

One protocol per module (survey §4.1):

- ``cnt_rr``  Cnt_RR  (:mod:`.randomized_response`) -- Cheu, Smith, Ullman, Zeber, Zhilyaev,
  EUROCRYPT 2019, Alg. 1 (shuffled binary RR).
- ``cnt_2m``  Cnt_2M  (:mod:`.two_message`) -- Balcer & Cheu, ITC 2020, protocol P^zsum (0, 1 or
  2 one-bit messages).
- ``cnt_bn``  Cnt_BN  (:mod:`.binomial`) -- robust binomial counter, a reconstruction (P^zsum with
  n := gamma n).
- ``cnt_sgm`` Cnt_SGM (:mod:`.split_and_mix`) -- robust distributed symmetric-geometric counter
  over a sum-only channel (split-and-mix), a reconstruction; (eps, delta_split, gamma)-DP, *not* pure.

``cnt_pure`` (Ghazi, Golowich, Kumar, Manurangsi, Pagh, Velingker, ITC 2020) is **not implemented**: the
paper's protocol text (arXiv 2002.01919 §3) was not available; see ``docs/protocols-counting-sums.md``.

Every estimate is a count (number of users holding 1). ``summarize(bits)`` returns the true
counts ``[n0, n1]``; ``simulate_statistic`` samples the analyzer's statistic exactly from them in
O(1) time, whatever n.
"""

from __future__ import annotations

from ..base import Protocol
from .binomial import CntBN
from .randomized_response import CntRR, cheu_corollary47_epsilon, cheu_lemma48_lambda
from .split_and_mix import CntSGM
from .two_message import Cnt2M

__all__ = ["CntRR", "Cnt2M", "CntBN", "CntSGM", "PROTOCOLS", "cheu_corollary47_epsilon", "cheu_lemma48_lambda"]

#: every counting protocol by registry name
PROTOCOLS: dict[str, type[Protocol]] = {"cnt_rr": CntRR, "cnt_2m": Cnt2M, "cnt_bn": CntBN, "cnt_sgm": CntSGM}
