"""Shuffle-model histogram (frequency) protocols: each user holds x in [0, d).

Every protocol is built from its central target ``(epsilon, delta)`` and ``n`` (and ``d``) and
chooses its local parameters from the theorem it implements (survey §4.2). Estimates are
**counts** (number of users per item), as in the survey. One protocol per module:

=========  ==================  ==============================================  ==========================
name       module              protocol                                        source
=========  ==================  ==============================================  ==========================
hist_kr    :mod:`.kr`          k-ary RR + privacy blanket                      Balle et al. CRYPTO'19
hist_mm    :mod:`.mm`          P^hist = P^zsum per coordinate (multi-message)  Balcer & Cheu ITC'20
slh        :mod:`.slh`         shuffled optimized local hashing (SOLH)         Wang et al. PVLDB'20
murs       :mod:`.murs`        several shufflers adding uniform fake reports   Wang et al. PVLDB'20
prhr       :mod:`.prhr`        private-coin multi-message Hadamard response    Ghazi et al. EUROCRYPT'21
pucm       :mod:`.pucm`        public-coin count-min P^CM                      Ghazi et al. EUROCRYPT'21
=========  ==================  ==============================================  ==========================

:mod:`._base` holds the shared :class:`HistogramProtocol` and the pure-oracle estimator.
``docs/protocols-histogram.md`` gives the formulas, every reconstruction choice and measured errors.
"""

from __future__ import annotations

from ..base import Protocol
from ._base import _MARGIN, HistogramProtocol, _PureOracleMixin, blanket_epsilon, blanket_required
from .kr import HistKR
from .mm import HistMM
from .murs import MURS
from .prhr import PRHR, _gf2_rank_probs, _parity, _random_subspaces, _span_nonzero
from .pucm import PUCM
from .slh import SLH

__all__ = ["HistogramProtocol", "HistKR", "HistMM", "SLH", "MURS", "PRHR", "PUCM", "PROTOCOLS",
           "blanket_epsilon", "blanket_required"]

#: every histogram protocol by registry name
PROTOCOLS: dict[str, type[Protocol]] = {
    "hist_kr": HistKR, "hist_mm": HistMM, "slh": SLH, "murs": MURS, "prhr": PRHR, "pucm": PUCM,
}
