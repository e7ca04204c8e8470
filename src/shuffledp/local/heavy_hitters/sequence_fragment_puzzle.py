"""Apple's Sequence Fragment Puzzle (SFP): new-word discovery over an unknown dictionary.

Source: Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning
Journal 1(8), 2017 (SFP over the Count Mean Sketch and Hadamard Count Mean Sketch); Apple patent
US 9594741 ("Learning new words": two-character n-grams, their position in the word, and a hash
of the word as the puzzle piece).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, round_up
from ...core.validation import check_epsilon, check_positive_int, check_real
from ..base import Reports, check_n
from ..registry import frequency_oracle
from ..sketch import draw_hash_seed
from ._common import (DEFAULT_ALPHABET, HeavyHitterMechanism, HexWordCodec, StringCodec, UniversalHash,
                      oracle_log_probabilities)

__all__ = ["SequenceFragmentPuzzle", "sketch_fractions"]

_SKETCHES = ("cms", "hcms")


class _CandidateFamily:
    """The hash family of a sketch restricted to given items (its ``query`` on those only)."""

    def __init__(self, family: Any, items: np.ndarray) -> None:
        self.family = family
        self.items = np.asarray(items, dtype=np.int64)

    def query(self, G: np.ndarray) -> np.ndarray:
        rows = np.arange(self.family.k, dtype=np.int64)
        H = self.family(rows[:, None], self.items[None, :])
        return np.take_along_axis(np.asarray(G), H, axis=1).sum(axis=0, dtype=np.float64)


def sketch_fractions(sketch: Any, statistic: np.ndarray, n: int, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fraction estimates of a CMS/HCMS (``debias="family"``) at ``items`` only, and their
    standard errors: the sketch's own estimator ``m/(m-1) (T(x) - n/m) / n`` and closed-form
    variance, with the collision term ``S2`` from the estimates at ``items`` (the mass of the
    other items is unknown; as the sketch's own ``estimate`` does, clipped estimates are used),
    in O(k |items|) instead of O(k d)."""
    view = copy.copy(sketch)
    view.family = _CandidateFamily(sketch.family, items)
    T = view._query(statistic, n)
    m = sketch.m
    f = (m / (m - 1)) * (T - n / m) / n
    fc = np.clip(f, 0.0, 1.0)
    s2 = np.maximum(min(1.0, float(np.sum(fc**2))) - fc**2, 0.0)
    var = sketch._count_variance(n, fc * n, s2 * n * n) / n**2
    return f, np.sqrt(np.maximum(var, 0.0))


