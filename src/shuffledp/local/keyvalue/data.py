"""Key-value user data in a vectorised (CSR) layout, and the two client-side sampling steps.

Every user ``u`` holds a set ``S_u`` of pairs ``<k, v>`` with distinct keys ``k`` in ``[0, d)`` and
values ``v`` in ``[-1, 1]``. All users' pairs are stored back to back: ``keys[offsets[u]:offsets[u+1]]``
and ``vals[...]`` are user ``u``'s pairs (compressed sparse rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.validation import check_domain_size

__all__ = ["KeyValueData", "as_keyvalue_data", "discretize", "discretize_probability", "padding_sample",
           "uniform_key_sample"]

#: numpy's ``Generator.random()`` returns ``k / 2^53``: ``random() < t`` is Bernoulli(ceil(t 2^53) / 2^53).
_SCALE = float(1 << 53)


@dataclass(frozen=True)
class KeyValueData:
    """n users' key-value sets in CSR layout (validated on construction).

    Parameters
    ----------
    keys : int array, shape (P,)
        Keys of all pairs, user after user; each in ``[0, d)`` and distinct within a user.
    vals : float array, shape (P,)
        Values of the pairs, finite and in ``[-1, 1]``.
    offsets : int array, shape (n + 1,)
        ``offsets[0] = 0``, non-decreasing, ``offsets[-1] = P``.
    d : int
        Key domain size (>= 2).
    allow_empty : bool
        Whether users with no pair are allowed (default True; the padding-sampling mechanisms
        handle them with dummy keys, uniform key sampling reports them as non-holders).
    """

    keys: np.ndarray
    vals: np.ndarray
    offsets: np.ndarray
    d: int
    allow_empty: bool = True

    def __post_init__(self) -> None:
        d = check_domain_size(self.d)
        keys = np.asarray(self.keys)
        vals = np.asarray(self.vals)
        offs = np.asarray(self.offsets)
        if keys.ndim != 1 or vals.ndim != 1 or offs.ndim != 1:
            raise ValidationError("keys, vals and offsets must be 1-D arrays", parameter="keys")
        if keys.size and (keys.dtype == np.bool_ or not np.issubdtype(keys.dtype, np.integer)):
            if np.issubdtype(keys.dtype, np.floating) and np.all(np.isfinite(keys)) and np.all(keys == np.round(keys)):
                keys = keys.astype(np.int64)
            else:
                raise ValidationError(f"keys must be integers in [0, {d}), got dtype {keys.dtype}", parameter="keys")
        keys = keys.astype(np.int64, copy=False)
        if offs.size == 0 or offs.dtype == np.bool_ or not np.issubdtype(offs.dtype, np.integer):
            raise ValidationError("offsets must be a non-empty integer array of length n + 1", parameter="offsets")
        offs = offs.astype(np.int64, copy=False)
        if vals.size and (vals.dtype == np.bool_ or not (np.issubdtype(vals.dtype, np.floating)
                                                         or np.issubdtype(vals.dtype, np.integer))):
            raise ValidationError(f"vals must be numbers in [-1, 1], got dtype {vals.dtype}", parameter="vals")
        vals = vals.astype(np.float64, copy=False)
        if keys.shape != vals.shape:
            raise ValidationError(f"keys and vals must have the same length, got {keys.size} and {vals.size}",
                                  parameter="vals")
        if offs[0] != 0 or offs[-1] != keys.size or np.any(np.diff(offs) < 0):
            raise ValidationError("offsets must start at 0, be non-decreasing and end at len(keys)",
                                  parameter="offsets")
        if keys.size:
            if keys.min() < 0 or keys.max() >= d:
                bad = keys.min() if keys.min() < 0 else keys.max()
                raise ValidationError(f"keys must be integers in [0, {d}), found {int(bad)}", parameter="keys")
            if not np.all(np.isfinite(vals)):
                raise ValidationError("vals must be finite numbers in [-1, 1], found NaN or inf", parameter="vals")
            if vals.min() < -1.0 or vals.max() > 1.0:
                bad = vals.min() if vals.min() < -1.0 else vals.max()
                raise ValidationError(f"vals must be numbers in [-1, 1], found {float(bad)!r}", parameter="vals")
            user = np.repeat(np.arange(offs.size - 1), np.diff(offs))
            code = np.sort(user * d + keys)
            if np.any(code[1:] == code[:-1]):
                raise ValidationError("each user's keys must be distinct (a key appears twice in one set)",
                                      parameter="keys")
        if not self.allow_empty and np.any(np.diff(offs) == 0):
            raise ValidationError("empty key-value sets are not allowed here", parameter="offsets")
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "vals", vals)
        object.__setattr__(self, "offsets", offs)
        object.__setattr__(self, "d", d)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_sets(cls, sets: list[Any], d: int, *, allow_empty: bool = True) -> "KeyValueData":
        """From a list of per-user sets, each a dict ``{key: value}`` or a sequence of (key, value)."""
        ks: list[int] = []
        vs: list[float] = []
        offs = [0]
        for s in sets:
            items = s.items() if isinstance(s, dict) else s
            for k, v in items:
                ks.append(k)
                vs.append(v)
            offs.append(len(ks))
        # keys keep their own dtype: __post_init__ refuses a non-integral key (casting to int64 here
        # turned key 1.7 into key 1 and NaN into a ValueError)
        return cls(np.asarray(ks) if ks else np.zeros(0, np.int64),
                   np.asarray(vs, dtype=np.float64), np.asarray(offs, dtype=np.int64), d, allow_empty)

    @property
    def n(self) -> int:
        """Number of users."""
        return int(self.offsets.size - 1)

    @property
    def lengths(self) -> np.ndarray:
        """Set size l_u of every user."""
        return np.diff(self.offsets)

    def user_ids(self) -> np.ndarray:
        """Owner of every pair (length P)."""
        return np.repeat(np.arange(self.n), self.lengths)

    def user_set(self, u: int) -> list[tuple[int, float]]:
        """User ``u``'s pairs as a list of (key, value)."""
        a, b = self.offsets[u], self.offsets[u + 1]
        return [(int(k), float(v)) for k, v in zip(self.keys[a:b], self.vals[a:b])]

    def slice_users(self, start: int, stop: int) -> "KeyValueData":
        """Users ``start..stop-1`` (a chunk), without re-validation."""
        a, b = int(self.offsets[start]), int(self.offsets[stop])
        obj = object.__new__(KeyValueData)
        for name, val in (("keys", self.keys[a:b]), ("vals", self.vals[a:b]),
                          ("offsets", self.offsets[start:stop + 1] - a), ("d", self.d),
                          ("allow_empty", self.allow_empty)):
            object.__setattr__(obj, name, val)
        return obj

    def true_frequency(self) -> np.ndarray:
        """f_k: fraction of users holding key k."""
        return np.bincount(self.keys, minlength=self.d) / max(self.n, 1)

    def true_mean(self) -> np.ndarray:
        """m_k: mean value of key k over its holders (0 for keys nobody holds)."""
        cnt = np.bincount(self.keys, minlength=self.d)
        s = np.bincount(self.keys, weights=self.vals, minlength=self.d)
        return np.divide(s, cnt, out=np.zeros(self.d), where=cnt > 0)


