"""Longitudinal local oracles: repeated reports from the same users with memoized permanent answers.

Every mechanism here splits the client into a data-independent setup, a **permanent** answer
drawn once per memo key and reused (:class:`Memo`), and an optional fresh **instantaneous**
randomization per report. Each states two guarantees: ``epsilon_perm`` for unboundedly many
reports of one memo key and ``epsilon_one`` for a single report.

* :class:`LongitudinalGRR` (``l_grr``), :class:`LongitudinalOUE` (``l_oue``): Arcolezi et al. 2022;
* :class:`LOLOHA` (``loloha``): Arcolezi, Pinzon, Palamidessi, Gambs, EDBT 2023;
* :class:`DBitFlip` (``dbitflip``) and :class:`OneBitMean`: Ding, Kulkarni, Yekhanin, NeurIPS 2017;
* RAPPOR's PRR + IRR is :class:`shuffledp.local.rappor.Rappor` (``users=`` memoizes).
"""

from .dbitflip import DBitFlip
from .l_grr import LongitudinalGRR, irr_epsilon
from .l_oue import LongitudinalOUE
from .loloha import LOLOHA, optimal_g
from .memo import LongitudinalMixin, Memo, key_epsilon, transcript_epsilon
from .one_bit_mean import OneBitMean

__all__ = ["DBitFlip", "LongitudinalGRR", "LongitudinalOUE", "LOLOHA", "OneBitMean", "Memo", "LongitudinalMixin",
           "transcript_epsilon", "key_epsilon", "irr_epsilon", "optimal_g"]
