"""Prefix levels over a pluggable frequency oracle: the client and the per-level estimates shared
by PEM (:mod:`.prefix_extending`) and TreeHist (:mod:`.treehist`).

Every user draws a level ``i`` uniformly from ``[0, G)`` (independently of its value) and reports
the ``t_i``-bit prefix of its encoded value through level ``i``'s oracle, built over
``D_i = min(2^{t_i}, max_domain)`` items (the prefix itself when it fits, its public
domain-reduction hash otherwise, :class:`~._common.UniversalHash`). One report per user, users
split over levels by data-independent coins: the report is as private as the least private level
oracle (parallel composition; the level is a data-independent coin), and its exact probability is
``Pr[level = i] Pr_i[y | map_i(x)] = (1/G) Pr_i[y | map_i(x)]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.validation import check_positive_int
from ..base import Reports
from ..registry import FREQUENCY_ORACLES, frequency_oracle
from ..sketch import draw_hash_seed
from ._common import UniversalHash, oracle_log_probabilities

__all__ = ["PrefixLevels"]

#: Default largest oracle domain per level (above it prefixes are hashed).
DEFAULT_MAX_DOMAIN = 4096


class PrefixLevels:
    """``G`` levels of prefix lengths ``t_0 < ... < t_{G-1}``, one registry oracle each."""

    def __init__(self, epsilon: float, lengths: list[int], oracle: str, oracle_params: dict | None,
                 max_domain: int, hash_seed: int | None) -> None:
        if not isinstance(oracle, str) or oracle.lower() not in FREQUENCY_ORACLES:
            raise ValidationError(f"unknown frequency oracle {oracle!r}; choose one of {sorted(FREQUENCY_ORACLES)}",
                                  parameter="oracle")
        if oracle_params is not None and not isinstance(oracle_params, dict):
            raise ValidationError("oracle_params must be a dict of the oracle's parameters", parameter="oracle_params")
        self.max_domain = check_positive_int(max_domain, "max_domain", minimum=2)
        if self.max_domain > (1 << 24):
            raise ValidationError(f"max_domain must be an integer in [2, 2^24], got {max_domain}",
                                  parameter="max_domain")
        if hash_seed is None:
            hash_seed = draw_hash_seed()
        if isinstance(hash_seed, (bool, np.bool_)) or not isinstance(hash_seed, (int, np.integer)) or hash_seed < 0:
            raise ValidationError(f"hash_seed must be a non-negative integer, got {hash_seed!r}", parameter="hash_seed")
        self.hash_seed = int(hash_seed)
        self.oracle_name = oracle.lower()
        self.lengths = [int(t) for t in lengths]
        self.G = len(self.lengths)
        params = dict(oracle_params or {})
        self.domains = [min(1 << t, self.max_domain) for t in self.lengths]
        self.hashed = [(1 << t) > self.max_domain for t in self.lengths]
        self.hashers = [UniversalHash(D, self.hash_seed, i) if h else None
                        for i, (D, h) in enumerate(zip(self.domains, self.hashed))]
        if self.oracle_name in ("cms", "hcms") and "hash_seed" not in params:
            params["hash_seed"] = self.hash_seed
        self.oracles = [frequency_oracle(self.oracle_name, epsilon, max(2, D), **params) for D in self.domains]
        # report fields and their per-level shapes (padded to the widest level on the wire)
        probe = [o.randomize(np.zeros(1, dtype=np.int64), np.random.default_rng(0)) for o in self.oracles]
        fields = list(probe[0])
        if any(list(p) != fields for p in probe) or "level" in fields:
            raise ValidationError(f"oracle {oracle!r} has level-dependent report fields", parameter="oracle")
        self.fields = fields
        self.shapes = {f: [np.asarray(p[f]).shape[1:] for p in probe] for f in fields}
        self.dtypes = {f: np.asarray(probe[0][f]).dtype for f in fields}
        self.wire_shapes = {f: tuple(np.max(np.array([s for s in sh], dtype=np.int64), axis=0)) if sh[0] else ()
                            for f, sh in self.shapes.items()}
        self.stat_shapes = [tuple(np.shape(o.aggregate(p))) for o, p in zip(self.oracles, probe)]

    def map(self, i: int, prefixes: np.ndarray) -> np.ndarray:
        """Oracle item of ``t_i``-bit prefixes at level ``i`` (identity, or the public hash)."""
        h = self.hashers[i]
        return np.asarray(prefixes, dtype=np.int64) if h is None else h(prefixes)

    def prefix(self, codes: np.ndarray, i: int, total_bits: int) -> np.ndarray:
        return np.asarray(codes, dtype=np.int64) >> (total_bits - self.lengths[i])

    # --- client -------------------------------------------------------------------------
    def randomize(self, codes: np.ndarray, total_bits: int, rng: np.random.Generator) -> Reports:
        n = codes.shape[0]
        level = rng.integers(0, self.G, size=n, dtype=np.int64)
        out: dict[str, np.ndarray] = {"level": level}
        for f in self.fields:
            out[f] = np.zeros((n, *self.wire_shapes[f]), dtype=self.dtypes[f])
        for i in range(self.G):  # one vectorized oracle call per level
            rows = np.flatnonzero(level == i)
            if rows.size == 0:
                continue
            rep = self.oracles[i].randomize(self.map(i, self.prefix(codes[rows], i, total_bits)), rng)
            for f in self.fields:
                v = np.asarray(rep[f])
                idx = (rows,) + tuple(slice(0, s) for s in v.shape[1:])
                out[f][idx] = v
        return out

    def level_reports(self, reports: Reports, i: int, rows: np.ndarray) -> Reports:
        """Level ``i``'s own reports (the wire padding removed) of the given rows."""
        sub = {}
        for f in self.fields:
            v = np.asarray(reports[f])[rows]
            sub[f] = v[(slice(None),) + tuple(slice(0, s) for s in self.shapes[f][i])]
        return sub

    def validate(self, reports: Reports) -> np.ndarray:
        if not isinstance(reports, dict) or set(reports) != {"level", *self.fields}:
            raise ValidationError(f"reports must have exactly the fields {sorted(['level', *self.fields])}",
                                  parameter="reports")
        level = np.asarray(reports["level"])
        if level.ndim != 1 or not np.issubdtype(level.dtype, np.integer) or \
                (level.size and (int(level.min()) < 0 or int(level.max()) >= self.G)):
            raise ValidationError(f"level must be integers in [0, {self.G})", parameter="level")
        return level.astype(np.int64)

    # --- analyzer -----------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> tuple[np.ndarray, list[np.ndarray]]:
        level = self.validate(reports)
        users = np.bincount(level, minlength=self.G).astype(np.int64)
        stats = []
        for i in range(self.G):  # one oracle aggregate per level
            rows = np.flatnonzero(level == i)
            if rows.size == 0:
                stats.append(np.zeros(self.stat_shapes[i], dtype=np.int64))
                continue
            sub = self.level_reports(reports, i, rows)
            sub = self.oracles[i].validate_reports(sub)
            stats.append(np.asarray(self.oracles[i].aggregate(sub)))
        return users, stats

    def estimate_level(self, i: int, stat: np.ndarray, n_i: int, prefixes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fractions of level ``i``'s users holding each prefix, and their standard errors.

        On a hashed level the bucket's estimate ``f_b`` also counts the prefixes sharing the
        bucket; ``(f_b - 1/D)/(1 - 1/D)`` removes their mean contribution over the draw of the
        hash (collision probability ``1/D`` per pair, up to the ``O(D/p)`` non-uniformity of the
        final reduction).
        """
        if n_i < 1:
            raise ValidationError(f"level {i} received no report: too few users for {self.G} levels",
                                  parameter="statistic")
        est = self.oracles[i].estimate(stat, int(n_i))
        items = self.map(i, prefixes)
        f, s = est.values[items], est.stderr[items]
        if self.hashed[i]:
            D = self.domains[i]
            f = (f - 1.0 / D) / (1.0 - 1.0 / D)
            s = s / (1.0 - 1.0 / D)
        return f, s

    def zero_stderr(self, i: int, n_i: int) -> float:
        """Standard deviation of a fraction estimate at level ``i`` for an item nobody holds."""
        return float(np.sqrt(self.oracles[i].variance(max(1, int(n_i)), 0.0)))

    def log_probabilities(self, reports: Reports, code: int, total_bits: int) -> np.ndarray:
        level = self.validate(reports)
        out = np.full(level.shape[0], -np.inf)
        for i in range(self.G):  # one oracle call per level
            rows = np.flatnonzero(level == i)
            if rows.size == 0:
                continue
            item = int(self.map(i, np.asarray([code >> (total_bits - self.lengths[i])]))[0])
            out[rows] = -np.log(self.G) + oracle_log_probabilities(self.oracles[i],
                                                                   self.level_reports(reports, i, rows), item)
        return out

    def effective_epsilon(self) -> float:
        return max(o.privacy().eps for o in self.oracles)
