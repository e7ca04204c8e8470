"""Encode -> shuffle -> analyze in one process, for local, shuffle and central protocols.

The survey's comparisons (LDP vs shuffle vs CDP at the same central eps) are one loop over
protocols built with :func:`shuffledp.shuffle.protocol`::

    for name in ("ldp_rr", "cnt_rr", "cdp_laplace_count"):
        est = run(protocol(name, epsilon=1.0, delta=1e-6, n=n), bits, rng)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .core.domain import Domain
from .core.errors import ValidationError
from .core.estimate import Estimate
from .core.rng import as_generator
from .shuffle.base import Messages, Protocol
from .shuffle.shuffler import run_shufflers

__all__ = ["run", "simulate", "simulations", "deliver"]


def run(protocol: Protocol, values: Any, rng: np.random.Generator | int | None = None, *,
        production: bool = False, domain: Domain | None = None) -> Estimate:
    """Run every user's encoder, the shuffler(s) and the analyzer on ``values``.

    Shuffle-model protocols go through :func:`~shuffledp.shuffle.run_shufflers`; local-model
    protocols are analysed report by report (no shuffler); central-model protocols hand the raw
    values to the trusted curator, whose ``estimate`` adds the noise.

    ``production=True`` refuses a seed: all randomness then comes from the OS, and the shuffle
    permutation comes from the OS CSPRNG.

    A shuffle-model protocol is calibrated for ``protocol.n`` users; running it on fewer users
    (whose guarantee is weaker than the target) raises :class:`ValidationError`, and so does any
    batch whose stated guarantee ``privacy(n_users)`` is weaker than the target.

    ``domain``: categorical ``values`` are labels (a list, numpy array, pandas Series or pyarrow
    array) of this :class:`~shuffledp.core.domain.Domain`, whose size must be the protocol's
    ``d``; they are encoded to indices and the estimate carries the labels (``Estimate.labels``).
    """
    values = _encode(protocol, values, domain)
    gen = as_generator(rng, production=production)
    n = _n_users(values)
    _check_batch_size(protocol, n)
    messages = deliver(protocol, protocol.encode(values, gen), None if production else gen,
                       production=production)
    return _labelled(_check_release(protocol, protocol.analyze(messages, n)), domain)


def deliver(protocol: Protocol, messages: Messages, rng: np.random.Generator | int | None = None, *,
            production: bool = False) -> Messages:
    """The batch the analyzer receives when the users send ``messages``.

    Shuffle model: every shuffler's fake messages are added and each shuffler's batch is permuted
    uniformly (:func:`~shuffledp.shuffle.run_shufflers`; with ``production=True`` the permutation
    comes from the OS CSPRNG and a seed is refused). Local and central models: the messages as
    sent (reports analysed one by one, or the raw values the trusted curator holds).

    No batch-size check: this is the transport step of :func:`run`, also used on a sub-batch to
    measure the analyzer's cost.
    """
    if protocol.model != "shuffle":
        return messages
    return run_shufflers(protocol, messages, rng, production=production)


def simulate(protocol: Protocol, values: Any, rng: np.random.Generator | int | None = None, *,
             domain: Domain | None = None) -> Estimate:
    """Like :func:`run`, but sample the aggregate statistic exactly when the protocol can.

    Same output distribution as :func:`run`; cost independent of n where
    ``protocol.has_exact_simulation``. Equal to the first release of :func:`simulations`.
    ``domain``: labels in, labelled estimate out, as in :func:`run`.
    """
    return next(simulations(protocol, values, rng, domain=domain))


def simulations(protocol: Protocol, values: Any,
                rng: np.random.Generator | int | None = None, *,
                domain: Domain | None = None) -> Iterator[Estimate]:
    """Independent releases of ``protocol`` on the same ``values``, without end.

    Each release has the distribution of :func:`run`'s: where ``protocol.has_exact_simulation``
    it is ``estimate(simulate_statistic(summarize(values)))``, the input summary computed once for
    all releases (each release then costs O(statistic), independent of n); otherwise every
    release is a full :func:`run` (encode, shuffle, analyze). The same checks as :func:`run`
    apply: the batch must have the ``n`` users the protocol was calibrated for, and every
    shuffle-model release must meet the target. Take as many as needed, e.g. with
    :func:`itertools.islice`; randomness is drawn from ``rng`` only as releases are taken.
    """
    values = _encode(protocol, values, domain)
    gen = as_generator(rng)
    if not protocol.has_exact_simulation:
        while True:
            yield _labelled(run(protocol, values, gen), domain)
    n = _n_users(values)
    _check_batch_size(protocol, n)
    data = protocol.summarize(values)
    while True:
        yield _labelled(_check_release(protocol, protocol.estimate(protocol.simulate_statistic(data, gen), n)),
                        domain)


def _encode(protocol: Protocol, values: Any, domain: Domain | None) -> Any:
    """Labels -> indices when a domain is given (its size must be the protocol's ``d``)."""
    if domain is None:
        return values
    if not isinstance(domain, Domain):
        raise ValidationError(f"domain must be a shuffledp.core.domain.Domain, got {type(domain).__name__}",
                              parameter="domain")
    d = getattr(protocol, "d", None)
    if d is None:
        raise ValidationError(f"domain applies to categorical protocols (with a domain size d); "
                              f"{protocol.name or type(protocol).__name__} has none", parameter="domain")
    if int(d) != domain.size:
        raise ValidationError(f"domain has {domain.size} labels but the protocol was built for d={d}",
                              parameter="domain")
    return domain.encode(values)


def _labelled(est: Estimate, domain: Domain | None) -> Estimate:
    return est if domain is None else domain.label(est)


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
