"""What a deployment relies on: each protocol's message layout and its one-message-per-user flag.

``message_schema()`` must describe every message ``encode`` emits, whatever the input (the
services lay plaintexts out with it), and ``one_message_per_user`` must be true exactly when every
user sends one message (the shufflers then count users by messages instead of user markers).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from shuffledp.shuffle import available_protocols, protocol
from shuffledp.shuffle.registry import protocol_class


def _build(name: str):
    sig = inspect.signature(protocol_class(name).__init__).parameters
    params = {}
    if "d" in sig:
        params["d"] = [4, 6] if name in ("fragmenting", "sample_one") else 8
    return protocol(name, epsilon=1.0, delta=1e-4, n=100_000, **params)


def _inputs(p, n: int, rng: np.random.Generator):
    if p.input_kind == "bit":
        return rng.integers(0, 2, n)
    if p.input_kind == "categorical":
        return rng.integers(0, getattr(p, "d", 2), n)
    if p.input_kind == "unit_interval":
        return rng.random(n)
    return np.stack([rng.integers(0, da, n) for da in p.dims], axis=1)


@pytest.mark.parametrize("name", available_protocols())
def test_schema_and_message_count_hold_for_random_inputs(name):
    p = _build(name)
    schema = {k: (dt, shape) for k, dt, shape in p.message_schema()}
    rows = set()
    for seed in range(10):
        rng = np.random.default_rng(seed)
        msgs = p.encode(_inputs(p, 40, rng), rng)
        got = {k: (np.asarray(v).dtype.newbyteorder("<").str, tuple(np.shape(v)[1:]))
               for k, v in msgs.items() if k != "shuffler"}
        assert got == schema, name
        rows.add(int(next(iter(msgs.values())).shape[0]))
    per_user = rows == {40}
    if p.one_message_per_user:
        assert per_user and p.messages_per_user == 1.0, name
    else:
        # the flag may be False for a protocol that happens to send one message per user on these
        # inputs only if it does not always (its expected count differs from 1)
        assert not per_user or p.messages_per_user != 1.0 or p.n_shufflers > 1, name
