"""The contract every local randomizer implements.

Reports are **columnar**: a ``dict`` mapping a field name to a numpy array whose first axis
indexes users (``n`` rows). A single user is ``n = 1``. This makes reports cheap to
concatenate, shuffle, serialise and stream.

Aggregation produces a **mergeable sufficient statistic**: a numpy array such that
``aggregate(a ∪ b) == aggregate(a) + aggregate(b)``. ``estimate(statistic, n)`` turns it into
an :class:`~shuffledp.core.Estimate`.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from ..core.batch import Columns, concat_rows, n_rows, row_layout, take_rows
from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from ..core.rng import as_generator
from ..core.validation import (
    check_domain_size,
    check_epsilon,
    check_int_values,
    check_positive_int,
    check_real_values,
)

__all__ = [
    "Reports",
    "LocalRandomizer",
    "FrequencyOracle",
    "MeanOracle",
    "n_reports",
    "concat_reports",
    "take_reports",
    "DEFAULT_CHUNK",
    "check_rng",
    "check_n",
    "check_reports",
    "smallest_variance",
]

#: A columnar report batch (:data:`shuffledp.core.batch.Columns`): one row per user.
Reports = Columns

# The batch helpers of :mod:`shuffledp.core.batch` under their former names (the service layer
# imports them from here).
n_reports = n_rows
concat_reports = concat_rows
take_reports = take_rows

#: Users processed per chunk on O(n*d) paths so memory stays bounded.
DEFAULT_CHUNK = 1 << 16


def check_rng(rng: Any) -> np.random.Generator:
    """A randomizer's ``rng``: a :class:`numpy.random.Generator`, an int seed or ``None``.

    An int seeds a reproducible generator (simulation); ``None`` draws a cryptographically secure
    one (:func:`~shuffledp.core.rng.secure_rng`). Anything else (a bool, a legacy ``RandomState``,
    a bare bit generator) is a :class:`ValidationError` naming ``rng``.
    """
    return as_generator(rng)


def check_reports(reports: Any) -> Reports:
    """A columnar report batch: a mapping of field name to an array whose first axis is the users.

    Raises :class:`ValidationError` naming ``reports`` for anything else (a bare array, a list),
    and when the fields disagree on the number of users.
    """
    if not isinstance(reports, Mapping):
        raise ValidationError("reports must be a dict of field name -> array (the output of randomize), "
                              f"got {type(reports).__name__}", parameter="reports")
    lengths = set()
    for key, col in reports.items():
        shape = np.shape(col)
        if len(shape) == 0:
            raise ValidationError(f"reports field {key!r} must be an array with one row per user, got a scalar",
                                  parameter="reports")
        lengths.add(shape[0])
    if len(lengths) > 1:
        raise ValidationError(f"reports fields must have the same number of rows, got {sorted(lengths)}",
                              parameter="reports")
    return reports  # type: ignore[return-value]


def check_n(n: Any) -> int:
    """A number of users ``n``: an integer >= 1 (bools and floats are rejected)."""
    return check_positive_int(n, "n")


def _check_real_array(x: Any, name: str, low: float, high: float) -> np.ndarray:
    """A real scalar or array with finite entries in [low, high] (bools, strings, objects rejected)."""
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValidationError(f"{name} must be real numbers in [{low:g}, {high:g}], got {x!r}", parameter=name)
    a = arr.astype(np.float64)
    if not np.all(np.isfinite(a)) or np.any((a < low) | (a > high)):
        raise ValidationError(f"{name} must be finite numbers in [{low:g}, {high:g}], got {x!r}", parameter=name)
    return a


#: Refusal level of the statistic-vs-``n`` consistency test of :meth:`FrequencyOracle.estimate`: a
#: statistic honestly aggregated from ``n`` reports is refused with probability at most this.
N_CONSISTENCY_ALPHA = 1e-12


def _wrap_checked(cls: type) -> None:
    """Put the shared input checks in front of the ``randomize``, ``aggregate``, ``estimate`` and
    ``variance`` that ``cls`` resolves, where they are not checked yet (its own, or a mixin's; those
    inherited from another oracle are already wrapped), so no oracle can skip them:

    - ``randomize(values, rng, ...)``: ``rng`` a numpy Generator, an int seed or ``None``
      (:func:`check_rng`; checked first: no state such as RAPPOR's memo is touched on a bad call);
    - ``aggregate(reports)``: ``reports`` a columnar batch (:func:`check_reports`); a missing field
      is a :class:`ValidationError` naming ``reports``;
    - ``estimate(statistic, n=None, ...)``: ``n`` an integer >= 1 (or ``None``: the number of users
      the statistic records, where it records it), then ``cls._check_statistic_for(statistic, n)``
      and ``cls._check_users(statistic, n)`` (``n`` consistent with the statistic);
    - ``variance(n, value, ...)``: ``n`` an integer >= 1 (``None`` is refused: a local oracle has
      no default number of users), ``value`` via ``cls._check_value``.
    """

    def randomize_wrapper(fn):
        @functools.wraps(fn)
        def randomize(self, values, rng=None, *args, **kwargs):
            rng = check_rng(rng)
            self._check_batch_fits(values)
            return fn(self, values, rng, *args, **kwargs)
        return randomize

    def aggregate_wrapper(fn):
        @functools.wraps(fn)
        def aggregate(self, reports, *args, **kwargs):
            check_reports(reports)
            try:
                return fn(self, reports, *args, **kwargs)
            except KeyError as e:
                if not (e.args and isinstance(e.args[0], str) and e.args[0] not in reports):
                    raise  # not a missing report field
                raise ValidationError(f"reports lack the field {e.args[0]!r}; got fields {sorted(reports)} "
                                      f"(pass the output of {type(self).__name__}.randomize)",
                                      parameter="reports") from None
        return aggregate

    def estimate_wrapper(fn):
        @functools.wraps(fn)
        def estimate(self, statistic, n=None, *args, **kwargs):
            if n is None:
                n = self.users_of(statistic)
            n = check_n(n)
            self._check_statistic_for(statistic, n)
            self._check_users(statistic, n)
            return fn(self, statistic, n, *args, **kwargs)
        return estimate

    def variance_wrapper(fn):
        @functools.wraps(fn)
        def variance(self, n=None, value=0.0, *args, **kwargs):
            if n is None:
                raise ValidationError(f"{type(self).__name__}.variance needs the number of users n "
                                      "(the variance of a local estimate is proportional to 1/n)", parameter="n")
            n = check_n(n)
            self._check_value(value)
            return fn(self, n, value, *args, **kwargs)
        return variance

    for name, wrap in (("randomize", randomize_wrapper), ("aggregate", aggregate_wrapper),
                       ("estimate", estimate_wrapper), ("variance", variance_wrapper)):
        fn = getattr(cls, name, None)   # through the MRO: a mixin's method is checked too
        if fn is None or getattr(fn, "__isabstractmethod__", False) or getattr(fn, "_input_checked", False):
            continue
        wrapped = wrap(fn)
        wrapped._input_checked = True  # type: ignore[attr-defined]
        setattr(cls, name, wrapped)


#: The type of what :meth:`LocalRandomizer.estimate` returns: :class:`~shuffledp.core.Estimate`
#: for frequency and mean oracles, :class:`~shuffledp.local.keyvalue.KeyValueEstimate` for
#: key-value mechanisms.
EstimateT = TypeVar("EstimateT")


class LocalRandomizer(ABC, Generic[EstimateT]):
    """An eps-LDP randomizer with an analyzer whose estimates are of type ``EstimateT``.

    Subclasses set ``name`` (the registry name) and implement the abstract methods.
    """

    name: ClassVar[str] = ""

    def __init__(self, epsilon: float) -> None:
        self.epsilon = check_epsilon(epsilon)

    # --- client ---------------------------------------------------------------------
    @abstractmethod
    def randomize(self, values: Any, rng: np.random.Generator | int | None = None) -> Reports:
        """Randomize each user's value; returns columnar reports (n rows).

        ``rng``: a numpy Generator, an int seed (reproducible simulation) or ``None`` (a fresh
        cryptographically secure generator, :func:`~shuffledp.core.rng.secure_rng`).
        """

    # --- analyzer -------------------------------------------------------------------
    @abstractmethod
    def aggregate(self, reports: Reports) -> np.ndarray:
        """Mergeable sufficient statistic of a report batch."""

    @abstractmethod
    def estimate(self, statistic: np.ndarray, n: int | None = None) -> EstimateT:
        """Unbiased estimate from the aggregated statistic of ``n`` users.

        ``n`` may be omitted where the statistic records its number of users
        (:meth:`users_of`); an ``n`` the statistic contradicts is a :class:`ValidationError`
        naming ``n`` (:meth:`_check_users`).
        """

    # --- the number of users a statistic records -------------------------------------
    def _recorded_users(self, statistic: np.ndarray) -> float | None:
        """The exact number of users ``statistic`` was aggregated from, when it records it
        (``None`` when it does not: subclasses whose statistic counts its reports override this)."""
        return None

    def _total_per_user(self) -> tuple[float, float] | None:
        """``(mean, sum of squared ranges)`` of one report's contribution to ``statistic.sum()``:
        its mean when that is the same for every input, and the sum of ``(high - low)^2`` over the
        independent pieces it is made of (``d`` for ``d`` independent bits, ``d^2`` for one
        quantity in ``[0, d]``); ``None`` when unknown. The basis of the Hoeffding test in
        :meth:`_check_users`."""
        return None

    def users_of(self, statistic: Any) -> int:
        """The number of users ``statistic`` was aggregated from.

        Raises :class:`ValidationError` naming ``n`` when the statistic does not record it
        (then pass ``n`` to :meth:`estimate`).
        """
        s = np.asarray(statistic)
        if s.dtype == np.bool_ or not (np.issubdtype(s.dtype, np.integer) or np.issubdtype(s.dtype, np.floating)) \
                or not np.all(np.isfinite(s)):
            raise ValidationError(f"statistic must be numeric counts, got dtype {s.dtype}", parameter="statistic")
        users = self._recorded_users(s) if s.shape == self._statistic_shape() else None
        if users is None:
            raise ValidationError(f"{type(self).__name__}'s statistic does not record its number of users: "
                                  "pass n= to estimate", parameter="n")
        if users < 1 or users != int(users):
            raise ValidationError(f"statistic records {users:g} users; it is not the aggregate of a report batch",
                                  parameter="statistic")
        return int(users)

    def _statistic_shape(self) -> tuple[int, ...]:
        """Shape of :meth:`aggregate`'s output."""
        return ()

    def _check_users(self, statistic: Any, n: int) -> None:
        """Refuse an ``n`` that the statistic contradicts.

        Exact where the statistic records its users (:meth:`_recorded_users`); otherwise, where a
        report's contribution to the statistic's total has an input-free mean ``mu`` and is a sum
        of independent pieces whose squared ranges sum to ``r2`` (:meth:`_total_per_user`),
        Hoeffding's inequality: the total ``T`` of ``n`` honest reports satisfies
        ``|T - n mu| <= sqrt(n r2 ln(2/alpha) / 2)`` except with probability
        ``alpha = N_CONSISTENCY_ALPHA``, so a larger gap means the statistic is not the aggregate
        of ``n`` reports. Only a gross mismatch is caught this way (``|n - n_true|`` of order
        ``sqrt(n)`` or more).
        """
        s = np.asarray(statistic, dtype=np.float64)
        users = self._recorded_users(s)
        if users is not None:
            if abs(users - n) > 1e-9 * max(1.0, n):
                raise ValidationError(f"n={n} does not match the {users:g} users the statistic records "
                                      "(estimate(statistic) reads n from it)", parameter="n")
            return
        law = self._total_per_user()
        if law is None:
            return
        mu, r2 = law
        total = float(s.sum())
        slack = math.sqrt(n * r2 * math.log(2.0 / N_CONSISTENCY_ALPHA) / 2.0)
        if abs(total - n * mu) > slack:
            implied = max(1, round(total / mu)) if mu > 0 else None
            hint = f" (about {implied} reports)" if implied is not None else ""
            raise ValidationError(f"n={n} is inconsistent with the statistic: its total {total:g} is far from the "
                                  f"{n * mu:g} expected of {n} reports{hint}", parameter="n")

    @abstractmethod
    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Closed-form variance of one coordinate of the estimate from ``n`` users whose true value
        is ``value`` (a fraction for frequency oracles, a mean for mean oracles).

        The signature is the one of every contract (protocols, central and key-value mechanisms);
        a local oracle has no default ``n``, so ``n=None`` is a :class:`ValidationError` naming ``n``.
        """

    # --- privacy --------------------------------------------------------------------
    @abstractmethod
    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Pr[R(x) = y_i] (or the density) for each report y_i in ``reports``, input ``x``."""

    def privacy(self, n: int | None = None) -> PrivacyStatement:
        """The guarantee each report carries (model ``"local"``, replace-one neighbouring).

        ``n``, the number of users, is accepted so that every contract (local oracles, protocols,
        central and key-value mechanisms) has one ``privacy(n=None)``; a local guarantee holds
        for each report whatever ``n`` is, so it is only validated (an integer >= 1) and
        otherwise ignored. Subclasses state their guarantee in :meth:`_privacy`.
        """
        if n is not None:
            check_n(n)
        return self._privacy()

    def _privacy(self) -> PrivacyStatement:
        """Each report is eps-LDP (replace-one neighbouring on a single user's input)."""
        return PrivacyStatement(self.epsilon, 0.0, "local", "replace_one", note=f"{type(self).__name__}")

    def _check_batch_fits(self, values: Any) -> None:
        """Refuse a batch whose reports cannot fit in memory (subclasses plan it)."""

    def validate_reports(self, reports: Reports) -> Reports:
        """Check a report batch received from outside (fields, dtypes, ranges)."""
        return reports

    def example_values(self, n: int = 1) -> np.ndarray:
        """``n`` valid inputs (all zeros: item 0 of a frequency oracle, the value 0 of a mean oracle)."""
        from ..core.validation import check_positive_int

        return np.zeros(check_positive_int(n, "n"), dtype=np.int64)

    def report_schema(self) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
        """The fixed layout of one report: ``(column, little-endian dtype, row shape)`` per column.

        Sorted by column name. A report's layout is a function of the mechanism's parameters,
        never of the input (``randomize`` draws dtypes and shapes from ``d``, ``epsilon`` and the
        knobs; a layout that varied with the input would itself leak it), so it is read off the
        reports of :meth:`example_values`; tests check it against reports of every input for each
        registry oracle. Deployments seal reports in this layout and refuse any other.
        """
        cached = self.__dict__.get("_report_schema")
        if cached is None:
            cached = row_layout(self.randomize(self.example_values(1), np.random.default_rng(0)))
            self.__dict__["_report_schema"] = cached
        return cached

    def run(self, values: Any, rng: np.random.Generator | int | None = None) -> EstimateT:
        """Convenience: randomize, aggregate and estimate in one call (simulation)."""
        reports = self.randomize(values, rng)
        return self.estimate(self.aggregate(reports), n_rows(reports))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon:g})"


