"""Prefix levels over a pluggable frequency oracle: the client and the per-level estimates shared
by PEM (:mod:`.prefix_extending`) and TreeHist (:mod:`.treehist`).

Every user draws a level ``i`` uniformly from ``[0, G)`` (independently of its value) and reports
the ``t_i``-bit prefix of its encoded value through level ``i``'s oracle, built over
``D_i = min(2^{t_i}, max_domain)`` items (the prefix itself when it fits, its public
domain-reduction hash otherwise, :class:`~._common.UniversalHash`). On a hashed level the user also
draws one of ``r = hash_copies`` independent hashes uniformly: a (level, copy) pair is a *group*.
One report per user, users split over groups by data-independent coins: the report is as private
as the least private level oracle (parallel composition), and its exact probability is
``Pr[group] Pr_i[y | map_g(x)] = (1/(G r_i)) Pr_i[y | map_g(x)]``.

Why copies: candidates of one level are the previous survivors extended by every suffix, so a
heavy prefix's siblings are candidates too; a candidate that shares its bucket with a heavy
candidate would inherit its count. The server sees which candidates share a bucket under each
hash; a candidate's estimate is the mean over the copies in which its bucket holds no other
candidate (when every copy is shared, the copy with the smallest estimate: sharing adds mass), so
a false candidate is promoted only when it shares a bucket with a heavy one under every copy
(probability about ``(h / D)^r`` for ``h`` heavy candidates). Keep the candidates of a level well
below ``D``: most buckets then hold one candidate.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.privacy import PrivacyStatement
from ...core.validation import check_positive_int
from ..base import Reports, check_n
from ..registry import FREQUENCY_ORACLES, frequency_oracle
from ..sketch import draw_hash_seed
from ._common import HeavyHitterMechanism, UniversalHash, oracle_log_probabilities

__all__ = ["PrefixLevels", "PrefixTreeMechanism"]

#: Default largest oracle domain per level (above it prefixes are hashed).
DEFAULT_MAX_DOMAIN = 4096


class PrefixLevels:
    """``G`` levels of prefix lengths ``t_0 < ... < t_{G-1}``, one registry oracle each."""

    def __init__(self, epsilon: float, lengths: list[int], oracle: str, oracle_params: dict | None,
                 max_domain: int, hash_seed: int | None, hash_copies: int = 2) -> None:
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
        self.hash_copies = check_positive_int(hash_copies, "hash_copies")
        if self.hash_copies > 16:
            raise ValidationError(f"hash_copies must be an integer in [1, 16], got {hash_copies}",
                                  parameter="hash_copies")
        self.copies = [self.hash_copies if h else 1 for h in self.hashed]
        self.hashers = [[UniversalHash(D, self.hash_seed, 16 * i + j) for j in range(r)] if h else [None]
                        for i, (D, h, r) in enumerate(zip(self.domains, self.hashed, self.copies))]
        #: (level, copy) of every group, and the first group of every level
        self.groups = [(i, j) for i in range(self.G) for j in range(self.copies[i])]
        self.n_groups = len(self.groups)
        self.first_group = np.concatenate([[0], np.cumsum(self.copies)]).astype(np.int64)
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
        level_shapes = [tuple(np.shape(o.aggregate(p))) for o, p in zip(self.oracles, probe)]
        self.stat_shapes = [level_shapes[i] for i, _ in self.groups]

    def map(self, i: int, prefixes: np.ndarray, copy: int = 0) -> np.ndarray:
        """Oracle item of ``t_i``-bit prefixes at level ``i`` under hash ``copy`` (identity, or the
        public hash)."""
        h = self.hashers[i][copy]
        return np.asarray(prefixes, dtype=np.int64) if h is None else h(prefixes)

    def prefix(self, codes: np.ndarray, i: int, total_bits: int) -> np.ndarray:
        return np.asarray(codes, dtype=np.int64) >> (total_bits - self.lengths[i])

    # --- client -------------------------------------------------------------------------
    def randomize(self, codes: np.ndarray, total_bits: int, rng: np.random.Generator) -> Reports:
        n = codes.shape[0]
        level = rng.integers(0, self.G, size=n, dtype=np.int64)
        copy = rng.integers(0, np.asarray(self.copies, dtype=np.int64)[level], dtype=np.int64)
        group = self.first_group[level] + copy
        out: dict[str, np.ndarray] = {"group": group}
        for f in self.fields:
            out[f] = np.zeros((n, *self.wire_shapes[f]), dtype=self.dtypes[f])
        for g, (i, j) in enumerate(self.groups):  # one vectorized oracle call per group
            rows = np.flatnonzero(group == g)
            if rows.size == 0:
                continue
            rep = self.oracles[i].randomize(self.map(i, self.prefix(codes[rows], i, total_bits), j), rng)
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
        if not isinstance(reports, dict) or set(reports) != {"group", *self.fields}:
            raise ValidationError(f"reports must have exactly the fields {sorted(['group', *self.fields])}",
                                  parameter="reports")
        group = np.asarray(reports["group"])
        if group.ndim != 1 or group.dtype == np.bool_ or not np.issubdtype(group.dtype, np.integer) or \
                (group.size and (int(group.min()) < 0 or int(group.max()) >= self.n_groups)):
            raise ValidationError(f"group must be integers in [0, {self.n_groups})", parameter="group")
        return group.astype(np.int64)

    # --- analyzer -----------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> tuple[np.ndarray, list[np.ndarray]]:
        group = self.validate(reports)
        users = np.bincount(group, minlength=self.n_groups).astype(np.int64)
        stats = []
        for g, (i, _) in enumerate(self.groups):  # one oracle aggregate per group
            rows = np.flatnonzero(group == g)
            if rows.size == 0:
                stats.append(np.zeros(self.stat_shapes[g], dtype=np.int64))
                continue
            sub = self.level_reports(reports, i, rows)
            sub = self.oracles[i].validate_reports(sub)
            stats.append(np.asarray(self.oracles[i].aggregate(sub)))
        return users, stats

    def level_users(self, users: np.ndarray) -> np.ndarray:
        """Users per level from the users per group."""
        return np.add.reduceat(np.asarray(users, dtype=np.int64), self.first_group[:-1])

    def estimate_level(self, i: int, piece: Any, users: np.ndarray, prefixes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fractions of level ``i``'s users holding each prefix, and their standard errors.

        ``piece(g)`` is group ``g``'s oracle statistic, ``users`` the users per group. On a hashed
        level a bucket's estimate ``f_b`` also counts the prefixes sharing the bucket;
        ``(f_b - 1/D)/(1 - 1/D)`` removes their mean contribution over the draw of the hash
        (collision probability ``1/D`` per pair, up to the ``O(D/p)`` non-uniformity of the final
        reduction); the copies are combined as in the module docstring.
        """
        fs, ss, clean = [], [], []
        for j in range(self.copies[i]):  # one oracle estimate per hash copy
            g = int(self.first_group[i]) + j
            n_g = int(users[g])
            if n_g < 1:
                raise ValidationError(f"level {i} (hash copy {j}) received no report: too few users for "
                                      f"{self.n_groups} groups", parameter="statistic")
            est = self.oracles[i].estimate(piece(g), n_g)
            items = self.map(i, prefixes, j)
            f, s = est.values[items], est.stderr[items]
            if self.hashed[i]:
                D = self.domains[i]
                f = (f - 1.0 / D) / (1.0 - 1.0 / D)
                s = s / (1.0 - 1.0 / D)
                counts = np.bincount(items, minlength=D)
                clean.append(counts[items] == 1)
            else:
                clean.append(np.ones(items.shape, dtype=bool))
            fs.append(f)
            ss.append(s)
        F, S, C = np.stack(fs), np.stack(ss), np.stack(clean)
        # no clean copy: the copy with the smallest estimate (the least contaminated one: sharing
        # adds non-negative mass in expectation)
        lowest = np.zeros_like(C)
        lowest[np.argmin(F, axis=0), np.arange(F.shape[1])] = True
        C = np.where(C.any(axis=0)[None, :], C, lowest)
        w = C.sum(axis=0)
        f = (F * C).sum(axis=0) / w
        s = np.sqrt((S**2 * C).sum(axis=0)) / w
        return f, s

    def zero_stderr(self, i: int, n_i: int) -> float:
        """Standard deviation of a fraction estimate at level ``i`` (``n_i`` users over its ``r``
        copies) for an item nobody holds: the mean of ``r`` estimates from ``n_i / r`` users each."""
        r = self.copies[i]
        return float(np.sqrt(self.oracles[i].variance(max(1, int(n_i) // r), 0.0) / r))

    def log_probabilities(self, reports: Reports, code: int, total_bits: int) -> np.ndarray:
        group = self.validate(reports)
        out = np.full(group.shape[0], -np.inf)
        for g, (i, j) in enumerate(self.groups):  # one oracle call per group
            rows = np.flatnonzero(group == g)
            if rows.size == 0:
                continue
            item = int(self.map(i, np.asarray([code >> (total_bits - self.lengths[i])]), j)[0])
            out[rows] = -np.log(self.G) - np.log(self.copies[i]) + oracle_log_probabilities(
                self.oracles[i], self.level_reports(reports, i, rows), item)
        return out

    def effective_epsilon(self) -> float:
        return max(o.privacy().eps for o in self.oracles)


class PrefixTreeMechanism(HeavyHitterMechanism):
    """What PEM and TreeHist share: each user reports the prefix of its code at one uniformly
    random level through that level's oracle (:class:`PrefixLevels`); the statistic is the users
    per level followed by every level's oracle statistic. Subclasses pick the levels (their
    ``lengths``) and the survivors' rule (``estimate``); ``title`` names them in the statement."""

    title = ""

    def _init_levels(self, lengths: list[int], oracle: str, oracle_params: dict | None, max_domain: int,
                     hash_seed: int | None, hash_copies: int) -> None:
        self.levels = PrefixLevels(self.epsilon, lengths, oracle, oracle_params, max_domain, hash_seed, hash_copies)
        self.hash_seed = self.levels.hash_seed
        self._layout(self.levels.n_groups, self.levels.stat_shapes)

    @property
    def lengths(self) -> list[int]:
        """Prefix length (bits) of every level."""
        return list(self.levels.lengths)

    def _privacy(self) -> PrivacyStatement:
        return PrivacyStatement(self.levels.effective_epsilon(), 0.0, "local", "replace_one",
                                note=f"{self.title} over {self.levels.oracle_name}: one report per user at a "
                                     f"random level of {self.levels.G}; requested eps {self.epsilon:g}")

    # --- client -------------------------------------------------------------------------
    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        return self.levels.randomize(self.encode(values), self.codec.bits, rng)

    def validate_reports(self, reports: Reports) -> Reports:
        self.levels.validate(reports)
        return reports

    # --- analyzer -----------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """1-d int64: users per level, then every level's oracle statistic (flattened)."""
        users, stats = self.levels.aggregate(reports)
        return self._pack(users, stats)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Variance of the final fraction estimate of an item of true fraction ``value``: the last
        level's oracle over its ``n / G`` users (expected size; the count's variance is ``n^2``
        times this)."""
        n_last = max(1, round(check_n(n) / self.levels.G))
        return float(self.levels.oracles[-1].variance(n_last, float(value)))

    # --- privacy ------------------------------------------------------------------------
    def log_probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """``log Pr[y | x] = -log G + log Pr_level[y | map_level(prefix(x))]``."""
        return self.levels.log_probabilities(reports, self._one_code(x), self.codec.bits)