def as_keyvalue_data(data: Any, d: int, *, allow_empty: bool = True) -> KeyValueData:
    """Accept a :class:`KeyValueData`, a ``(keys, vals, offsets)`` tuple, or a dense array.

    The dense form has shape ``(n, l, 2)``: every user holds exactly ``l`` pairs, column 0 the
    key (an integral number), column 1 the value; shape ``(n, 0)`` means n empty sets. It is what
    :func:`shuffledp.local.verify.sweep_reports` produces from one user's tuple of pairs.
    """
    if isinstance(data, KeyValueData):
        if data.d != d:
            raise ValidationError(f"data has key domain d={data.d}, mechanism expects d={d}", parameter="data")
        if not allow_empty and np.any(data.lengths == 0):
            raise ValidationError("empty key-value sets are not allowed here", parameter="data")
        return data
    if isinstance(data, tuple) and len(data) == 3:
        return KeyValueData(*data, d=d, allow_empty=allow_empty)
    arr = np.asarray(data)
    if arr.ndim == 2 and arr.shape[1] == 0:
        n = arr.shape[0]
        return KeyValueData(np.zeros(0, np.int64), np.zeros(0), np.zeros(n + 1, np.int64), d, allow_empty)
    if arr.ndim != 3 or arr.shape[2] != 2:
        raise ValidationError("data must be a KeyValueData, a (keys, vals, offsets) tuple or an array of "
                              f"shape (n, l, 2); got shape {arr.shape}", parameter="data")
    n, ell = arr.shape[0], arr.shape[1]
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)) or arr.dtype == np.bool_:
        raise ValidationError(f"data must be numeric, got dtype {arr.dtype}", parameter="data")
    keys = arr[:, :, 0].reshape(-1)
    if not np.all(np.isfinite(keys)) or np.any(keys != np.round(keys)):
        raise ValidationError(f"keys must be integers in [0, {d}), found a non-integral key", parameter="keys")
    return KeyValueData(keys.astype(np.int64), arr[:, :, 1].reshape(-1).astype(np.float64),
                        np.arange(n + 1, dtype=np.int64) * ell, d, allow_empty)