class FrequencyOracle(LocalRandomizer[Estimate]):
    """eps-LDP frequency oracle over the domain [0, d).

    ``estimate(...).values`` are **fractions** of users per item (unbiased, may be negative);
    ``variance(n, value)`` is the variance of one item's fraction estimate when its true
    fraction is ``value``.
    """

    #: whether the constructor takes ``device`` / ``device_fallback`` (where the server-side
    #: aggregation and estimation run; :func:`shuffledp.local._device.resolve_device`)
    accepts_device: ClassVar[bool] = False
    #: where the server-side work runs: ``'cpu'`` (numpy), ``'torch-cpu'`` or ``'cuda[:N]'`` (PyTorch)
    device: str = "cpu"

    def __init__(self, epsilon: float, d: int) -> None:
        super().__init__(epsilon)
        self.d = check_domain_size(d)
        from .registry import check_domain_fits

        check_domain_fits(type(self).__name__, self.d)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _wrap_checked(cls)

    # --- shared input checks (called by the wrappers of every subclass) ----------------
    def _check_batch_fits(self, values: Any) -> None:
        """Refuse a batch whose reports cannot fit in memory (:func:`~.registry.check_batch_fits`)."""
        if isinstance(values, np.ndarray):
            n = values.shape[0] if values.ndim else 1
        else:
            try:
                n = len(values)  # no array conversion here: randomize converts once
            except TypeError:
                n = 1
        from .registry import check_batch_fits

        check_batch_fits(self, int(n))

    def _check_value(self, value: Any) -> np.ndarray:
        """``value`` of :meth:`variance`: true fraction(s), finite, in [0, 1]."""
        return _check_real_array(value, "value", 0.0, 1.0)

    def _statistic_shape(self) -> tuple[int, ...]:
        """Shape of :meth:`aggregate`'s output (default: one count per item)."""
        return (self.d,)

    def _check_statistic(self, statistic: Any) -> np.ndarray:
        """A statistic of :meth:`_statistic_shape` (shape only)."""
        shape = self._statistic_shape()
        s = np.asarray(statistic)
        if s.shape != shape:
            raise ValidationError(f"statistic must have shape {shape}, got {s.shape}", parameter="statistic")
        return s

    def _check_statistic_for(self, statistic: Any, n: int) -> np.ndarray:
        """Shape and range of a statistic of ``n`` users (default: counts in [0, n], one per item)."""
        s = self._check_statistic(statistic)
        if s.dtype == np.bool_ or not (np.issubdtype(s.dtype, np.integer) or np.issubdtype(s.dtype, np.floating)):
            raise ValidationError(f"statistic must be numeric counts, got dtype {s.dtype}", parameter="statistic")
        if s.size and (not np.all(np.isfinite(s)) or s.min() < 0 or s.max() > n):
            raise ValidationError(f"statistic must hold counts in [0, n={n}] (from n reports), "
                                  f"got values in [{s.min()}, {s.max()}]", parameter="statistic")
        return s

    def check_values(self, values: Any) -> np.ndarray:
        return check_int_values(values, self.d)

    def uniform_variance(self) -> float:
        """Mean over the ``d`` items of the variance of one fraction estimate from ``n = 1`` user
        when the true distribution is uniform (``1/d`` each); every estimate's variance is
        proportional to ``1/n``, so this ranks configurations at every ``n``.

        The figure of merit by which a mechanism with variants or tuning knobs picks its default
        (the smallest). Default: ``variance(1, 1/d)`` (every item's variance is the same when all
        have the same frequency); mechanisms whose variance depends on the other items override it.
        """
        return float(self.variance(1, 1.0 / self.d))

    def simulate_statistic(self, true_counts: Any, rng: np.random.Generator) -> np.ndarray:
        """Sample the aggregate statistic directly from the true per-item counts.

        Only mechanisms whose aggregate distribution is known exactly implement it; it has the
        same distribution as ``aggregate(randomize(values))`` and costs O(d) or O(d^2),
        independent of n.
        """
        raise NotImplementedError(f"{type(self).__name__} has no exact statistic simulation")

    def check_counts(self, true_counts: Any) -> np.ndarray:
        c = np.asarray(true_counts)
        if c.shape != (self.d,) or not np.issubdtype(c.dtype, np.integer) or (c.size and c.min() < 0):
            raise ValidationError(f"true_counts must be {self.d} non-negative integers", parameter="true_counts")
        return c.astype(np.int64)

    def _pure_estimate(self, support_counts: np.ndarray, n: int, p: float, q: float) -> Estimate:
        """Estimator of a pure protocol (Wang et al. 2017): (C_i - n q) / (n (p - q))."""
        n = check_n(n)
        f = (np.asarray(support_counts, dtype=np.float64) - n * q) / (n * (p - q))
        fc = np.clip(f, 0.0, 1.0)
        var = (q * (1 - q) + fc * (1 - p - q) * (p - q)) / (n * (p - q) ** 2)
        return Estimate(f, np.sqrt(var), n, self.privacy(), "frequency")

    @staticmethod
    def _pure_variance(n: int, f: float, p: float, q: float) -> float:
        """Exact variance of a pure protocol's fraction estimate (Wang, Blocki, Li, Jha, USENIX Security
        2017, with the ``f`` term kept)."""
        return (q * (1 - q) + f * (1 - p - q) * (p - q)) / (n * (p - q) ** 2)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, d={self.d})"


