"""Encode -> shuffle -> analyze in one process, for local, shuffle and central protocols.

The survey's comparisons (LDP vs shuffle vs CDP at the same central eps) are one loop over
protocols built with :func:`shuffledp.shuffle.protocol`::

    for name in ("ldp_rr", "cnt_rr", "cdp_laplace_count"):
        est = run(protocol(name, epsilon=1.0, delta=1e-6, n=n), bits, rng)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core.estimate import Estimate
from .core.rng import as_generator
from .shuffle.base import Protocol
from .shuffle.shuffler import run_shufflers

__all__ = ["run", "simulate"]


def run(protocol: Protocol, values: Any, rng: np.random.Generator | int | None = None, *,
        production: bool = False) -> Estimate:
    """Run every user's encoder, the shuffler(s) and the analyzer on ``values``.

    Shuffle-model protocols go through :func:`~shuffledp.shuffle.run_shufflers`; local-model
    protocols are analysed report by report (no shuffler); central-model protocols hand the raw
    values to the trusted curator, whose ``estimate`` adds the noise.

    ``production=True`` refuses a seed: all randomness then comes from the OS.
    """
    gen = as_generator(rng, production=production)
    messages = protocol.encode(values, gen)
    n = _n_users(values)
    if protocol.model == "shuffle":
        messages = run_shufflers(protocol, messages, gen)
    return protocol.analyze(messages, n)


def simulate(protocol: Protocol, values: Any, rng: np.random.Generator | int | None = None) -> Estimate:
    """Like :func:`run`, but sample the aggregate statistic exactly when the protocol can.

    Same output distribution as :func:`run`; cost independent of n where
    ``protocol.has_exact_simulation``.
    """
    gen = as_generator(rng)
    if not protocol.has_exact_simulation:
        return run(protocol, values, gen)
    stat = protocol.simulate_statistic(protocol.summarize(values), gen)
    return protocol.estimate(stat, _n_users(values))


def _n_users(values: Any) -> int:
    arr = np.asarray(values) if not isinstance(values, (list, tuple)) or len(values) else np.zeros(0)
    return int(arr.shape[0]) if arr.ndim else 1