class SequenceFragmentPuzzle(HeavyHitterMechanism):
    """Apple's SFP: eps-LDP discovery of frequent words over an unknown dictionary.

    Words over ``alphabet`` are padded/truncated to ``L = max_length`` symbols (padding symbol
    included, :class:`~._common.StringCodec`). ``P = L / fragment_length`` fragment positions
    ``0, l, 2l, ...``; the puzzle piece ``h(w)`` of a word is a public universal hash of it into
    ``[2^puzzle_bits]``.

    Client: draw a position ``p`` uniformly (independent of the word); the fragment key
    ``r = h(w) A^l + (w[p], ..., w[p + l - 1])`` (base ``A = |alphabet| + 1``, an injective index
    into ``[2^puzzle_bits A^l]``) goes through the **fragment sketch** (CMS or HCMS at
    ``fragment_epsilon``), and the word, mapped by a public universal hash into
    ``[word_domain]``, through the **word sketch** (CMS or HCMS at
    ``epsilon - fragment_epsilon``). **Every user sends both**. Fields
    ``{"position", "fragment_<sketch fields>", "word_<sketch fields>"}``.

    Server: one fragment sketch per position (from its ``n_p`` users) and one word sketch (all
    ``n`` users). At each position the ``fragment_top`` keys with the largest estimates are kept;
    for every puzzle piece kept at **every** position the candidates are the cartesian product of
    its fragments in position order (words with a character after padding dropped); each candidate
    is estimated from the word sketch (count ``n f``, stderr ``n`` times the sketch's); candidates
    whose estimate is at most ``min_z`` standard errors are dropped, and the output is the others
    sorted by estimate (the top ``k`` when ``k`` is given). Fragments joined across a puzzle-piece
    collision produce false words whose word-sketch estimate is near 0: without the cut they fill
    the last places of the top ``k`` (eps = 3, n = 10^6, Zipf words: in 2 of 6 runs the 10th word
    listed was a false one, estimated at -196 and -631 users with standard errors of about 1500).

    Privacy: by sequential composition the report is ``(eps_f + eps_w)``-LDP, with ``eps_f`` and
    ``eps_w`` the two sketches' effective epsilons (``eps_f <= fragment_epsilon``,
    ``eps_w <= epsilon - fragment_epsilon``, so the total is ``<= epsilon``); the position is a
    data-independent coin: ``Pr[y | w] = (1/P) Pr_f[y_f | r(w, p)] Pr_w[y_w | hash(w)]``.
    The word hash's collisions add the counts of words sharing a bucket to an estimate (about
    ``(1 - f) / word_domain`` in fraction on average, not removed).

    Parameters
    ----------
    epsilon : float
        Total local privacy parameter of a report, > 0.
    fragment_epsilon : float, optional
        The fragment sketch's share (default ``epsilon / 2``), ``0 < fragment_epsilon < epsilon``.
    sketch : {"cms", "hcms"}
        Sketch of both stages (default ``"cms"``).
    fragment_k, fragment_m, word_k, word_m : int
        Rows and columns of the fragment and word sketches (default 64 x 1024 both).
    alphabet, max_length, fragment_length, puzzle_bits :
        The encoding: default a-z, 10 symbols, 2-symbol fragments, 8-bit puzzle pieces.
    fragment_top : int
        Keys kept per position (default 20).
    k : int, optional
        Return only the ``k`` largest estimates.
    word_domain : int
        Buckets of the word hash (default 2^20).
    bits : int, optional
        Integer values in ``[0, 2^bits)`` instead of words: each is the word of its hexadecimal
        digits (``ceil(bits/4)`` rounded up to a multiple of ``fragment_length``;
        ``alphabet``/``max_length`` are then not used).
    min_z : float or None
        Keep only candidates whose estimated count exceeds ``min_z`` standard errors (default 2:
        a word with no user passes with probability about 2.3% under the normal approximation);
        ``None`` keeps every candidate.
    max_candidates : int
        Largest number of candidate words per puzzle piece (default 10^5); above it the piece's
        fragment lists are cut to their best ``floor(max_candidates^(1/P))`` each.
    hash_seed : int, optional
        Seed of all public hashes and sketch families (drawn from the OS when omitted).
    """

    name = "sfp"

    def __init__(self, epsilon: float, fragment_epsilon: float | None = None, sketch: str = "cms",
                 fragment_k: int = 64, fragment_m: int = 1024, word_k: int = 64, word_m: int = 1024,
                 alphabet: str = DEFAULT_ALPHABET, max_length: int = 10, fragment_length: int = 2,
                 puzzle_bits: int = 8, fragment_top: int = 20, k: int | None = None, word_domain: int = 1 << 20,
                 max_candidates: int = 100_000, bits: int | None = None, hash_seed: int | None = None,
                 min_z: float | None = 2.0) -> None:
        super().__init__(epsilon)
        if not isinstance(sketch, str) or sketch.lower() not in _SKETCHES:
            raise ValidationError(f"sketch must be one of {_SKETCHES}, got {sketch!r}", parameter="sketch")
        self.sketch = sketch.lower()
        fe = self.epsilon / 2 if fragment_epsilon is None else check_epsilon(fragment_epsilon, "fragment_epsilon")
        if not fe < self.epsilon:
            raise ValidationError(f"fragment_epsilon must lie in (0, epsilon={self.epsilon:g}), got {fe!r}",
                                  parameter="fragment_epsilon")
        self.fragment_epsilon, self.word_epsilon = fe, self.epsilon - fe
        self.fragment_length = check_positive_int(fragment_length, "fragment_length")
        self.codec = StringCodec(alphabet, max_length) if bits is None else HexWordCodec(bits, self.fragment_length)
        if self.codec.max_length % self.fragment_length:
            raise ValidationError(f"max_length ({self.codec.max_length}) must be a multiple of fragment_length "
                                  f"({self.fragment_length})", parameter="fragment_length")
        self.puzzle_bits = check_positive_int(puzzle_bits, "puzzle_bits")
        if self.puzzle_bits > 16:
            raise ValidationError(f"puzzle_bits must be an integer in [1, 16], got {puzzle_bits}",
                                  parameter="puzzle_bits")
        self.fragment_top = check_positive_int(fragment_top, "fragment_top")
        self.k = None if k is None else check_positive_int(k, "k")
        self.max_candidates = check_positive_int(max_candidates, "max_candidates")
        self.min_z = None if min_z is None else check_real(min_z, "min_z", low=0.0)
        self.word_domain = check_positive_int(word_domain, "word_domain", minimum=2)
        if self.word_domain > (1 << 24):
            raise ValidationError(f"word_domain must be an integer in [2, 2^24], got {word_domain}",
                                  parameter="word_domain")
        self.positions = self.codec.max_length // self.fragment_length
        A = self.codec.symbols
        self.fragment_domain = (1 << self.puzzle_bits) * A**self.fragment_length
        if self.fragment_domain > (1 << 26):
            raise ValidationError(f"2^puzzle_bits * (|alphabet|+1)^fragment_length must be <= 2^26, got "
                                  f"{self.fragment_domain}", parameter="fragment_length")
        if hash_seed is None:
            hash_seed = draw_hash_seed()
        if isinstance(hash_seed, (bool, np.bool_)) or not isinstance(hash_seed, (int, np.integer)) or hash_seed < 0:
            raise ValidationError(f"hash_seed must be a non-negative integer, got {hash_seed!r}", parameter="hash_seed")
        self.hash_seed = int(hash_seed)
        self.puzzle_hash = UniversalHash(1 << self.puzzle_bits, self.hash_seed, 101)
        self.word_hash = UniversalHash(self.word_domain, self.hash_seed, 102)
        self.fragment_sketch = frequency_oracle(self.sketch, fe, self.fragment_domain, k=fragment_k, m=fragment_m,
                                                hash_seed=self.hash_seed)
        self.word_sketch = frequency_oracle(self.sketch, self.word_epsilon, self.word_domain, k=word_k, m=word_m,
                                            hash_seed=self.hash_seed + 1)
        probe = np.zeros(1, dtype=np.int64)
        g0 = np.random.default_rng(0)  # shapes only
        self._fragment_fields = list(self.fragment_sketch.randomize(probe, g0))
        self._word_fields = list(self.word_sketch.randomize(probe, g0))
        fshape = self.fragment_sketch._statistic_shape()
        self._layout(self.positions, [fshape] * self.positions + [self.word_sketch._statistic_shape()])

    def _privacy(self) -> PrivacyStatement:
        ef, ew = self.fragment_sketch.privacy().eps, self.word_sketch.privacy().eps
        return PrivacyStatement(round_up(ef + ew), 0.0, "local", "replace_one",
                                note=f"SFP over {self.sketch}: fragment sketch {ef:.6g} + word sketch {ew:.6g} "
                                     f"(sequential composition, every user sends both); requested eps {self.epsilon:g}")

    # --- client -------------------------------------------------------------------------
    def fragment_keys(self, symbols: np.ndarray, codes: np.ndarray, position: np.ndarray) -> np.ndarray:
        """``h(w) A^l + fragment`` of each word at its position (vectorized)."""
        A, n = self.codec.symbols, symbols.shape[0]
        flat = np.ascontiguousarray(symbols).reshape(-1)
        start = np.arange(n, dtype=np.int64) * symbols.shape[1] + position * self.fragment_length
        key = self.puzzle_hash(codes)
        for j in range(self.fragment_length):  # symbols of the fragment, most significant first
            key *= A
            key += flat[start + j]
        return key

    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        sym = self.codec.symbols_of(values)
        codes = self.codec.codes_of(sym)
        n = codes.shape[0]
        position = rng.integers(0, self.positions, size=n, dtype=np.int64)
        frag = self.fragment_sketch.randomize(self.fragment_keys(sym, codes, position), rng)
        word = self.word_sketch.randomize(self.word_hash(codes), rng)
        out: dict[str, np.ndarray] = {"position": position}
        out.update({"fragment_" + f: v for f, v in frag.items()})
        out.update({"word_" + f: v for f, v in word.items()})
        return out

    def _split(self, reports: Reports) -> tuple[np.ndarray, Reports, Reports]:
        expected = {"position", *("fragment_" + f for f in self._fragment_fields),
                    *("word_" + f for f in self._word_fields)}
        if not isinstance(reports, dict) or set(reports) != expected:
            raise ValidationError(f"SFP reports must have exactly the fields {sorted(expected)}", parameter="reports")
        pos = np.asarray(reports["position"])
        if pos.ndim != 1 or pos.dtype == np.bool_ or not np.issubdtype(pos.dtype, np.integer) or \
                (pos.size and (int(pos.min()) < 0 or int(pos.max()) >= self.positions)):
            raise ValidationError(f"position must be integers in [0, {self.positions})", parameter="position")
        frag = self.fragment_sketch.validate_reports({f: reports["fragment_" + f] for f in self._fragment_fields})
        word = self.word_sketch.validate_reports({f: reports["word_" + f] for f in self._word_fields})
        return pos.astype(np.int64), frag, word

    def validate_reports(self, reports: Reports) -> Reports:
        self._split(reports)
        return reports

    # --- analyzer -----------------------------------------------------------------------
    def aggregate(self, reports: Reports) -> np.ndarray:
        """1-d int64: users per position, each position's fragment-sketch statistic, then the
        word-sketch statistic (flattened)."""
        pos, frag, word = self._split(reports)
        users = np.bincount(pos, minlength=self.positions).astype(np.int64)
        stats = list(self.fragment_sketch.aggregate_groups(frag, pos, self.positions))  # one pass, all positions
        stats.append(self.word_sketch.aggregate(word))
        return self._pack(users, stats)

    def fragment_estimates(self, statistic: Any, position: int) -> tuple[np.ndarray, np.ndarray]:
        """Estimated counts (scaled to the population, ``n / n_p`` times the position's) of every
        fragment key at ``position``, and their standard errors."""
        stat = np.asarray(statistic)
        users = self.group_users(stat)
        n_p = int(users[position])
        if n_p < 1:
            raise ValidationError(f"fragment position {position} received no report", parameter="statistic")
        n = int(users.sum())
        est = self.fragment_sketch.estimate(self._piece(stat, position), n_p)
        return est.values * n, est.stderr * n

    def fragment_tops(self, statistic: Any) -> list[np.ndarray]:
        """The ``fragment_top`` keys with the largest :meth:`fragment_estimates` at every position,
        best first (ties by key): the estimates of every key at all positions from one pass of the
        sketch's hash values (:meth:`~shuffledp.local.sketch.HashFamily.query_many`)."""
        stat = np.asarray(statistic)
        users = self.group_users(stat)
        if np.any(users < 1):
            raise ValidationError(f"fragment position {int(np.flatnonzero(users < 1)[0])} received no report",
                                  parameter="statistic")
        n, m = int(users.sum()), self.fragment_sketch.m
        # the fragment estimates of every key at every position (those of fragment_estimates), the
        # sketch's hash values computed once for all positions
        T = self.fragment_sketch.query_groups([self._piece(stat, p) for p in range(self.positions)], users)
        tops = []
        for p in range(self.positions):  # keys, best first
            c = (m / (m - 1)) * (T[p] - int(users[p]) / m) / int(users[p]) * n
            tops.append(np.argsort(-c, kind="stable")[:self.fragment_top])
        return tops

    def candidates(self, statistic: Any) -> np.ndarray:
        """Codes of the candidate words assembled from the top fragment keys (class docstring)."""
        A = self.codec.symbols
        per_piece = A ** self.fragment_length
        tops = self.fragment_tops(statistic)
        pieces = set(int(v) for v in tops[0] // per_piece)
        for t in tops[1:]:
            pieces &= set(int(v) for v in t // per_piece)
        b, L = self.codec.symbol_bits, self.codec.max_length
        out = []
        for w in sorted(pieces):  # one cartesian product per puzzle piece
            lists = [t[t // per_piece == w] % per_piece for t in tops]
            size = int(np.prod([len(x) for x in lists]))
            if size > self.max_candidates:
                keep = max(1, int(self.max_candidates ** (1.0 / self.positions)))
                lists = [x[:keep] for x in lists]
            grids = np.meshgrid(*lists, indexing="ij")
            code = np.zeros(grids[0].size, dtype=np.int64)
            for p, g in enumerate(grids):
                frag = g.ravel().astype(np.int64)
                for j in range(self.fragment_length):  # symbols of the fragment
                    s = (frag // A ** (self.fragment_length - 1 - j)) % A
                    code |= s << (b * (L - 1 - (p * self.fragment_length + j)))
            out.append(code)
        if not out:
            return np.zeros(0, dtype=np.int64)
        codes = np.unique(np.concatenate(out))
        return codes[self.codec.valid_prefixes(codes, self.codec.bits)]

    def estimate(self, statistic: np.ndarray, n: int | None = None) -> Estimate:
        """Candidate words with their word-sketch counts, largest first (class docstring)."""
        stat = np.asarray(statistic)
        codes = self.candidates(stat)
        if codes.size:
            f, s = sketch_fractions(self.word_sketch, self._piece(stat, self.positions), n, self.word_hash(codes))
        else:
            f = s = np.zeros(0)
        order = np.argsort(-f, kind="stable")
        if self.min_z is not None:
            order = order[f[order] > self.min_z * s[order]]  # not distinguishable from an absent word
        dropped = int(codes.size - order.size)
        if self.k is not None:
            order = order[:self.k]
        return Estimate(f[order] * n, s[order] * n, n, self.privacy(), "count", labels=self._labels(codes[order]),
                        extra={"method": "sfp", "sketch": self.sketch, "candidates": int(codes.size),
                               "below_min_z": dropped, "min_z": self.min_z,
                               "positions": self.positions, "users_per_position": self.group_users(stat).tolist(),
                               "fragment_epsilon": self.fragment_sketch.privacy().eps,
                               "word_epsilon": self.word_sketch.privacy().eps, "hash_seed": self.hash_seed})

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Variance of a discovered word's fraction estimate (the word sketch over all ``n`` users,
        the other users spread evenly over the word domain)."""
        return float(self.word_sketch.variance(check_n(n), float(value)))

    # --- privacy ------------------------------------------------------------------------
    def log_probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """``log Pr[y | w] = -log P + log Pr_f[y_f | r(w, p)] + log Pr_w[y_w | hash(w)]``."""
        pos, frag, word = self._split(reports)
        arr = np.asarray([x])
        sym = self.codec.symbols_of(arr)
        code = self.codec.codes_of(sym)
        out = np.full(pos.shape[0], -np.log(self.positions))
        for p in range(self.positions):  # one fragment key per position
            rows = np.flatnonzero(pos == p)
            if rows.size:
                key = int(self.fragment_keys(sym, code, np.asarray([p]))[0])
                out[rows] += oracle_log_probabilities(self.fragment_sketch, {f: v[rows] for f, v in frag.items()}, key)
        out += oracle_log_probabilities(self.word_sketch, word, int(self.word_hash(code)[0]))
        return out

    def __repr__(self) -> str:
        return (f"SequenceFragmentPuzzle(epsilon={self.epsilon:g}, fragment_epsilon={self.fragment_epsilon:g}, "
                f"sketch={self.sketch!r}, positions={self.positions})")
