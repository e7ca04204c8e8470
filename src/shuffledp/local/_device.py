"""Device selection and exact tensor kernels shared by the oracles' accelerator backend.

``device`` is ``'cpu'`` (the numpy path), ``'torch-cpu'`` (PyTorch on CPU tensors: the same code
as on a GPU, exercised in CI) or ``'cuda'`` / ``'cuda:N'``. Every kernel here is **integer**:
int64 tensors, ``index_add_`` / ``bincount`` of integers (exact in any order, so the atomics of a
GPU cannot change a result) and the add/subtract butterflies of a Walsh-Hadamard transform. The
callers keep every floating-point step on the host in numpy, after the integers come back, so
statistics *and* estimates are bit-identical to the numpy path.

Memory on the device is bounded by ``max_cells`` int64 cells per temporary (chunks of reports,
of transform rows or of items), plus the statistic itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.errors import ValidationError

__all__ = ["DEVICE_CELLS", "CPU_TENSOR_CELLS", "cell_budget", "resolve_device", "torch_module", "torch_device", "bincount_device", "fwht_device",
           "hash_on_device", "table_query_device", "row_hash_counts_add", "grouped_bit_sums_device"]

#: Default int64 cells per device temporary on a GPU (128 MiB).
DEVICE_CELLS = 1 << 24
#: Default on CPU tensors (8 MiB): PyTorch's CPU allocator returns large blocks to the system, so
#: every larger temporary pays its page faults again (measured: the HCMS query at d = 2^18 takes
#: 0.44 s with 2^18-2^20 cells per temporary and 5-6 s with 2^22-2^24 on this machine's 2 cores).
CPU_TENSOR_CELLS = 1 << 20


def cell_budget(device: str, max_cells: int | None = None) -> int:
    """``max_cells`` when given, else the default budget per temporary for ``device``."""
    if max_cells is not None:
        return max(1, int(max_cells))
    return CPU_TENSOR_CELLS if device == "torch-cpu" else DEVICE_CELLS


def torch_module() -> Any:
    """PyTorch, or a :class:`ValidationError` naming ``device`` that says how to install it."""
    try:
        import torch
    except ImportError as e:  # pragma: no cover - exercised only without torch
        raise ValidationError("device other than 'cpu' needs PyTorch: pip install 'shuffledp[gpu]' "
                              "(or torch>=2.2)", parameter="device") from e
    return torch


def resolve_device(device: str, fallback: bool = False) -> str:
    """Check a device name: ``'cpu'`` (numpy), ``'torch-cpu'`` (PyTorch on CPU tensors) or
    ``'cuda'`` / ``'cuda:N'`` (PyTorch on a GPU).

    A CUDA device that is not available raises a :class:`ValidationError` naming ``device``,
    unless ``fallback`` is true: then the numpy CPU path (``'cpu'``) is returned.
    """
    if not isinstance(device, str):
        raise ValidationError(f"device must be 'cpu', 'torch-cpu' or 'cuda[:N]', got {device!r}", parameter="device")
    name = device.strip().lower()
    if name == "cpu":
        return "cpu"
    if name == "torch-cpu":
        torch_module()
        return "torch-cpu"
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        try:
            torch = torch_module()
            ok = torch.cuda.is_available() and (name == "cuda" or int(name[5:]) < torch.cuda.device_count())
        except ValidationError:
            if fallback:
                return "cpu"
            raise
        if ok:
            return name
        if fallback:
            return "cpu"
        raise ValidationError(f"device {device!r} requested but no CUDA GPU is available to PyTorch "
                              "(torch.cuda.is_available() is False); use device='cpu', or allow the CPU "
                              "fallback (device_fallback=True, CLI --device-fallback)", parameter="device")
    raise ValidationError(f"device must be 'cpu', 'torch-cpu' or 'cuda[:N]', got {device!r}", parameter="device")


def torch_device(device: str) -> Any:
    """The ``torch.device`` of a resolved device name (``'torch-cpu'`` is PyTorch's ``cpu``)."""
    return torch_module().device("cpu" if device == "torch-cpu" else device)


def _tensor(torch: Any, a: np.ndarray, dev: Any) -> Any:
    """A host array on ``dev`` (read-only arrays, e.g. over an archive's buffers, are copied)."""
    a = np.ascontiguousarray(a)
    return torch.from_numpy(a if a.flags.writeable else a.copy()).to(dev)


def bincount_device(idx: Any, length: int, device: str, weights: Any = None,
                    max_cells: int | None = None) -> np.ndarray:
    """``np.bincount(idx, weights, minlength=length)`` for integer ``idx`` (and integer ``weights``) on
    ``device``: int64, exact. The entries travel in chunks of ``max_cells`` in their own dtype (an
    int16 subset report crosses the bus as 2 bytes) and are widened to int64 on the device."""
    torch = torch_module()
    dev = torch_device(device)
    flat = np.asarray(idx).reshape(-1)
    if flat.dtype.kind == "u" and flat.dtype.itemsize > 1:  # PyTorch < 2.3 has no uint16/32/64 tensors
        flat = flat.astype(np.int64)
    w = None if weights is None else np.asarray(weights).reshape(-1)
    out = torch.zeros(int(length), dtype=torch.int64, device=dev)
    step = cell_budget(device, max_cells)
    for lo in range(0, flat.size, step):  # chunks of entries
        ix = _tensor(torch, flat[lo:lo + step], dev).long()
        if w is None:
            out.index_add_(0, ix, torch.ones(1, dtype=torch.int64, device=dev).expand(ix.numel()))
        else:
            out.index_add_(0, ix, _tensor(torch, w[lo:lo + step], dev).long())
    return out.cpu().numpy()


def fwht_device(a: np.ndarray, device: str, max_cells: int | None = None) -> np.ndarray:
    """Unnormalised Walsh-Hadamard transform of every row of the int64 matrix ``a`` on ``device``:
    the integers of :func:`shuffledp.local.hadamard.fwht` (``axis=-1``), in chunks of rows of at
    most ``max_cells`` cells (at least one row)."""
    torch = torch_module()
    x = _tensor(torch, np.asarray(a, dtype=np.int64), torch_device(device))
    if x.device.type == "cpu":  # from_numpy shares the caller's memory: the butterflies work in place
        x = x.clone()
    return _fwht_rows(torch, x, cell_budget(device, max_cells)).cpu().numpy()


def _fwht_rows(torch: Any, x: Any, max_cells: int) -> Any:
    """In-place butterflies on the rows of an int64 tensor (chunks of rows); returns ``x``."""
    rows, K = x.shape
    if K < 1 or K & (K - 1):
        raise ValidationError(f"fwht needs a power-of-2 length, got {K}", parameter="a")
    per = max(1, int(max_cells) // max(1, K))
    for lo in range(0, rows, per):  # chunks of rows
        blk = x[lo:lo + per]
        r = blk.shape[0]
        h = 1
        while h < K:  # log2 K stages, each one pass over the chunk
            v = blk.view(r, K // (2 * h), 2, h)
            top = v[:, :, 0, :].clone()
            top.add_(v[:, :, 1, :])
            v[:, :, 1, :].neg_().add_(v[:, :, 0, :])  # bottom = x0 - x1
            v[:, :, 0, :].copy_(top)
            h *= 2
    return x


def hash_on_device(family: Any, device: str) -> Callable[[Any, Any], Any]:
    """``h_j(x)`` of a sketch's hash family as a function of int64 tensors on ``device`` (broadcasting):
    the tabulation family's tables (or an explicit table) are copied to the device once per call of
    the caller; another family is evaluated by numpy and copied."""
    from .sketch import ExplicitHashFamily, TabulationHashFamily

    torch = torch_module()
    dev = torch_device(device)
    if isinstance(family, TabulationHashFamily):
        flat = torch.from_numpy(family._flat.astype(np.int64)).to(dev)
        width = 1 << family.char_bits
        mask, chars, bits, m = width - 1, family.chars, family.char_bits, family.m

        def tab(j: Any, x: Any) -> Any:
            base = j * (chars * width)
            h = flat[base + ((x >> 0) & mask)]
            for i in range(1, chars):  # <= 4 characters, each a gather
                h = h + flat[base + (i * width) + ((x >> (i * bits)) & mask)]
            return torch.remainder(h, m)
        return tab
    if isinstance(family, ExplicitHashFamily):
        table = torch.from_numpy(family.table).to(dev)
        return lambda j, x: table[j, x]

    def other(j: Any, x: Any) -> Any:  # pragma: no cover - families outside this module
        return torch.from_numpy(np.asarray(family(j.cpu().numpy(), x.cpu().numpy()), dtype=np.int64)).to(dev)
    return other


def table_query_device(G: Any, family: Any, device: str, max_cells: int | None = None) -> np.ndarray:
    """``sum_l G[l, h_l(x)]`` for every item ``x`` of the family's domain, int64, on ``device``.

    ``G`` is a ``(k, m)`` integer matrix. Chunks of items
    keep the ``(k, items)`` hash and gather temporaries within ``max_cells``. The numpy path
    (:meth:`~shuffledp.local.sketch.HashFamily.query`) sums the same integers in float64; every
    partial sum there is an integer below ``2^53`` in magnitude whenever ``sum |G| < 2^53`` (the
    sketches: at most ``n``), so ``float64`` of this result is bit-identical to it.
    """
    torch = torch_module()
    dev = torch_device(device)
    Gt = _tensor(torch, np.asarray(G, dtype=np.int64), dev)
    k, m = Gt.shape
    h = hash_on_device(family, device)
    d = int(family.d)
    rows = torch.arange(k, dtype=torch.int64, device=dev)[:, None]
    flatG = Gt.reshape(-1)
    out = torch.empty(d, dtype=torch.int64, device=dev)
    per = max(1, cell_budget(device, max_cells) // max(1, k))
    for lo in range(0, d, per):  # chunks of items: (k, chunk) temporaries
        xs = torch.arange(lo, min(d, lo + per), dtype=torch.int64, device=dev)[None, :]
        out[lo:lo + xs.shape[1]] = flatG[rows * m + h(rows, xs)].sum(dim=0)
    return out.cpu().numpy()


def row_hash_counts_add(U: Any, h: Callable[[Any, Any], Any], xs: np.ndarray, split: np.ndarray, m: int,
                        max_cells: int | None = None) -> Any:
    """Add ``split[i, j]`` users at cell ``(j, h_j(xs[i]))`` of the flat ``(k m)`` int64 tensor ``U``
    (``h`` from :func:`hash_on_device`, on ``U``'s device); returns ``U``. Integer ``index_add_``:
    the numpy path's ``rint(bincount(weights=...))`` of the same integers (exact below ``2^53``).
    Items go in chunks of at most ``max_cells`` (item, hash index) cells."""
    torch = torch_module()
    dev = U.device
    k = split.shape[1]
    j = torch.arange(k, dtype=torch.int64, device=dev)[None, :]
    per = max(1, cell_budget("torch-cpu" if dev.type == "cpu" else "cuda", max_cells) // max(1, k))
    for lo in range(0, xs.shape[0], per):  # chunks of items
        x = _tensor(torch, np.asarray(xs[lo:lo + per], dtype=np.int64), dev)[:, None]
        cell = j * m + h(j, x)
        U.index_add_(0, cell.reshape(-1), _tensor(torch, np.asarray(split[lo:lo + per], dtype=np.int64), dev).reshape(-1))
    return U


def grouped_bit_sums_device(packed: np.ndarray, groups: np.ndarray, n_groups: int, n_bits: int, device: str,
                            max_cells: int | None = None) -> np.ndarray:
    """Ones per (group, bit column) of bit-packed rows on ``device``: the int64 ``(n_groups, n_bits)`` of
    :func:`shuffledp.local.sketch.grouped_bit_sums` (column ``c`` is bit ``c mod 8`` of byte ``c // 8``).

    The rows travel as their bytes, in chunks of at most ``max_cells`` (row, column) cells; each
    chunk is unpacked on the device and added to its groups' rows with ``index_add_`` (exact).
    """
    torch = torch_module()
    dev = torch_device(device)
    packed = np.asarray(packed)
    g = np.asarray(groups, dtype=np.int64)
    n, nb = packed.shape
    if n and (int(g.min()) < 0 or int(g.max()) >= n_groups):
        raise ValidationError(f"groups must lie in [0, {n_groups})", parameter="groups")
    out = torch.zeros((n_groups, n_bits), dtype=torch.int64, device=dev)
    shifts = torch.arange(8, dtype=torch.uint8, device=dev)
    per = max(1, min(cell_budget(device, max_cells) // max(1, nb * 8), (1 << 31) - 1))
    for lo in range(0, n, per):  # chunks of rows
        rows = _tensor(torch, packed[lo:lo + per], dev)
        bits = ((rows[:, :, None] >> shifts) & 1).reshape(rows.shape[0], nb * 8)[:, :n_bits]
        # int32 within a chunk (a count <= the chunk's rows < 2^31), int64 across chunks
        part = torch.zeros((n_groups, n_bits), dtype=torch.int32, device=dev)
        part.index_add_(0, _tensor(torch, g[lo:lo + per], dev), bits.to(torch.int32))
        out += part
    return out.cpu().numpy()