def discretize_probability(v: Any) -> np.ndarray:
    """The exact Pr[x = +1] that :func:`discretize` samples for value ``v``: ``(1 + v)/2`` (a double)
    rounded up to the ``2^-53`` grid, the law of ``random() < (1 + v)/2`` (every operation exact).

    It differs from ``(1 + v)/2`` by less than ``2^-53``; any probability in [0, 1] is the law of
    some value in [-1, 1], so the mechanisms' privacy bounds cover it, and ``probabilities`` use it.
    """
    t = (1.0 + np.asarray(v, dtype=np.float64)) / 2.0
    return np.ceil(t * _SCALE) / _SCALE


def discretize(v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """v -> +1 with probability :func:`discretize_probability` (v) ~ (1 + v)/2, else -1 (E ~ v). Returns int8.

    Compares with the threshold on the grid, which is the same event as ``random() < (1 + v)/2``.
    """
    return np.where(rng.random(np.shape(v)) < discretize_probability(v), 1, -1).astype(np.int8)


def padding_sample(data: KeyValueData, ell: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Padding-and-sampling (PCKV, HISKV): one pair per user over the extended domain [0, d + ell).

    With probability l_u / max(l_u, ell) the user picks a uniform pair of her set, otherwise a
    uniform dummy key ``d + j`` (j < ell) with value 0. Returns (key, value) arrays of length n.
    The output distribution equals truncate-to-ell-then-pad-then-pick-one (HISKV's description).

    The slot is an exact uniform integer on [0, max(l_u, ell)) (``Generator.integers``):
    ``floor(random() * L)`` gives each slot a probability ``1/L`` only to within ``2^-53`` when
    ``L`` is not a power of 2, and the privacy bounds need each pair's chance to be at most ``1/ell``.
    """
    lens = data.lengths
    slot = rng.integers(0, np.maximum(lens, ell), dtype=np.int64) if data.n else np.zeros(0, np.int64)
    real = slot < lens
    idx = np.minimum(data.offsets[:-1] + slot, max(data.keys.size - 1, 0))
    key = np.where(real, data.keys[idx] if data.keys.size else 0, data.d + rng.integers(0, ell, data.n))
    val = np.where(real, data.vals[idx] if data.vals.size else 0.0, 0.0)
    return key.astype(np.int64), val


def uniform_key_sample(data: KeyValueData, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Uniform key sampling (PrivKV, KVUE, KVOH): j ~ U[0, d) per user.

    Returns (j, holds, value): whether the user holds j and her value of j (0 if not held).
    Vectorised membership test: sorted codes ``u * d + k`` searched with ``searchsorted``.
    """
    n, d = data.n, data.d
    j = rng.integers(0, d, n)
    if data.keys.size == 0:
        return j, np.zeros(n, bool), np.zeros(n)
    code = data.user_ids() * d + data.keys
    order = np.argsort(code, kind="stable")
    sc = code[order]
    q = np.arange(n, dtype=np.int64) * d + j
    pos = np.minimum(np.searchsorted(sc, q), sc.size - 1)
    holds = sc[pos] == q
    val = np.where(holds, data.vals[order[pos]], 0.0)
    return j, holds, val
