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

Reports sharing the multiplier ``a`` share ``off``, and ``off`` determines ``a``. When the reports
whose offsets fall in a block of ``R`` consecutive offsets ``alpha0 .. alpha0 + R - 1`` would
enumerate more cells than a few passes over ``R x P`` cells cost, the block is counted *densely*:
row ``r`` holds the coverage function ``K_r(j) = #{u : off_u = alpha0 + r, j in [j0_u, j0_u + c_u)
mod P}`` (a run-length fill between the sorted interval ends), the rows are permuted into log
coordinates once, ``M[r, lam] = K_r(gamma^lam)``, and the block adds
``S[l] = sum_r M[r, (l - r) mod (P - 1)]`` at ``alpha0 + l``: the sum along the wrapped diagonals
of ``M``, read through a strided view of ``M`` (each row preceded by its last ``R`` entries), with
no scatter at all. Item ``0`` receives ``sum_r K_r(0)``. This adds exactly the multiset of
positions that enumeration adds (``K_r(j)`` reports of row ``r`` put ``+1`` at ``L(j) + alpha0 +
r``), so the result is the same integer vector; every operation is integer arithmetic (int32
coverage while ``n < 2^31``, int64 sums), so the counts are exact.

Cost: ``O(P)`` tables (built once per prime and cached), then
``sum over blocks of R offsets of min(n_B * P / g, kappa * R * P)`` cell operations (``n_B`` the
block's reports, ``kappa = _DENSE_RATIO``): at ``d = 65,536`` and ``g = 4`` about ``n * 16,384``
additions for ``n`` up to ``~2 * 10^5``, and at most ``~P^2`` streaming cells (no scatter) for any
larger ``n``, instead of ``n * 65,536`` hash evaluations (direct) or ``min(n, P)`` passes over
``P + d`` cells (grouped).
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["primitive_root", "log_tables", "support_counts_progressions", "progression_cost", "MAX_TABLE_PRIME"]

#: Largest prime for which the discrete-log tables are built (three int64 tables of ~P entries).
MAX_TABLE_PRIME = 1 << 23
#: Cost of one dense cell (coverage fill, log permutation and diagonal sum: ~3-4 ns on this machine)
#: over one enumerated cell (a scatter-add, ~2.5-3 ns): a block of offsets is counted densely when
#: its enumerated cells exceed this times its ``R P`` dense cells (plus a block's fixed cost).
_DENSE_RATIO = 0.7
#: A dense block's fixed cost (sorting its interval ends, Python overhead), in enumerated cells.
_BLOCK_OVERHEAD = 20_000
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
    """``c_y = #{w in [0, P) : w mod g = y}`` for each ``y`` in ``[0, g)`` (a table lookup for
    ``g <= 2^16``)."""
    if g <= 1 << 16:
        ys = np.arange(g, dtype=np.int64)
        return np.where(ys < prime, (prime - 1 - ys) // g + 1, 0)[y]
    return np.where(y < prime, (prime - 1 - y) // g + 1, 0)


def progression_cost(n: int, prime: int, g: int) -> float:
    """Estimated time of :func:`support_counts_progressions` for ``n`` reports, in units of one cell
    of the grouped method (one gathered ``(group, item)`` pair, 6-11 ns on a quiet 2-core machine,
    ~30 ns loaded): an enumerated cell costs ~0.3 of it (a scatter-add), a dense block of ``R``
    offsets ``0.3 * _DENSE_RATIO * R P``, a report ~12 (its per-report arithmetic: 119-165 ns
    measured at d = 1024 and 16,384), plus the tables (reports spread evenly over the offsets)."""
    per_report = math.ceil(prime / g) if g < prime else 1
    order = max(1, prime - 1)
    rows = dense_block_rows(prime)
    blocks = max(1, min(-(-order // rows), n))
    enumerated = (n / blocks) * per_report
    per_block = min(enumerated, _DENSE_RATIO * rows * prime + _BLOCK_OVERHEAD)
    return 2.0 * prime + _REPORT_COST * n + 0.3 * blocks * per_block


def dense_block_rows(prime: int) -> int:
    """Offsets per dense block: about ``2^20`` cells per block (the temporaries stay in the cache
    at ``P = 65,537``), at least 4 and at most ``P - 1``."""
    return max(1, min(prime - 1, max(4, (1 << 20) // prime)))


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
    j0 = y - b
    if g < P:  # y - b in (-P, P): one conditional add instead of a modulo
        np.add(j0, P, out=j0, where=j0 < 0)
    else:
        j0 %= P
    j0 *= unit_inv
    j0 %= P
    off = int(logs[unit]) - logs[a]  # in (-(P - 1), P - 1)
    np.add(off, order, out=off, where=off < 0)
    # log-coordinate counts: [0, 2 order) folded mod order, sentinel [2 order, 3 order) is item 0
    span = 3 * order
    counts = np.zeros(span, dtype=np.int64)
    # log table over j in [0, 2P) (cyclic intervals need no wrap), j = 0 mod P -> sentinel
    logs2 = np.concatenate([logs, logs])
    logs2[logs2 < 0] = 2 * order

    # split the reports into dense blocks of offsets and enumerated ones
    rows = dense_block_rows(P)
    blk = off // rows
    block_cells = np.bincount(blk, weights=sizes, minlength=-(-order // rows))
    dense_block = block_cells > _DENSE_RATIO * rows * P + _BLOCK_OVERHEAD
    dense = dense_block[blk] & (sizes > 0)
    if dense.any():
        sel = slice(None) if dense.all() else dense  # all dense: views, no copies
        zero, logcounts = _dense_blocks(j0[sel], sizes[sel], off[sel], blk[sel], P, rows, a.size)
        counts[:order] += logcounts
        counts[2 * order] += zero
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


def _dense_blocks(j0: np.ndarray, sizes: np.ndarray, off: np.ndarray, blk: np.ndarray, P: int, rows: int,
                  n_total: int) -> tuple[int, np.ndarray]:
    """``(count of item 0, log-coordinate counts mod P - 1)`` of the given reports, counted by dense
    blocks of ``rows`` consecutive offsets (``blk = off // rows``): coverage rows, log permutation,
    wrapped diagonal sums."""
    order = P - 1
    powers, _ = log_tables(P)
    dtype = np.int32 if n_total < (1 << 31) else np.int64
    logcounts = np.zeros(order, dtype=np.int64)
    zero = 0
    n_blocks = -(-order // rows)
    # reports grouped by block: a stable sort of small integers is a radix sort (O(n)) in numpy
    idx = np.argsort(blk.astype(np.int16) if n_blocks < (1 << 15) else blk, kind="stable")
    j0, sizes, off = j0[idx], sizes[idx], off[idx]
    per_block = np.bincount(blk, minlength=n_blocks)
    present = np.flatnonzero(per_block)
    ends = np.cumsum(per_block)[present]
    bounds = np.concatenate([[0], ends])
    perms: dict[int, np.ndarray] = {}
    for k, lo, hi in zip(present.tolist(), bounds[:-1].tolist(), bounds[1:].tolist()):
        a0 = k * rows
        m = min(rows, order - a0)
        cover = _coverage_rows(off[lo:hi] - a0, j0[lo:hi], sizes[lo:hi], m, P, dtype)
        zero += int(cover[:, 0].sum(dtype=np.int64))
        if m not in perms:  # column c holds j = gamma^((c - m) mod (P - 1)): each row preceded by its last m
            perms[m] = powers[(np.arange(order + m) - m) % order]
        shifted = np.take(cover, perms[m], axis=1).ravel()
        # diag[r, l] = shifted[m + r (order + m - 1) + l] = K_r(gamma^((l - r) mod (P - 1)))
        diag = np.lib.stride_tricks.as_strided(shifted[m:], shape=(m, order),
                                               strides=((order + m - 1) * shifted.itemsize, shifted.itemsize),
                                               writeable=False)
        total = diag.sum(axis=0, dtype=np.int64)  # S[l]: position a0 + l (mod P - 1)
        logcounts[a0:] += total[:order - a0]
        logcounts[:a0] += total[order - a0:]
    return zero, logcounts


def _coverage_rows(r: np.ndarray, start: np.ndarray, size: np.ndarray, m: int, P: int, dtype: type) -> np.ndarray:
    """``K[r, j] = #{u in row r : j in [start_u, start_u + size_u) mod P}`` as an ``(m, P)`` array.

    The interval ends (a wrapping interval is split in two) live in the flattened coordinates
    ``r P + j``; ``K`` is their running count (every row's ends cancel, so the count never carries
    into the next row). Few ends: sorted, and the count filled between consecutive ends (run
    lengths). Many ends (more than ``m P / 16``): counted per position and prefix-summed, which
    costs ``m P`` cells instead of sorting ``~2 n`` ends."""
    end = start + size
    wrap = end > P
    base = r * P
    ups = np.concatenate([base + start, base[wrap]])
    downs = np.concatenate([base + np.minimum(end, P), base[wrap] + end[wrap] - P])
    cells = m * P
    if 16 * ups.size > cells:
        marks = np.bincount(ups, minlength=cells + 1) - np.bincount(downs, minlength=cells + 1)
        return np.cumsum(marks[:cells], dtype=dtype).reshape(m, P)
    pos = np.concatenate([ups, downs])
    step = np.concatenate([np.ones(ups.size, dtype=np.int64), np.full(downs.size, -1, dtype=np.int64)])
    order = np.argsort(pos, kind="stable")
    level = np.concatenate([[0], np.cumsum(step[order])]).astype(dtype)
    lengths = np.diff(np.concatenate([[0], pos[order], [cells]]))
    return np.repeat(level, lengths).reshape(m, P)
