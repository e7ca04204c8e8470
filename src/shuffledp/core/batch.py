"""Columnar batches: the one representation of local reports and protocol messages.

A batch is a ``dict`` mapping a column name to a numpy array whose first axis indexes rows (a
user's report, or a message; a multi-message protocol emits several rows per user). Columnar
batches are cheap to concatenate, permute, serialise and stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import ValidationError

__all__ = ["Columns", "n_rows", "concat_rows", "take_rows", "row_layout"]

Columns = dict[str, np.ndarray]


def _lengths(batch: Mapping[str, Any], parameter: str) -> int:
    """The common number of rows of ``batch``'s columns (0 for a batch without columns)."""
    if not isinstance(batch, Mapping):
        raise ValidationError(f"{parameter} must be a dict of column name -> array, got {type(batch).__name__}",
                              parameter=parameter)
    lengths = {}
    for key, col in batch.items():
        shape = np.shape(col)
        if len(shape) == 0:
            raise ValidationError(f"{parameter} column {key!r} must be an array with one entry per row, got a scalar",
                                  parameter=parameter)
        lengths[key] = int(shape[0])
    if len(set(lengths.values())) > 1:
        raise ValidationError(f"{parameter} columns differ in length: {lengths}", parameter=parameter)
    return next(iter(lengths.values())) if lengths else 0


def n_rows(batch: Columns, *, parameter: str = "batch") -> int:
    """Number of rows of a columnar batch (0 for a batch without columns).

    Raises :class:`ValidationError` naming ``parameter`` (the caller's name for the batch) when it
    is not a mapping of arrays or its columns disagree on the number of rows.
    """
    return _lengths(batch, parameter)


def concat_rows(parts: Sequence[Columns]) -> Columns:
    """Concatenate batches with the same columns along the row axis.

    Batches without columns (``{}``, e.g. no fake messages) are skipped; when nothing is left the
    result is ``{}``. Raises :class:`ValidationError` naming ``parts`` when ``parts`` is not a
    sequence of batches, when two batches have different columns, or when a batch's columns
    disagree on the number of rows.
    """
    if isinstance(parts, Mapping) or not isinstance(parts, Sequence):
        raise ValidationError(f"parts must be a list of batches, got {type(parts).__name__}", parameter="parts")
    for p in parts:
        _lengths(p, "parts")
    kept = [p for p in parts if p]
    if not kept:
        return {}
    keys = list(kept[0].keys())
    for p in kept[1:]:
        if set(p.keys()) != set(keys):
            raise ValidationError(f"batches have different columns: {sorted(keys)} vs {sorted(p.keys())}",
                                  parameter="parts")
    return {k: np.concatenate([np.asarray(p[k]) for p in kept], axis=0) for k in keys}


def take_rows(batch: Columns, idx: np.ndarray | slice, *, parameter: str = "batch") -> Columns:
    """Rows ``idx`` of every column (a permutation shuffles the batch; a slice cuts it).

    Raises :class:`ValidationError` naming ``parameter`` when the columns disagree on the number
    of rows (a row index would then pair different rows of different columns).
    """
    _lengths(batch, parameter)
    return {k: v[idx] for k, v in batch.items()}


def row_layout(batch: Columns, exclude: Sequence[str] = ()) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    """The layout of one row: ``(column, little-endian dtype, row shape)`` per column, sorted by
    name, leaving out the columns in ``exclude`` (e.g. a routing column that is not a message's)."""
    return tuple((k, np.asarray(v).dtype.newbyteorder("<").str, tuple(int(s) for s in np.shape(v)[1:]))
                 for k, v in sorted(batch.items()) if k not in exclude)

