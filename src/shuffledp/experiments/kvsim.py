"""Exact simulation of the data-dependent *sampling stage* of key-value mechanisms.

The experiments replace the per-user perturbation by per-key multinomial draws
(``simulate_statistic``); what they need from the users is, per run, how many users sampled each
key with each discretized value. These functions compute those counts exactly (one O(n) pass per
run; the perturbation is then O(d)). Each key's (n1, n2) then has exactly its client-path
marginal distribution; cross-key correlations of the perturbation are not reproduced, which does
not change any per-key expected error (MSE, relative error).
"""

from __future__ import annotations

import numpy as np

from ..local.keyvalue.data import KeyValueData, discretize, padding_sample, uniform_key_sample

__all__ = ["sampling_counts_uniform", "sampling_counts_padding", "SortedPairs"]


class SortedPairs:
    """Pre-sorted (user, key) codes so repeated uniform-key sampling costs one searchsorted per run."""

    def __init__(self, data: KeyValueData) -> None:
        self.data = data
        code = data.user_ids() * data.d + data.keys
        self.order = np.argsort(code, kind="stable")
        self.code = code[self.order]

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        data, d, n = self.data, self.data.d, self.data.n
        j = rng.integers(0, d, n)
        if self.code.size == 0:
            holds, val = np.zeros(n, bool), np.zeros(n)
        else:
            q = np.arange(n, dtype=np.int64) * d + j
            pos = np.minimum(np.searchsorted(self.code, q), self.code.size - 1)
            holds = self.code[pos] == q
            val = np.where(holds, data.vals[self.order[pos]], 0.0)
        x = discretize(val, rng)
        z = np.where(holds, np.where(x > 0, 1, 2), 0)
        return np.bincount(3 * j + z, minlength=3 * d).reshape(d, 3)


def sampling_counts_uniform(data: KeyValueData, rng: np.random.Generator,
                            sorted_pairs: SortedPairs | None = None) -> np.ndarray:
    """Per key [#samplers not holding it, #holders sampled with x = +1, ... x = -1]: shape (d, 3)."""
    if sorted_pairs is not None:
        return sorted_pairs.sample(rng)
    j, holds, val = uniform_key_sample(data, rng)
    x = discretize(val, rng)
    z = np.where(holds, np.where(x > 0, 1, 2), 0)
    return np.bincount(3 * j + z, minlength=3 * data.d).reshape(data.d, 3)


def sampling_counts_padding(data: KeyValueData, ell: int, rng: np.random.Generator,
                            mask: np.ndarray | None = None, uniforms: np.ndarray | None = None) -> np.ndarray:
    """Per real key #users who sampled it with x = +1 / -1 after padding-and-sampling to ``ell``;
    row d holds [number of participating users, 0]. Shape (d + 1, 2).

    ``mask`` restricts to a subset of users (HISKV's LRR_KV group). ``uniforms`` (two arrays of n
    U[0,1) draws) lets several ell values reuse one draw per user (each ell's marginal stays exact).
    """
    d = data.d
    if uniforms is None:
        key, val = padding_sample(data, ell, rng)
        x = discretize(val, rng)
    else:
        u1, u2 = uniforms
        lens = data.lengths
        slot = np.floor(u1 * np.maximum(lens, ell)).astype(np.int64)
        real = slot < lens
        idx = np.minimum(data.offsets[:-1] + slot, max(data.keys.size - 1, 0))
        key = np.where(real, data.keys[idx], d)
        val = np.where(real, data.vals[idx], 0.0)
        x = np.where(u2 < (1 + val) / 2, 1, -1)
    sel = (key < d) if mask is None else ((key < d) & mask)
    cell = 2 * key[sel] + (x[sel] < 0)
    out = np.zeros((d + 1, 2), dtype=np.int64)
    out[:d] = np.bincount(cell, minlength=2 * d).reshape(d, 2)
    out[d, 0] = data.n if mask is None else int(mask.sum())
    return out
