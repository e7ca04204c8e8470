"""The shuffle step: uniform permutation of all messages, single- or multi-shuffler.

A shuffler is semi-honest: it strips metadata (here: anything but the message columns), adds
the protocol's fake messages if any, and forwards a uniformly random permutation of its batch.
Production shuffling (``production=True``) draws its permutation from the OS CSPRNG
(:func:`os.urandom`, see :func:`csprng_permutation`), not from a numpy bit generator (PCG64 is
not cryptographically secure even when seeded from the OS); simulation may pass a seeded
generator.
"""

from __future__ import annotations

import os

import numpy as np

from ..core.errors import ValidationError
from ..core.rng import as_generator
from ..core.batch import concat_rows, n_rows, take_rows
from .base import Messages, Protocol

__all__ = ["shuffle_messages", "run_shufflers", "csprng_permutation"]


def csprng_permutation(m: int) -> np.ndarray:
    """A uniformly random permutation of ``range(m)`` from the OS CSPRNG.

    Sorts ``m`` independent uniform 64-bit keys read from :func:`os.urandom`. Keys that tie
    (probability at most ``m^2 / 2^65``) are redrawn as a whole, so the permutation is exactly
    uniform: conditioned on distinct i.i.d. keys, every ordering is equally likely.
    """
    if m < 0:
        raise ValidationError(f"m must be >= 0, got {m!r}", parameter="m")
    while True:
        keys = np.frombuffer(os.urandom(8 * m), dtype=np.uint64)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        if m < 2 or not np.any(sorted_keys[1:] == sorted_keys[:-1]):
            return order.astype(np.int64, copy=False)


def shuffle_messages(messages: Messages, rng: np.random.Generator | None = None, *,
                     production: bool = False) -> Messages:
    """Uniformly permute the rows of a columnar batch.

    Parameters
    ----------
    messages : dict of arrays
        Columnar messages (same first-axis length in every column).
    rng : numpy Generator, optional
        Simulation generator. In production (``production=True``) it must be ``None`` and the
        permutation comes from the OS CSPRNG (:func:`csprng_permutation`).
    """
    gen = as_generator(rng, production=production)
    m = n_rows(messages, parameter="messages")
    perm = csprng_permutation(m) if production else gen.permutation(m)
    return take_rows(messages, perm)


def run_shufflers(protocol: Protocol, messages: Messages, rng: np.random.Generator | None = None, *,
                  production: bool = False) -> Messages:
    """Route messages to the protocol's shufflers, add fakes, permute each batch, concatenate.

    Messages carry an optional ``"shuffler"`` column (ints in ``[0, n_shufflers)``); without it
    everything goes to shuffler 0. The output keeps the ``"shuffler"`` column when the protocol
    has more than one shuffler (the analyzer knows which shuffler forwarded a batch).

    ``production=True`` refuses a seed; fake messages then come from an OS-seeded generator and
    every permutation from the OS CSPRNG.
    """
    gen = as_generator(rng, production=production)

    def permute(batch: Messages) -> Messages:
        return shuffle_messages(batch, production=True) if production else shuffle_messages(batch, gen)

    s = protocol.n_shufflers
    if s == 1:
        fake = protocol.shuffler_messages(0, gen)
        batch = concat_rows([messages, fake]) if fake else messages
        return permute(batch) if batch else batch
    if messages and "shuffler" not in messages:
        raise ValidationError("a multi-shuffler protocol's messages need a 'shuffler' column", parameter="messages")
    route = messages["shuffler"] if messages else np.zeros(0, dtype=np.int64)
    if route.size and (route.min() < 0 or route.max() >= s):
        raise ValidationError(f"'shuffler' column must be in [0, {s})", parameter="messages")
    order = np.argsort(route, kind="stable")
    bounds = np.searchsorted(route[order], np.arange(s + 1))
    out = []
    for j in range(s):  # one iteration per shuffler, not per user
        part = take_rows(messages, order[bounds[j]:bounds[j + 1]]) if messages else {}
        fake = protocol.shuffler_messages(j, gen)
        if fake and "shuffler" not in fake:
            fake = {**fake, "shuffler": np.full(n_rows(fake), j, dtype=np.int64)}
        batch = concat_rows([part, fake])
        if batch:
            out.append(permute(batch))
    return concat_rows(out)
