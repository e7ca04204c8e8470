"""The survey's comparison baselines, behind the shuffle :class:`~shuffledp.shuffle.base.Protocol` contract.

The ESA survey (§5) compares every shuffle protocol at central ``eps_c`` with

* the **local model** at the same epsilon, ``eps_l = eps_c`` (an eps-LDP protocol is also
  eps-DP for the analyzer's whole view, so this is the same central target without a trusted
  party): binary randomized response for counting (``ldp_rr``), k-ary randomized response for
  histograms (``ldp_krr``), Harmony for sums (``ldp_harmony``), and any local frequency oracle of
  :mod:`shuffledp.local` by name (``ldp_oracle``);
* the **central model** (a trusted curator): Laplace noise on the exact count, histogram or sum
  (``cdp_laplace_count``, ``cdp_laplace_hist``, ``cdp_laplace_sum``). The noise is the *exact
  discrete Laplace* of :mod:`shuffledp.central` (integer counts; the sum in fixed point on a 2^k
  grid), drawn from the OS on the release path; ``numpy.random.laplace`` is never used.

One baseline per module, named after it (:mod:`.ldp_rr`, ..., :mod:`.cdp_laplace_sum`).

All of them run through :func:`shuffledp.pipeline.run` (``model`` is ``"local"`` or
``"central"``, so no shuffler is involved) and :func:`shuffledp.pipeline.simulate` (exact
statistic simulation, seeded). Estimates are **totals**: counts, per-item counts, the sum.

Where the curator's noise lives (central protocols): ``encode`` hands each user's raw value to
the curator; ``aggregate`` is the curator's *release*: the exact aggregate plus exact discrete
Laplace noise from the OS (so the statistic already carries the noise and is not mergeable
across batches: merge raw batches before releasing). ``simulate_statistic(data, rng)`` samples
the same law with a seeded generator (simulation only); ``estimate`` only rescales.
"""

from __future__ import annotations

from ..base import Protocol
from .cdp_laplace_count import CdpLaplaceCount
from .cdp_laplace_hist import CdpLaplaceHist
from .cdp_laplace_sum import CdpLaplaceSum
from .ldp_harmony import LdpHarmony, UnitIntervalHarmony
from .ldp_krr import LdpKRR
from .ldp_oracle import LdpOracle
from .ldp_rr import LdpRR

__all__ = ["LdpRR", "LdpKRR", "LdpOracle", "LdpHarmony", "CdpLaplaceCount", "CdpLaplaceHist", "CdpLaplaceSum",
           "UnitIntervalHarmony", "PROTOCOLS"]

#: every baseline by registry name
PROTOCOLS: dict[str, type[Protocol]] = {
    "ldp_rr": LdpRR, "ldp_krr": LdpKRR, "ldp_oracle": LdpOracle, "ldp_harmony": LdpHarmony,
    "cdp_laplace_count": CdpLaplaceCount, "cdp_laplace_hist": CdpLaplaceHist, "cdp_laplace_sum": CdpLaplaceSum,
}
