"""Exact support counting for affine local hashing by discrete-log progressions (large domains).

The hash is ``H_{a,b}(x) = ((a x + b) mod P) mod g`` with ``P`` prime, ``a`` in ``[1, P)``, ``b`` in
``[0, P)``. A report ``(a, b, y)`` (``0 <= y < g``) *supports* the item ``i`` iff ``H_{a,b}(i) = y``.

Theorem (what this module computes)
-----------------------------------
Let ``R_y = {w in [0, P) : w mod g = y} = {y + t g : 0 <= t < c_y}`` with
``c_y = max(0, ceil((P - y) / g))``, and let ``s = g`` if ``g < P`` else ``s = 1`` (so ``s`` is a
unit of the field ``Z_P``). For a report put ``j0 = (y - b) s^{-1} mod P``. Then::

    {i in [0, P) : H_{a,b}(i) = y} = {a^{-1} s (j0 + t) mod P : 0 <= t < c_y},

and the ``c_y`` elements on the right are distinct.

Proof. ``H(i) = y`` iff ``(a i + b) mod P`` lies in ``R_y``, i.e. iff ``a i + b = y + t g (mod P)``
for some ``t < c_y`` (``t`` is unique because the ``y + t g`` are distinct integers in ``[0, P)``).
If ``g < P`` then ``y - b + t g = g (j0 + t)`` (mod P), so ``i = a^{-1} g (j0 + t)``. If ``g >= P``
then ``c_y <= 1`` (since ``y + g >= P``), only ``t = 0`` occurs, and ``i = a^{-1} (y - b) = a^{-1}
j0``. The map ``t -> a^{-1} s (j0 + t)`` is injective on ``t < c_y <= P`` because ``a^{-1} s`` is a
unit. QED.

Discrete logarithms turn the multiplication into an addition. Let ``gamma`` be a primitive root
mod ``P`` and ``L(x)`` (``x != 0``) the exponent with ``gamma^L(x) = x``, taken in ``[0, P - 1)``.
For ``j0 + t != 0 (mod P)`` the supported item is ``i = gamma^k`` with

    k = (L(s) - L(a) + L(j0 + t)) mod (P - 1),

and for ``j0 + t = 0 (mod P)`` it is ``i = 0``. So one report adds ``+1`` at the positions
``L(j0 + t) + off`` (``off = (L(s) - L(a)) mod (P - 1)``), ``t < c_y``: a *contiguous* slice of the
precomputed table ``L`` shifted by a per-report constant. No product or modulo is evaluated per
(report, item) pair; the counts in log coordinates are accumulated with ``bincount`` over
``[0, 2 (P - 1))`` (the fold ``k`` and ``k + P - 1`` is the reduction mod ``P - 1``) plus a
sentinel range for ``i = 0``, and mapped back to items by the table ``L`` once.

Reports sharing the multiplier ``a`` share ``off``. When a multiplier group holds many reports
(``sum of c_y`` over the group exceeds a few times ``P``), its reports are first summed into the
coverage function ``K(j) = #{u in group : j in [j0_u, j0_u + c_u) mod P}`` with a difference array
and a prefix sum (four marks per report), and ``K`` is added at ``L(j) + off`` for every ``j``
(``P`` cells instead of ``sum c_y``). Both paths add exactly the same multiset of positions, so
the result is the same integer vector; every operation is int64 integer arithmetic (no
floating point anywhere), so the counts are exact.

Cost: ``O(P)`` tables (built once per prime and cached), then
``sum over multiplier groups of min(n_a * P / g, kappa * P)`` cell operations; at ``d = 65,536``
and ``g = 4`` that is about ``n * 16,384`` additions for ``n`` up to ``~10^5`` instead of
``n * 65,536`` hash evaluations (direct) or ``min(n, P)`` passes over ``P + d`` cells (grouped).
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["primitive_root", "log_tables", "support_counts_progressions", "progression_cost", "MAX_TABLE_PRIME"]

#: Largest prime for which the discrete-log tables are built (three int64 tables of ~P entries).
MAX_TABLE_PRIME = 1 << 23
#: A multiplier group takes the dense (difference-array) path once its enumerated cells exceed
#: this many times ``P`` (the dense path costs a few passes over ``P`` cells per group).
_DENSE_FACTOR = 2.5
#: Cost of one report's own arithmetic in :func:`progression_cost`, in grouped-method cells. It was 3,
#: which made OLH at d = 1024 take this path for chunks of 2^18 reports, 1.8x slower than the grouped
#: method (0.046 s vs 0.026 s per chunk; a 10^6-report aggregation 0.11 -> 0.19 s).
_REPORT_COST = 12.0
#: Cells per chunk of reports or groups (the temporaries stay in the L2 cache).
_SCATTER_CELLS = 1 << 18


def _prime_factors(m: int) -> list[int]:
    out, f = [], 2
    while f * f <= m:
        if m % f == 0:
            out.append(f)
            while m % f == 0:
                m //= f
        f += 1 if f == 2 else 2
    if m > 1:
        out.append(m)
    return out


def primitive_root(prime: int) -> int:
    """The smallest primitive root modulo the prime ``prime`` (a generator of ``Z_P^*``)."""
    if prime == 2:
        return 1
    qs = _prime_factors(prime - 1)
    for cand in range(2, prime):
        if all(pow(cand, (prime - 1) // q, prime) != 1 for q in qs):
            return cand
    raise ValueError(f"prime must be a prime, got {prime}")  # pragma: no cover - unreachable for primes


@functools.lru_cache(maxsize=4)
def log_tables(prime: int) -> tuple[np.ndarray, np.ndarray]:
    """``(powers, logs)`` for the prime ``P``: ``powers[k] = gamma^k mod P`` for ``k < P - 1`` and
    ``logs[x] = L(x)`` for ``x`` in ``[1, P)`` (``logs[0] = -1``), ``gamma = primitive_root(P)``.

    Built by doubling (``powers[m:2m] = powers[:m] * gamma^m mod P``), O(P) vectorized work.
    """
    P = int(prime)
    order = P - 1
    gamma = primitive_root(P)
    powers = np.empty(order, dtype=np.int64)
    powers[0] = 1
    m = 1
    while m < order:
        step = min(m, order - m)
        powers[m:m + step] = powers[:step] * pow(gamma, m, P) % P
        m += step
    logs = np.full(P, -1, dtype=np.int64)
    logs[powers] = np.arange(order, dtype=np.int64)
    powers.setflags(write=False)
    logs.setflags(write=False)
    return powers, logs


def _support_sizes(prime: int, g: int, y: np.ndarray) -> np.ndarray:
    """``c_y = #{w in [0, P) : w mod g = y}`` for each ``y`` in ``[0, g)``."""
    return np.where(y < prime, (prime - 1 - y) // g + 1, 0)


def progression_cost(n: int, prime: int, g: int) -> float:
    """Estimated time of :func:`support_counts_progressions` for ``n`` reports, in units of one cell
    of the grouped method (one gathered ``(group, item)`` pair, 6-11 ns on a quiet 2-core machine,
    ~30 ns loaded): an enumerated cell costs ~0.3 of it (a scatter-add), a dense group ~0.75 per
    field element, a report ~12 (its per-report arithmetic: 119-165 ns measured at d = 1024 and
    16,384), plus the tables (reports spread evenly over the multipliers)."""
    per_report = math.ceil(prime / g) if g < prime else 1
    groups = max(1, min(n, prime - 1))
    per_group = min(0.3 * (n / groups) * per_report, 0.75 * prime)
    return 2.0 * prime + _REPORT_COST * n + groups * per_group


def support_counts_progressions(a: np.ndarray, b: np.ndarray, y: np.ndarray, prime: int, g: int,
                                d: int) -> np.ndarray:
    """Support counts ``C_i = #{u : ((a_u i + b_u) mod P) mod g = y_u}`` for ``i < d`` (int64).

    ``a`` in ``[1, P)``, ``b`` in ``[0, P)``, ``y`` in ``[0, g)`` (int64 arrays of one length),
    ``d <= P <= MAX_TABLE_PRIME``. Exact (see the module docstring for the proof).
    """
    P, order = int(prime), int(prime) - 1
    if P > MAX_TABLE_PRIME:
        raise ValueError(f"prime must be <= {MAX_TABLE_PRIME} for the table method, got {P}")
    if P == 2:  # Z_2^* is trivial: evaluate directly (two items at most)
        items = np.arange(d, dtype=np.int64)
        return ((((a[:, None] * items[None, :]) + b[:, None]) % P) % g == y[:, None]).sum(axis=0).astype(np.int64)
    powers, logs = log_tables(P)
    unit = g if g < P else 1
    unit_inv = pow(unit, P - 2, P)
    sizes = _support_sizes(P, g, y)
    j0 = (y - b) % P * unit_inv % P
    off = (int(logs[unit]) - logs[a]) % order
    # log-coordinate counts: [0, 2 order) folded mod order, sentinel [2 order, 3 order) is item 0
    span = 3 * order
    counts = np.zeros(span, dtype=np.int64)
    # log table over j in [0, 2P) (cyclic intervals need no wrap), j = 0 mod P -> sentinel
    logs2 = np.concatenate([logs, logs])
    logs2[logs2 < 0] = 2 * order

    # split the reports into dense multiplier groups and enumerated ones
    group_cells = np.bincount(a, weights=sizes, minlength=P)
    dense_group = group_cells > _DENSE_FACTOR * P
    dense = dense_group[a]
    if dense.any():
        counts += _dense_groups(a[dense], j0[dense], sizes[dense], off[dense], logs2, P, span)
    sparse = ~dense
    # enumerated reports: j = 0 mod P reads L = 0 (lands at off); those hits are moved to item 0
    # below, so the scatter target is [0, 2 order) only (it stays in the L2 cache longer)
    logs2z = np.where(logs2 == 2 * order, 0, logs2)
    near = np.zeros(2 * order, dtype=np.int64)
    for c in np.unique(sizes[sparse]):  # at most two distinct support sizes
        c = int(c)
        if c == 0:
            continue
        sel = sparse & (sizes == c)
        j0c, offc = j0[sel], off[sel]
        windows = np.lib.stride_tricks.sliding_window_view(logs2z, c)
        step = max(1, _SCATTER_CELLS // c)
        for lo in range(0, j0c.size, step):  # cache-sized chunks of reports
            hi = min(j0c.size, lo + step)
            block = windows[j0c[lo:hi]]  # row u: L(j0_u + t), t < c (a copy of contiguous slices)
            block += offc[lo:hi, None]
            np.add.at(near, block.ravel(), 1)
        hits = (P - j0c) % P < c  # t = -j0 mod P < c: the report supports item 0 once
        near -= np.bincount(offc[hits], minlength=2 * order)
        counts[2 * order] += int(hits.sum())
    counts[:2 * order] += near
    folded = counts[:order] + counts[order:2 * order]
    out = np.empty(d, dtype=np.int64)
    out[0] = counts[2 * order:].sum()
    out[1:] = folded[logs[1:d]]
    return out


def _dense_groups(a: np.ndarray, j0: np.ndarray, sizes: np.ndarray, off: np.ndarray, logs2: np.ndarray,
                  P: int, span: int) -> np.ndarray:
    """Log-coordinate counts of reports in heavy multiplier groups, via coverage functions."""
    ua, inv = np.unique(a, return_inverse=True)
    group_off = np.empty(ua.size, dtype=np.int64)
    group_off[inv] = off
    per = max(1, _SCATTER_CELLS // (2 * P))  # cache-sized chunks of groups
    order_idx = np.argsort(inv, kind="stable")
    inv_sorted = inv[order_idx]
    counts = np.zeros(span, dtype=np.int64)
    logsP = logs2[:P]
    for glo in range(0, ua.size, per):  # chunks of multiplier groups
        ghi = min(ua.size, glo + per)
        m = ghi - glo
        lo, hi = np.searchsorted(inv_sorted, [glo, ghi])
        sel = order_idx[lo:hi]
        base = (inv[sel] - glo) * (2 * P)
        start = base + j0[sel]
        diff = np.bincount(start, minlength=m * 2 * P) - np.bincount(start + sizes[sel], minlength=m * 2 * P)
        cover2 = diff.reshape(m, 2 * P).cumsum(axis=1)
        cover = cover2[:, :P] + cover2[:, P:]  # K(j) = coverage of j and j + P
        pos = logsP[None, :] + group_off[glo:ghi, None]
        np.add.at(counts, pos.ravel(), cover.ravel())
    return counts
