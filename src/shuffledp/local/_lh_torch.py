"""PyTorch backend for local-hashing support counts (CPU tensors or a CUDA device).

The same discrete-log progression method as :mod:`shuffledp.local._lh_progressions`, written with
tensor operations so that it runs unchanged on CPU tensors (tested against numpy in CI) and on a
GPU. Every step is integer arithmetic on int64 tensors (``index_add_`` of integers is exact in any
order, so the atomics of a GPU cannot change the result): the counts are bit-identical to the
numpy path and to the direct oracle.

Memory on the device is bounded by ``max_cells`` int64 cells per temporary (chunks of reports for
the enumerated path, chunks of multiplier groups for the coverage path), plus the ``O(P)``
discrete-log tables and the ``O(n)`` reports.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ._device import DEVICE_CELLS, resolve_device, torch_module
from ._lh_progressions import _DENSE_FACTOR, MAX_TABLE_PRIME, log_tables

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

    group_cells = torch.zeros(P, dtype=torch.int64, device=dev).index_add_(0, a, sizes)
    dense = (group_cells > _DENSE_FACTOR * P)[a]
    if bool(dense.any()):
        _dense_groups(torch, counts, a[dense], j0[dense], sizes[dense], off[dense], logs2[:P], P, max_cells)
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


def _dense_groups(torch: Any, counts: Any, a: Any, j0: Any, sizes: Any, off: Any, logsP: Any, P: int,
                  max_cells: int) -> None:
    """Add the log-coordinate counts of heavy multiplier groups (coverage functions) to ``counts``."""
    ua, inv = torch.unique(a, return_inverse=True)
    group_off = torch.empty(ua.numel(), dtype=torch.int64, device=a.device)
    group_off[inv] = off
    order_idx = torch.argsort(inv, stable=True)
    inv_sorted = inv[order_idx]
    per = max(1, max_cells // (2 * P))
    width = 2 * P
    for glo in range(0, ua.numel(), per):  # chunks of multiplier groups
        ghi = min(ua.numel(), glo + per)
        m = ghi - glo
        bounds = torch.searchsorted(inv_sorted, torch.tensor([glo, ghi], device=a.device)).tolist()
        sel = order_idx[bounds[0]:bounds[1]]
        start = (inv[sel] - glo) * width + j0[sel]
        diff = torch.zeros(m * width, dtype=torch.int64, device=a.device)
        diff.index_add_(0, start, torch.ones_like(start))
        diff.index_add_(0, start + sizes[sel], -torch.ones_like(start))
        cover2 = diff.view(m, width).cumsum(dim=1)
        cover = cover2[:, :P] + cover2[:, P:]  # K(j): coverage of j and j + P
        pos = logsP[None, :] + group_off[glo:ghi, None]
        counts.index_add_(0, pos.reshape(-1), cover.reshape(-1))


def _writable(a: np.ndarray) -> np.ndarray:
    return a if a.flags.writeable else a.copy()

