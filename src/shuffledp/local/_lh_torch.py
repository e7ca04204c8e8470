"""PyTorch backend for local-hashing support counts (CPU tensors or a CUDA device).

The same discrete-log progression method as :mod:`shuffledp.local._lh_progressions`, written with
tensor operations so that it runs unchanged on CPU tensors (tested against numpy in CI) and on a
GPU. Every step is integer arithmetic on int64 tensors (``index_add_`` of integers is exact in any
order, so the atomics of a GPU cannot change the result): the counts are bit-identical to the
numpy path and to the direct oracle.

Memory on the device is bounded by ``max_cells`` int64 cells per temporary (chunks of reports for
the enumerated path, blocks of offsets for the coverage path), plus the ``O(P)``
discrete-log tables and the ``O(n)`` reports.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ._device import DEVICE_CELLS, resolve_device, torch_module
from . import _lh_progressions as _lp
from ._lh_progressions import MAX_TABLE_PRIME, log_tables

__all__ = ["resolve_device", "support_counts_torch", "DEVICE_CELLS"]

def support_counts_torch(seeds: np.ndarray, y: np.ndarray, prime: int, g: int, d: int, device: str = "torch-cpu",
                         max_cells: int = DEVICE_CELLS) -> np.ndarray:
    """Support counts ``C_i = #{u : ((a_u i + b_u) mod P) mod g = y_u}``, ``i < d``, with PyTorch.

    ``seeds`` are the reports' seeds (``a = s // P + 1``, ``b = s % P``), ``y`` their buckets;
    ``device`` is ``'torch-cpu'`` or a CUDA device name. Returns an int64 numpy array identical to
    :meth:`~shuffledp.local.hashing.LocalHashing.support_counts_direct`.
    """
    torch = torch_module()
    P, order = int(prime), int(prime) - 1
    if P > MAX_TABLE_PRIME or P < 3:
        raise ValidationError(f"prime must be in [3, {MAX_TABLE_PRIME}] for the tensor backend, got {P}",
                              parameter="prime")
    dev = torch.device("cpu" if device == "torch-cpu" else device)
    max_cells = max(int(max_cells), 4 * P)
    powers_np, logs_np = log_tables(P)
    # read-only inputs (e.g. arrays over an archive's buffers) are copied: torch tensors are writable
    s = torch.as_tensor(_writable(np.asarray(seeds).astype(np.int64, copy=False)), device=dev)
    yt = torch.as_tensor(_writable(np.asarray(y).astype(np.int64, copy=False)), device=dev)
    a = torch.div(s, P, rounding_mode="floor") + 1
    b = s - (a - 1) * P
    unit = g if g < P else 1
    unit_inv = pow(unit, P - 2, P)
    logs = torch.from_numpy(np.array(logs_np)).to(dev)
    sizes = torch.where(yt < P, torch.div(P - 1 - yt, g, rounding_mode="floor") + 1, torch.zeros_like(yt))
    j0 = torch.remainder(yt - b, P) * unit_inv % P
    off = torch.remainder(int(logs_np[unit]) - logs[a], order)
    logs2 = torch.cat([logs, logs])
    logs2[logs2 < 0] = 2 * order  # j = 0 mod P: sentinel range [2 order, 3 order) is item 0
    span = 3 * order
    counts = torch.zeros(span, dtype=torch.int64, device=dev)

    # the numpy path's split: blocks of consecutive offsets counted densely, the rest enumerated
    # offsets per dense block: cache-sized on CPU tensors; on a GPU as many as the cell budget allows
    # (a block costs a dozen kernel launches, and its passes stream through device memory)
    rows = max(1, min(_lp.dense_block_rows(P) if dev.type == "cpu" else order, max_cells // (P + 1)))
    blk = torch.div(off, rows, rounding_mode="floor")
    n_blocks = -(-order // rows)
    block_cells = torch.zeros(n_blocks, dtype=torch.int64, device=dev).index_add_(0, blk, sizes)
    dense = (block_cells > _lp._DENSE_RATIO * rows * P + _lp._BLOCK_OVERHEAD)[blk] & (sizes > 0)
    if bool(dense.any()):
        powers = torch.from_numpy(np.array(powers_np)).to(dev)
        _dense_blocks(torch, counts, j0[dense], sizes[dense], off[dense], blk[dense], powers, P, rows,
                      int(s.numel()))
    sparse = ~dense
    for c in torch.unique(sizes[sparse]).tolist():  # at most two distinct support sizes
        if c == 0:
            continue
        sel = sparse & (sizes == c)
        j0c, offc = j0[sel], off[sel]
        ramp = torch.arange(c, dtype=torch.int64, device=dev)
        step = max(1, min(j0c.numel(), max_cells // c))
        one = torch.ones(1, dtype=torch.int64, device=dev).expand(step * c)
        where = torch.empty((step, c), dtype=torch.int64, device=dev)  # buffers reused by every chunk
        block = torch.empty(step * c, dtype=torch.int64, device=dev)
        for lo in range(0, j0c.numel(), step):  # chunks of reports
            k = min(step, j0c.numel() - lo)
            # row u: L(j0_u + t) + off_u, t < c (a flat gather; index_add_ of ones is exact)
            torch.add(j0c[lo:lo + k, None], ramp, out=where[:k])
            got = block[:k * c]
            torch.index_select(logs2, 0, where[:k].view(-1), out=got)
            got.view(k, c).add_(offc[lo:lo + k, None])
            counts.index_add_(0, got, one[:k * c])
    folded = counts[:order] + counts[order:2 * order]
    out = torch.empty(d, dtype=torch.int64, device=dev)
    out[0] = counts[2 * order:].sum()
    out[1:] = folded[logs[1:d]]
    return out.cpu().numpy()


def _dense_blocks(torch: Any, counts: Any, j0: Any, sizes: Any, off: Any, blk: Any, powers: Any, P: int,
                  rows: int, n_total: int) -> None:
    """Add the log-coordinate counts (and item 0's) of the reports in dense blocks of ``rows``
    consecutive offsets to ``counts``: coverage rows, log permutation, wrapped diagonal sums, as
    :func:`shuffledp.local._lh_progressions._dense_blocks` (no scatter: no atomics on a GPU);
    ``blk = off // rows``."""
    order = P - 1
    dev = j0.device
    dtype = torch.int32 if n_total < (1 << 31) else torch.int64
    idx = torch.argsort(blk, stable=True)  # reports grouped by block, permuted once
    blk, j0, sizes, off = blk[idx], j0[idx], sizes[idx], off[idx]
    present, per_block = torch.unique_consecutive(blk, return_counts=True)
    ends = torch.cumsum(per_block, 0).tolist()
    perms: dict[int, Any] = {}
    lo = 0
    for k, hi in zip(present.tolist(), ends):
        a0 = k * rows
        m = min(rows, order - a0)
        cover = _coverage_rows(torch, off[lo:hi] - a0, j0[lo:hi], sizes[lo:hi], m, P, dtype)
        lo = hi
        counts[2 * order] += cover[:, 0].sum(dtype=torch.int64)
        if m not in perms:
            perms[m] = powers[torch.remainder(torch.arange(order + m, dtype=torch.int64, device=dev) - m, order)]
        shifted = torch.index_select(cover, 1, perms[m]).reshape(-1)
        diag = torch.as_strided(shifted, (m, order), (order + m - 1, 1), m)
        total = diag.sum(dim=0, dtype=torch.int64)
        counts[a0:order] += total[:order - a0]
        counts[:a0] += total[order - a0:]


def _coverage_rows(torch: Any, r: Any, start: Any, size: Any, m: int, P: int, dtype: Any) -> Any:
    """``K[r, j]`` (see the numpy twin): the running count of the interval ends in flat coordinates,
    by a run-length fill between the sorted ends, or (many ends) a count per position and a
    prefix sum."""
    end = start + size
    wrap = end > P
    base = r * P
    ups = torch.cat([base + start, base[wrap]])
    downs = torch.cat([base + torch.clamp(end, max=P), base[wrap] + end[wrap] - P])
    cells = m * P
    if 16 * ups.numel() > cells:
        marks = torch.bincount(ups, minlength=cells + 1) - torch.bincount(downs, minlength=cells + 1)
        return torch.cumsum(marks[:cells], 0).to(dtype).view(m, P)
    pos = torch.cat([ups, downs])
    step = torch.ones(pos.numel(), dtype=torch.int64, device=pos.device)
    step[ups.numel():] = -1
    pos_sorted, order = torch.sort(pos, stable=True)
    level = torch.cat([torch.zeros(1, dtype=torch.int64, device=pos.device), torch.cumsum(step[order], 0)]).to(dtype)
    edges = torch.cat([torch.zeros(1, dtype=torch.int64, device=pos.device), pos_sorted,
                       torch.full((1,), cells, dtype=torch.int64, device=pos.device)])
    return torch.repeat_interleave(level, torch.diff(edges), output_size=cells).view(m, P)


def _writable(a: np.ndarray) -> np.ndarray:
    return a if a.flags.writeable else a.copy()

