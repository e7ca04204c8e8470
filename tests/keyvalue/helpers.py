"""Shared helpers for key-value tests: replicate a population R times and estimate per replica."""

import numpy as np

from shuffledp.local.keyvalue import KeyValueData


def replicate(data: KeyValueData, R: int) -> KeyValueData:
    """R copies of the same population, user after user (one randomize call for all replicas)."""
    lens = np.tile(data.lengths, R)
    offs = np.concatenate([[0], np.cumsum(lens)])
    return KeyValueData(np.tile(data.keys, R), np.tile(data.vals, R), offs, data.d)


def per_replica_estimates(m, data: KeyValueData, R: int, rng, n_for_estimate=None):
    """Randomize R independent replicas of ``data`` at once; return the list of estimates."""
    big = replicate(data, R)
    reports = m.randomize(big, rng)
    n = data.n
    out = []
    for r in range(R):
        part = {k: v[r * n:(r + 1) * n] for k, v in reports.items()}
        out.append(m.estimate(m.aggregate(part), n if n_for_estimate is None else n_for_estimate))
    return out


def population(n: int, d: int, max_len: int, rng, *, constant_values: bool = False) -> KeyValueData:
    """n users with 0..max_len distinct keys, skewed key popularity, values in [-1, 1]."""
    lens = rng.integers(0, max_len + 1, n)
    w = 1.0 / np.arange(1, d + 1)
    keys = []
    for length in range(max_len + 1):  # a handful of set lengths, vectorised over users
        idx = np.flatnonzero(lens == length)
        g = rng.gumbel(size=(idx.size, d)) + np.log(w)
        keys.append((idx, np.argsort(-g, axis=1)[:, :length]))
    rows = np.zeros((n, max_len), dtype=np.int64)
    for idx, k in keys:
        rows[idx, : k.shape[1]] = k
    mask = np.arange(max_len)[None, :] < lens[:, None]
    flat_keys = rows[mask]
    mu = np.linspace(-0.7, 0.8, d)
    vals = mu[flat_keys] if constant_values else np.clip(mu[flat_keys] + 0.3 * rng.standard_normal(flat_keys.size), -1, 1)
    return KeyValueData(flat_keys, vals, np.concatenate([[0], np.cumsum(lens)]), d)