def smallest_variance(candidates: Any, ideal: np.ndarray, build: Any, keep: int = 3) -> Any:
    """The candidate parameter whose mechanism has the smallest :meth:`~FrequencyOracle.uniform_variance`.

    ``ideal`` (one per candidate, vectorized by the caller) ranks the candidates by the variance of
    the ideal, unrounded scheme; the ``keep`` best are built (``build(candidate)``) and compared by
    the variance they state (with their sampled, rounded probabilities), so rounding never makes
    the default worse than an explicit choice among the near-ties. Ties go to the first candidate.
    """
    cands = np.asarray(candidates)
    order = np.argsort(np.asarray(ideal, dtype=np.float64), kind="stable")[:keep]
    best, best_v = None, math.inf
    for i in sorted(order):
        v = build(cands[i].item()).uniform_variance()
        if v < best_v:
            best, best_v = cands[i].item(), v
    return best


class MeanOracle(LocalRandomizer[Estimate]):
    """eps-LDP mean estimator for values in [-1, 1] (``dim`` coordinates per user)."""

    def __init__(self, epsilon: float, dim: int = 1) -> None:
        super().__init__(epsilon)
        from ..core.validation import check_positive_int

        self.dim = check_positive_int(dim, "dim")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _wrap_checked(cls)

    def _check_batch_fits(self, values: Any) -> None:
        """Mean oracles' reports are O(dim) per user: no plan needed."""

    def example_values(self, n: int = 1) -> np.ndarray:
        """``n`` valid inputs: the value 0 (in every coordinate when ``dim > 1``)."""
        from ..core.validation import check_positive_int

        n = check_positive_int(n, "n")
        return np.zeros(n if self.dim == 1 else (n, self.dim), dtype=np.float64)

    def _check_value(self, value: Any) -> np.ndarray:
        """``value`` of :meth:`variance`: the true mean(s), finite, in [-1, 1]."""
        return _check_real_array(value, "value", -1.0, 1.0)

    def _check_statistic_for(self, statistic: Any, n: int) -> np.ndarray:
        """Shape and finiteness of a statistic of ``n`` users (mechanisms add their range)."""
        s = np.asarray(statistic)
        if s.shape != (self.dim,):
            raise ValidationError(f"statistic must have shape ({self.dim},), got {s.shape}", parameter="statistic")
        if s.dtype == np.bool_ or not (np.issubdtype(s.dtype, np.integer) or np.issubdtype(s.dtype, np.floating)) \
                or not np.all(np.isfinite(s)):
            raise ValidationError("statistic must be finite numbers", parameter="statistic")
        return s

    def worst_variance(self) -> float:
        """Largest variance of one coordinate's mean estimate from ``n = 1`` user over the true
        values ``-1`` and ``1`` (every mean oracle's variance grows with ``value^2``, so the worst
        case over ``[-1, 1]`` is at the ends, up to the ``O(1/K^2)`` snapping term of the grid
        mechanisms); the figure of merit by which a mean oracle with tuning knobs picks its default."""
        return float(max(np.max(self.variance(1, -1.0)), np.max(self.variance(1, 1.0))))

    def check_values(self, values: Any) -> np.ndarray:
        if self.dim == 1:
            return check_real_values(values, -1.0, 1.0)
        arr = check_real_values(values, -1.0, 1.0, ndim=2)
        if arr.shape[1] != self.dim:
            raise ValidationError(f"values must have {self.dim} columns, got {arr.shape[1]}", parameter="values")
        return arr

