"""The result type of every analyzer: estimates with error bars and a privacy statement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ValidationError
from .privacy import PrivacyStatement

__all__ = ["Estimate"]


@dataclass(frozen=True)
class Estimate:
    """Unbiased estimates with standard errors and the privacy statement of the release.

    Attributes
    ----------
    values : numpy.ndarray
        The (raw, unbiased) estimates: fractions of users per item for frequency oracles,
        the mean for mean oracles, counts or sums where a protocol says so.
    stderr : numpy.ndarray
        Standard error of each value (closed form from the mechanism's variance, evaluated
        at the estimate clipped to the valid range).
    n : int
        Number of users the estimate is based on.
    privacy : PrivacyStatement
        The guarantee this release carries.
    kind : str
        What ``values`` are: ``"frequency"``, ``"mean"``, ``"count"``, ``"sum"``, ...
    extra : dict
        Mechanism details (e.g. a sketch's ``hash_seed``). An estimate returned by :meth:`clip`,
        :meth:`clip_normalize`, :meth:`norm_sub` or :meth:`project_simplex` carries
        ``extra["postprocessing"]`` (the steps applied, in order) and ``extra["unbiased"] = False``;
        its ``stderr`` is NaN.
    labels : tuple or None
        The label of each value (one per value), when the estimate was made over a
        :class:`~shuffledp.core.domain.Domain` (:meth:`Domain.label`); ``None`` for plain indices.
        Shown by ``str()``, :meth:`to_dict`, :meth:`to_pandas` and :meth:`by_label`.
    """

    values: np.ndarray
    stderr: np.ndarray
    n: int
    privacy: PrivacyStatement
    kind: str = "frequency"
    extra: dict = field(default_factory=dict)
    labels: tuple | None = None

    def __post_init__(self) -> None:
        v = np.atleast_1d(np.asarray(self.values, dtype=np.float64))
        s = np.broadcast_to(np.asarray(self.stderr, dtype=np.float64), v.shape).copy()
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "stderr", s)
        if self.labels is not None:
            labels = tuple(self.labels)
            if v.ndim != 1 or len(labels) != v.size:
                raise ValidationError(f"labels must name each value: {len(labels)} labels for values of shape "
                                      f"{v.shape}", parameter="labels")
            object.__setattr__(self, "labels", labels)

    # ------------------------------------------------------------------ labels and export
    def _names(self) -> list:
        return list(self.labels) if self.labels is not None else list(range(self.values.size))

    def by_label(self) -> dict:
        """``{label: value}`` (labels are the indices ``0 .. d-1`` when the estimate has none)."""
        return dict(zip(self._names(), self.values.tolist()))

    def to_dict(self) -> dict:
        """A JSON-ready dict: values, stderr, n, kind, privacy (its ``to_dict``) and labels (or None).

        NaN standard errors (post-processed estimates) become ``None``.
        """
        def clean(a: np.ndarray) -> list:
            return [x if np.isfinite(x) else None for x in a.tolist()]

        return {"values": clean(self.values), "stderr": clean(self.stderr), "n": int(self.n), "kind": self.kind,
                "privacy": self.privacy.to_dict(), "labels": None if self.labels is None else list(self.labels)}

    def to_pandas(self, level: float = 0.95) -> Any:
        """A pandas DataFrame, one row per value (index: the labels, or 0 .. d-1), with columns
        ``estimate``, ``stderr``, ``ci_low`` and ``ci_high`` (normal interval at ``level``).
        The privacy statement is in ``DataFrame.attrs["privacy"]``. Needs pandas."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - exercised only without pandas
            raise ImportError("Estimate.to_pandas needs pandas: pip install pandas") from e
        lo, hi = self.ci(level)
        df = pd.DataFrame({"estimate": self.values, "stderr": self.stderr, "ci_low": lo, "ci_high": hi},
                          index=pd.Index(self._names(), name="label" if self.labels is not None else "index"))
        df.attrs["privacy"] = str(self.privacy)
        df.attrs["n"] = int(self.n)
        return df

    def __str__(self) -> str:
        head = f"Estimate ({self.kind}, n={self.n}) {self.privacy}"
        names = [str(x) for x in self._names()]
        w = max(len(x) for x in names[:50]) if names else 1
        rows = [f"  {nm:>{w}}  {v: .6g} ± {s:.3g}" for nm, v, s in
                zip(names[:50], self.values.tolist(), self.stderr.tolist())]
        if len(names) > 50:
            rows.append(f"  ... ({len(names) - 50} more)")
        return "\n".join([head, *rows])

    def ci(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Normal-approximation confidence interval (lower, upper) at the given level."""
        if not (0.0 < level < 1.0):
            raise ValidationError(f"level must lie in (0, 1), got {level!r}", parameter="level")
        from scipy import stats

        z = float(stats.norm.ppf(0.5 + level / 2.0))
        return self.values - z * self.stderr, self.values + z * self.stderr

    def counts(self) -> np.ndarray:
        """Estimated counts (values times n) for frequency estimates."""
        return self.values * self.n

    def clipped(self, low: float = 0.0, high: float = 1.0) -> np.ndarray:
        """Post-processing: values clipped to [low, high] (no longer unbiased)."""
        return np.clip(self.values, low, high)

    # ------------------------------------------------------------ consistent post-processing
    #
    # A frequency oracle's raw estimates are unbiased but inconsistent: some are negative and
    # they need not sum to one. The methods below return a new Estimate whose values satisfy
    # the constraints (Wang, Lopuhaä-Zwakenberg, Li, Skoric, Li, "Locally Differentially Private
    # Frequency Estimation with Consistency", NDSS 2020). They use only the released values, so
    # the privacy statement is unchanged (post-processing); they trade bias for a smaller error,
    # mostly on small items. The raw estimate (this object) is left untouched.

    def clip(self) -> "Estimate":
        """Values clipped to ``[0, total]`` (Base-Pos of Wang et al. with an upper cut).

        ``total`` is 1 for ``kind="frequency"`` and ``n`` for ``kind="count"``. The result is
        biased (upwards for small items); its ``stderr`` is NaN (see :meth:`norm_sub`).
        """
        total = self._total("clip")
        return self._postprocessed(np.clip(self.values, 0.0, total), "clip")

    def clip_normalize(self) -> "Estimate":
        """Values clipped to ``[0, total]``, then scaled to sum to ``total`` (Norm-Mul of Wang et al.).

        When no value is positive, the result is uniform (``total / d`` each). Biased; ``stderr``
        is NaN (see :meth:`norm_sub`).
        """
        total = self._total("clip_normalize")
        c = np.clip(self.values, 0.0, total)
        s = float(c.sum())
        out = (c / s) * total if s > 0.0 else np.full(c.shape, total / c.size)   # c / s <= 1: no overflow at tiny s
        return self._postprocessed(out, "clip_normalize")

    def norm_sub(self) -> "Estimate":
        """Norm-Sub of Wang et al. (NDSS 2020): non-positive values become 0, and one ``delta``
        is subtracted from the positive ones, ``f'_i = max(f_i - delta, 0)`` for ``f_i > 0``, with
        ``delta`` chosen so that the result sums to ``total`` (1 for frequencies, ``n`` for counts).

        This is the fixed point of the paper's iteration (zero the negatives, shift the rest by a
        common amount, repeat), computed exactly by sorting the positive values (``O(d log d)``,
        vectorized). When the positive values sum to at least ``total`` (``delta >= 0``) it equals
        :meth:`project_simplex`; when they sum to less, ``delta < 0`` adds the missing mass to the
        positive items only (the projection would also lift items estimated at or below 0). When
        no value is positive, the result is :meth:`project_simplex`'s.

        Returns
        -------
        Estimate
            Values on the simplex ``{f >= 0, sum f = total}``; same ``n`` and ``privacy``;
            ``extra["postprocessing"]`` lists the steps applied and ``extra["unbiased"]`` is False.
            ``stderr`` is NaN: the raw estimate's standard error does not describe the error of a
            biased, data-dependent projection (use this object's raw estimate for intervals).
        """
        total = self._total("norm_sub")
        v = self.values
        pos = v > 0.0
        if not pos.any():
            return self._postprocessed(_project_simplex(v, total), "norm_sub")
        out = np.zeros_like(v)
        out[pos] = _project_simplex(v[pos], total)
        return self._postprocessed(out, "norm_sub")

    def project_simplex(self) -> "Estimate":
        """Euclidean projection of the values onto the simplex ``{f >= 0, sum f = total}``.

        The closest consistent vector in squared error (the constrained least squares of Wang et
        al.): ``f'_i = max(f_i - theta, 0)`` with ``theta`` such that ``sum f' = total``, found
        exactly by sorting (Held, Wolfe and Crowder 1974; Duchi et al., ICML 2008), ``O(d log d)``.
        Biased; ``stderr`` is NaN (see :meth:`norm_sub`).
        """
        total = self._total("project_simplex")
        return self._postprocessed(_project_simplex(self.values, total), "project_simplex")

    def _total(self, method: str) -> float:
        """The sum a consistent estimate has: 1 for frequencies, n for counts."""
        if self.kind == "frequency":
            total = 1.0
        elif self.kind == "count":
            total = float(self.n)
        else:
            raise ValidationError(f"{method}() applies to kind 'frequency' or 'count' estimates, got kind "
                                  f"{self.kind!r}", parameter="kind")
        if "dims" in self.extra:
            raise ValidationError(f"{method}() applies to one histogram; this estimate concatenates several "
                                  f"attributes (extra['dims']): post-process each attribute's slice",
                                  parameter="kind")
        if self.values.ndim != 1 or self.values.size == 0 or not np.all(np.isfinite(self.values)):
            raise ValidationError(f"{method}() needs a non-empty 1-D vector of finite values", parameter="values")
        if total <= 0.0:
            raise ValidationError(f"{method}() needs n >= 1 for a count estimate, got n = {self.n}", parameter="n")
        return total

    def _postprocessed(self, values: np.ndarray, method: str) -> "Estimate":
        extra = dict(self.extra)
        extra["postprocessing"] = tuple(self.extra.get("postprocessing", ())) + (method,)
        extra["unbiased"] = False
        return Estimate(values, np.full(values.shape, np.nan), self.n, self.privacy, self.kind, extra, self.labels)


def _project_simplex(v: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of the 1-D vector ``v`` onto ``{x >= 0, sum x = total}`` (``total > 0``).

    With ``u`` the values sorted in decreasing order and ``c_k`` the sum of the ``k`` largest,
    ``rho = max{k : u_k > (c_k - total) / k}`` and ``theta = (c_rho - total) / rho``; the
    projection is ``max(v - theta, 0)`` (KKT conditions of the strictly convex problem).
    """
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    k = np.arange(1, u.size + 1)
    rho = int(np.nonzero(u * k > css - total)[0][-1]) + 1   # k = 1 always qualifies
    theta = (css[rho - 1] - total) / rho
    out = np.maximum(v - theta, 0.0)
    # rounding: the support sums to total up to a few ulps; fix the sum on the support exactly
    s = out.sum()
    if s > 0.0:
        out *= total / s
    return out
