"""Categorical domains: labels <-> the indices ``0 .. d-1`` the mechanisms work on.

Every frequency oracle and histogram protocol takes values in ``[0, d)``. A :class:`Domain` maps
the labels people have (``"chrome"``, ``"firefox"``; a pandas Series; a pyarrow array) to those
indices and back, and an :class:`~shuffledp.core.Estimate` built with it carries the labels::

    dom = Domain(["chrome", "firefox", "safari", "other"])
    idx = dom.encode(["safari", "chrome", "chrome"])        # array([2, 0, 0])
    est = dom.label(oracle.estimate(oracle.aggregate(oracle.randomize(idx, rng)), 3))
    est.by_label()["chrome"]

**Fix the domain in advance.** The domain is part of the mechanism: the guarantee covers the
reports, not the choice of ``d`` or of the labels. :meth:`Domain.from_data` infers the labels
from the data, which discloses them (a label held by a single user appears in the domain and in
every release, with no noise at all); it warns with :class:`DomainInferenceWarning` and is meant
for exploration on public or synthetic data. Prefer an explicit list.

Encoding is vectorized: for numpy arrays of numbers or fixed-width strings the distinct values are
found with :func:`numpy.unique` (``O(n log n)`` in C) and only those are looked up; Python objects
(lists of strings, pandas and pyarrow string columns) take one dict lookup each (about 0.1 s per
million); a value outside the domain is a
:class:`~shuffledp.core.errors.ValidationError` naming the parameter and the unknown labels.
pandas and pyarrow inputs are accepted when those libraries are installed (neither is imported
by this module unless such an input is passed).
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from .errors import ValidationError

__all__ = ["Domain", "DomainInferenceWarning", "as_label_array", "randomize_labels"]


class DomainInferenceWarning(UserWarning):
    """The domain was inferred from the data, which discloses the labels present in it."""


def as_label_array(values: Any, parameter: str = "values") -> np.ndarray:
    """A 1-D numpy array of the labels in ``values``.

    Accepts a list or tuple, a 1-D numpy array, a pandas Series / Index / Categorical, and a
    pyarrow Array / ChunkedArray (dictionary-encoded included). Missing values (None, NaN, pandas
    NA) stay as they are and are refused later as unknown labels unless the domain contains them.
    """
    mod = type(values).__module__.split(".")[0]
    if mod == "pyarrow":
        if hasattr(values, "combine_chunks"):  # ChunkedArray
            values = values.combine_chunks()
        if hasattr(values, "dictionary_decode") and getattr(values.type, "value_type", None) is not None:
            values = values.dictionary_decode()
        values = values.to_numpy(zero_copy_only=False)
    elif mod == "pandas":
        values = np.asarray(values.to_numpy() if hasattr(values, "to_numpy") else values, dtype=object)
    elif isinstance(values, (list, tuple)):
        if any(isinstance(v, (list, tuple, dict, set, np.ndarray)) for v in values[:1]):
            raise ValidationError(f"{parameter} must be a 1-D sequence of labels, got nested sequences",
                                  parameter=parameter)
        values = np.asarray(values) if _plain_numbers(values) else _object_array(values)
    elif isinstance(values, (str, bytes)) or np.ndim(values) == 0:
        raise ValidationError(f"{parameter} must be a 1-D sequence of labels (one per user), got a single "
                              f"{type(values).__name__}", parameter=parameter)
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValidationError(f"{parameter} must be a 1-D sequence of labels, got shape {arr.shape}",
                              parameter=parameter)
    return arr


def _plain_numbers(values: Sequence) -> bool:
    """True when every item is a Python int (not bool) or every item is a float: numpy stores
    them exactly. Strings stay Python objects (a numpy str array drops trailing NUL characters,
    so "a\\x00" would become "a"), and so do mixes (numpy would turn 1 into "1")."""
    kinds = {type(v) for v in values}
    return kinds == {int} or kinds == {float}


def _object_array(values: Sequence) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def _unique(arr: np.ndarray) -> tuple[list, np.ndarray]:
    """Distinct values of ``arr`` (as Python objects) and the inverse index of each element."""
    try:
        uniq, inv = np.unique(arr, return_inverse=True)
        return uniq.tolist(), inv.reshape(-1)
    except TypeError:  # unorderable mix (e.g. None and str): first-occurrence order
        seen: dict[Any, int] = {}
        inv = np.fromiter((seen.setdefault(_key(v), len(seen)) for v in arr.tolist()), dtype=np.int64,
                          count=arr.shape[0])
        return list(seen), inv


def _key(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


class Domain:
    """An ordered, finite set of distinct hashable labels; label ``i`` is index ``i``.

    Parameters
    ----------
    labels : iterable of hashable
        The labels, in index order; at least 2, all distinct (``Domain(range(d))`` is the plain
        integer domain).
    """

    __slots__ = ("_labels", "_index")

    def __init__(self, labels: Iterable[Hashable]) -> None:
        if isinstance(labels, (str, bytes)):
            raise ValidationError("labels must be a sequence of labels, got a single string", parameter="labels")
        try:
            labs = tuple(_key(v) for v in as_label_array(list(labels), "labels").tolist())
        except TypeError as e:
            raise ValidationError(f"labels must be an iterable of hashable labels: {e}", parameter="labels") from e
        if len(labs) < 2:
            raise ValidationError(f"labels must hold at least 2 labels, got {len(labs)}", parameter="labels")
        try:
            index = {lab: i for i, lab in enumerate(labs)}
        except TypeError as e:
            raise ValidationError(f"labels must be hashable: {e}", parameter="labels") from e
        if len(index) != len(labs):
            dup = sorted({repr(lab) for lab in labs if labs.count(lab) > 1})[:5]
            raise ValidationError(f"labels must be distinct; repeated: {', '.join(dup)}", parameter="labels")
        self._labels = labs
        self._index = index

    @classmethod
    def from_data(cls, values: Any, *, parameter: str = "values") -> "Domain":
        """The sorted distinct labels of ``values`` (first-occurrence order if they cannot be sorted).

        Warns with :class:`DomainInferenceWarning`: a domain read off the data discloses which
        labels occur (a rare label reveals that some user holds it) and is not covered by any
        differential privacy guarantee. Use it on public or synthetic data; in production pass the
        labels explicitly.
        """
        warnings.warn("Domain.from_data infers the domain from the data: the labels it contains are "
                      "disclosed without any privacy guarantee (a label held by one user reveals that "
                      "user). Pass Domain([...]) with labels fixed in advance.",
                      DomainInferenceWarning, stacklevel=2)
        uniq, _ = _unique(as_label_array(values, parameter))
        return cls(uniq)

    # --------------------------------------------------------------------------- mapping
    @property
    def labels(self) -> tuple:
        """The labels in index order."""
        return self._labels

    @property
    def size(self) -> int:
        """``d``, the number of labels."""
        return len(self._labels)

    def __len__(self) -> int:
        return len(self._labels)

    def __contains__(self, label: Any) -> bool:
        try:
            return _key(label) in self._index
        except TypeError:
            return False

    def __iter__(self):
        return iter(self._labels)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Domain) and self._labels == other._labels

    def __hash__(self) -> int:
        return hash(self._labels)

    def __repr__(self) -> str:
        shown = ", ".join(repr(v) for v in self._labels[:6])
        more = f", ... ({self.size} labels)" if self.size > 6 else ""
        return f"Domain([{shown}{more}])"

    def index(self, label: Any, parameter: str = "label") -> int:
        """The index of one label; :class:`ValidationError` naming ``parameter`` if it is unknown."""
        try:
            return self._index[_key(label)]
        except (KeyError, TypeError):
            raise ValidationError(f"{parameter}: {label!r} is not in the domain {self!r}",
                                  parameter=parameter) from None

    def encode(self, values: Any, parameter: str = "values") -> np.ndarray:
        """The int64 indices of ``values`` (labels; see :func:`as_label_array` for the input types).

        Raises :class:`ValidationError` naming ``parameter`` and (up to five of) the unknown labels
        when a value is not in the domain.
        """
        cat = _pandas_categorical(values)
        if cat is not None:  # codes + categories: only the d' categories are looked up
            cats, codes_in = cat
            if np.any(codes_in < 0):
                raise ValidationError(f"{parameter} holds labels outside the domain {self!r}: missing values (NaN)",
                                      parameter=parameter)
            used = np.unique(codes_in)  # unused categories are not labels of the data
            mapped = np.zeros(len(cats), dtype=np.int64)
            if used.size:
                mapped[used] = self.encode([cats[int(i)] for i in used], parameter)
            return mapped[codes_in]
        arr = as_label_array(values, parameter)
        if arr.shape[0] == 0:
            return np.zeros(0, dtype=np.int64)
        if arr.dtype == object:  # Python objects: one dict lookup each beats sorting them
            try:
                get = self._index.get
                codes = np.fromiter((get(v, -1) for v in arr.tolist()), dtype=np.int64, count=arr.shape[0])
            except TypeError:  # an unhashable value: reported by the general path below
                pass
            else:
                if (codes >= 0).all():
                    return codes
        uniq, inv = _unique(arr)
        codes = np.empty(len(uniq), dtype=np.int64)
        unknown = []
        for i, u in enumerate(uniq):
            j = self._index.get(u) if _hashable(u) else None
            if j is None:
                unknown.append(u)
                codes[i] = -1
            else:
                codes[i] = j
        if unknown:
            shown = ", ".join(repr(u) for u in unknown[:5]) + (f" (and {len(unknown) - 5} more)"
                                                               if len(unknown) > 5 else "")
            raise ValidationError(f"{parameter} holds labels outside the domain {self!r}: {shown}",
                                  parameter=parameter)
        return codes[inv]

    def decode(self, indices: Any, parameter: str = "indices") -> np.ndarray:
        """The labels (a numpy object array) at integer ``indices`` in ``[0, d)``."""
        idx = np.asarray(indices)
        if idx.dtype == np.bool_ or not np.issubdtype(idx.dtype, np.integer):
            raise ValidationError(f"{parameter} must be integers in [0, {self.size}), got dtype {idx.dtype}",
                                  parameter=parameter)
        if idx.size and (idx.min() < 0 or idx.max() >= self.size):
            raise ValidationError(f"{parameter} must be integers in [0, {self.size}), got values in "
                                  f"[{idx.min()}, {idx.max()}]", parameter=parameter)
        table = np.empty(self.size, dtype=object)
        table[:] = self._labels
        return table[idx]

    def label(self, estimate: Any) -> Any:
        """``estimate`` with this domain's labels attached (:attr:`Estimate.labels`).

        The estimate must have one value per label (``d`` values).
        """
        from dataclasses import replace

        if estimate.values.shape != (self.size,):
            raise ValidationError(f"estimate has {estimate.values.size} values but the domain has {self.size} "
                                  f"labels", parameter="domain")
        return replace(estimate, labels=self._labels)


def _pandas_categorical(values: Any) -> tuple[Any, np.ndarray] | None:
    """(categories, int64 codes) of a pandas categorical Series / Categorical, else None."""
    if type(values).__module__.split(".")[0] != "pandas":
        return None
    cat = getattr(values, "cat", None) if hasattr(values, "dtype") and str(values.dtype) == "category" else None
    if cat is not None:
        return cat.categories, np.asarray(cat.codes, dtype=np.int64)
    if type(values).__name__ == "Categorical":
        return values.categories, np.asarray(values.codes, dtype=np.int64)
    return None


def _hashable(u: Any) -> bool:
    try:
        hash(u)
    except TypeError:
        return False
    return True


def randomize_labels(oracle: Any, values: Any, domain: Domain, rng: Any = None) -> dict:
    """``oracle.randomize`` on labels: encodes ``values`` with ``domain`` (whose size must be the
    oracle's ``d``) and randomizes the indices. Attach the labels to the estimate with
    :meth:`Domain.label`."""
    d = getattr(oracle, "d", None)
    if d is not None and int(d) != domain.size:
        raise ValidationError(f"domain has {domain.size} labels but the oracle was built for d={d}",
                              parameter="domain")
    return oracle.randomize(domain.encode(values), rng)
