"""The shuffle step: uniform permutation of all messages, single- or multi-shuffler.

A shuffler is semi-honest: it strips metadata (here: anything but the message columns), adds
the protocol's fake messages if any, and forwards a uniformly random permutation of its batch.
Production shuffling draws its permutation from the OS CSPRNG
(:func:`shuffledp.core.rng.secure_rng`); simulation may pass a seeded generator.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import ValidationError
from ..core.rng import as_generator
from .base import Messages, Protocol, concat_messages, n_messages, take_messages

__all__ = ["shuffle_messages", "run_shufflers"]


def shuffle_messages(messages: Messages, rng: np.random.Generator | None = None, *,
                     production: bool = False) -> Messages:
    """Uniformly permute the rows of a columnar batch.

    Parameters
    ----------
    messages : dict of arrays
        Columnar messages (same first-axis length in every column).
    rng : numpy Generator, optional
        Simulation generator. In production (``production=True``) it must be ``None`` and the
        permutation comes from the OS entropy pool.
    """
    gen = as_generator(rng, production=production)
    m = n_messages(messages)
    lengths = {k: v.shape[0] for k, v in messages.items()}
    if len(set(lengths.values())) > 1:
        raise ValidationError(f"message columns differ in length: {lengths}", parameter="messages")
    return take_messages(messages, gen.permutation(m))


def run_shufflers(protocol: Protocol, messages: Messages, rng: np.random.Generator | None = None, *,
                  production: bool = False) -> Messages:
    """Route messages to the protocol's shufflers, add fakes, permute each batch, concatenate.

    Messages carry an optional ``"shuffler"`` column (ints in ``[0, n_shufflers)``); without it
    everything goes to shuffler 0. The output keeps the ``"shuffler"`` column when the protocol
    has more than one shuffler (the analyzer knows which shuffler forwarded a batch).
    """
    gen = as_generator(rng, production=production)
    s = protocol.n_shufflers
    if s == 1:
        fake = protocol.shuffler_messages(0, gen)
        batch = concat_messages([messages, fake]) if fake else messages
        return shuffle_messages(batch, gen) if batch else batch
    if messages and "shuffler" not in messages:
        raise ValidationError("a multi-shuffler protocol's messages need a 'shuffler' column", parameter="messages")
    route = messages["shuffler"] if messages else np.zeros(0, dtype=np.int64)
    if route.size and (route.min() < 0 or route.max() >= s):
        raise ValidationError(f"'shuffler' column must be in [0, {s})", parameter="messages")
    order = np.argsort(route, kind="stable")
    bounds = np.searchsorted(route[order], np.arange(s + 1))
    out = []
    for j in range(s):  # one iteration per shuffler, not per user
        part = take_messages(messages, order[bounds[j]:bounds[j + 1]]) if messages else {}
        fake = protocol.shuffler_messages(j, gen)
        if fake and "shuffler" not in fake:
            fake = {**fake, "shuffler": np.full(n_messages(fake), j, dtype=np.int64)}
        batch = concat_messages([part, fake])
        if batch:
            out.append(shuffle_messages(batch, gen))
    return concat_messages(out)
