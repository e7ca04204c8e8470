"""Encode -> shuffle -> analyze in one process, for local, shuffle and central protocols.

The survey's comparisons (LDP vs shuffle vs CDP at the same central eps) are one loop over
protocols built with :func:`shuffledp.shuffle.protocol`::

    for name in ("ldp_rr", "cnt_rr", "cdp_laplace_count"):
        est = run(protocol(name, epsilon=1.0, delta=1e-6, n=n), bits, rng)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core.errors import ValidationError
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

    ``production=True`` refuses a seed: all randomness then comes from the OS, and the shuffle
    permutation comes from the OS CSPRNG.

    A shuffle-model protocol is calibrated for ``protocol.n`` users; running it on fewer users
    (whose guarantee is weaker than the target) raises :class:`ValidationError`, and so does any
    batch whose stated guarantee ``privacy(n_users)`` is weaker than the target.
    """
    gen = as_generator(rng, production=production)
    n = _n_users(values)
    _check_batch_size(protocol, n)
    messages = protocol.encode(values, gen)
    if protocol.model == "shuffle":
        messages = (run_shufflers(protocol, messages, production=True) if production
                    else run_shufflers(protocol, messages, gen))
    return _check_release(protocol, protocol.analyze(messages, n))


def simulate(protocol: Protocol, values: Any, rng: np.random.Generator | int | None = None) -> Estimate:
    """Like :func:`run`, but sample the aggregate statistic exactly when the protocol can.

    Same output distribution as :func:`run`; cost independent of n where
    ``protocol.has_exact_simulation``.
    """
    gen = as_generator(rng)
    if not protocol.has_exact_simulation:
        return run(protocol, values, gen)
    n = _n_users(values)
    _check_batch_size(protocol, n)
    stat = protocol.simulate_statistic(protocol.summarize(values), gen)
    return _check_release(protocol, protocol.estimate(stat, n))


def _check_batch_size(protocol: Protocol, n_users: int) -> None:
    """Refuse a shuffle-model batch smaller than the ``n`` the protocol was calibrated for.

    Amplification by shuffling (and the noise the other users contribute) is calibrated for
    ``protocol.n`` users; with fewer the guarantee is weaker than the promised target.
    """
    if protocol.model == "shuffle" and n_users < protocol.n:
        raise ValidationError(
            f"{protocol.name or type(protocol).__name__} was calibrated for n={protocol.n} users to meet "
            f"(eps={protocol.epsilon:g}, delta={protocol.delta:g}); this batch has {n_users} users, whose "
            f"guarantee is weaker than the target. Build the protocol with n={n_users} (or fewer) instead.",
            parameter="n")


def _check_release(protocol: Protocol, est: Estimate) -> Estimate:
    """Refuse a shuffle-model release whose guarantee ``privacy(n_users)`` is weaker than the target."""
    if protocol.model == "shuffle":
        st = est.privacy
        if not (st.eps <= protocol.epsilon and st.delta <= protocol.delta):
            raise ValidationError(
                f"{protocol.name or type(protocol).__name__} on {est.n} users would release with "
                f"(eps={st.eps!r}, delta={st.delta!r}), weaker than the target "
                f"(eps={protocol.epsilon!r}, delta={protocol.delta!r})", parameter="n")
    return est


def _n_users(values: Any) -> int:
    arr = np.asarray(values) if not isinstance(values, (list, tuple)) or len(values) else np.zeros(0)
    return int(arr.shape[0]) if arr.ndim else 1
