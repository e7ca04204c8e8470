"""Shared pieces of the heavy-hitter mechanisms: the string <-> bits encoding, the public
domain-reduction hash, and the base class of the contract.

Encoding
--------
A word over the alphabet ``S`` is padded (or truncated) to ``L`` symbols; the padding symbol
has index 0 and the ``i``-th alphabet character index ``i + 1``, so ``A = |S| + 1`` symbols. Every
symbol takes ``b = ceil(log2 A)`` bits and the word is the ``B = L b``-bit integer whose most
significant ``b`` bits are its first symbol: a string prefix of ``t`` symbols is the bit prefix of
``t b`` bits, so prefix trees over bits are prefix trees over strings. Integer values in
``[0, 2^B)`` use the same ``B``-bit big-endian order directly.

Domain reduction
----------------
A prefix of ``t`` bits lives in a domain of ``2^t`` items. A frequency oracle of the registry is
built over ``D = 2^t`` items while ``2^t <= max_domain``; above that the prefix is mapped to
``[0, max_domain)`` by a public hash drawn from a universal family (the 30-bit limbs
``x_2, x_1, x_0`` of ``x``, ``((a_2 x_2 + a_1 x_1 + a_0 x_0 + c) mod p) mod D`` with
``p = 2^31 - 1`` and ``a_i, c`` uniform in ``[0, p)``: two distinct inputs collide before the final
reduction with probability at most ``1/p`` over the draw of the ``a_i``). The map is public and
independent of the data, so it costs no privacy (post-processing of the value); its only effect
is that an estimate for a prefix also counts the users whose prefix shares its bucket (a
non-negative bias of about ``(1 - f) / D`` in fraction on average over the draw of the hash).
"""

from __future__ import annotations

import functools
import math
from typing import Any, ClassVar

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.validation import check_positive_int
from ..base import LocalRandomizer, Reports, _check_real_array, _wrap_checked, check_n

__all__ = ["StringCodec", "IntegerCodec", "HexWordCodec", "UniversalHash", "HeavyHitterMechanism", "make_codec",
           "DEFAULT_ALPHABET", "MAX_CODE_BITS"]

#: Lower-case Latin letters (the padding symbol is added in front).
DEFAULT_ALPHABET = "abcdefghijklmnopqrstuvwxyz"
#: Largest encoded width: codes are non-negative int64.
MAX_CODE_BITS = 62
#: symbol-table sentinel of StringCodec: a character outside the alphabet (no alphabet has 2^32 - 1 characters)
OUTSIDE = np.uint32(0xFFFFFFFF)
_P31 = (1 << 31) - 1
_LIMB = 30


class UniversalHash:
    """``h(x) = ((a_2 x_2 + a_1 x_1 + a_0 x_0 + c) mod (2^31 - 1)) mod size`` on non-negative
    int64 ``x`` cut in 30-bit limbs ``x_i``; ``a_i, c`` drawn from ``seed`` (public)."""

    def __init__(self, size: int, seed: int, salt: int) -> None:
        self.size = int(size)
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x4848, int(salt)]))
        self.coefficients = [int(v) for v in rng.integers(1, _P31, size=3)]
        self.offset = int(rng.integers(0, _P31))

    def __call__(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        mask = (1 << _LIMB) - 1
        acc = np.full(x.shape, self.offset, dtype=np.int64)
        for i, a in enumerate(self.coefficients):  # three limbs, each a vectorized multiply-add
            acc = (acc + a * ((x >> (_LIMB * i)) & mask)) % _P31
        return acc % self.size


class IntegerCodec:
    """Values are integers in ``[0, 2^bits)``, prefixes their most significant bits."""

    kind = "integer"

    def __init__(self, bits: int) -> None:
        self.bits = check_positive_int(bits, "bits")
        if self.bits > MAX_CODE_BITS:
            raise ValidationError(f"bits must be an integer in [1, {MAX_CODE_BITS}], got {bits}", parameter="bits")
        self.symbol_bits = 1

    def encode(self, values: Any) -> np.ndarray:
        """int64 codes of ``values`` (integers in ``[0, 2^bits)``)."""
        arr = np.asarray(values)
        if arr.ndim != 1 or arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise ValidationError(f"values must be a 1-d array of integers in [0, 2^{self.bits}), "
                                  f"got dtype {arr.dtype} and shape {arr.shape}", parameter="values")
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= (1 << self.bits)):
            raise ValidationError(f"values must lie in [0, 2^{self.bits}), got [{arr.min()}, {arr.max()}]",
                                  parameter="values")
        return arr.astype(np.int64)

    def decode(self, codes: Any) -> np.ndarray:
        return np.asarray(codes, dtype=np.int64)

    def valid_prefixes(self, prefixes: np.ndarray, t: int) -> np.ndarray:
        """Every bit prefix is the prefix of some value."""
        return np.ones(np.shape(prefixes), dtype=bool)


class StringCodec:
    """Words over ``alphabet`` padded/truncated to ``max_length`` symbols, ``symbol_bits`` bits each
    (module docstring). ``encode`` raises a :class:`ValidationError` naming ``values`` for a
    character outside the alphabet."""

    kind = "string"

    def __init__(self, alphabet: str = DEFAULT_ALPHABET, max_length: int = 10) -> None:
        if not isinstance(alphabet, str) or not alphabet or len(set(alphabet)) != len(alphabet) or "\0" in alphabet:
            raise ValidationError("alphabet must be a non-empty string of distinct characters (no NUL)",
                                  parameter="alphabet")
        self.alphabet = alphabet
        self.max_length = check_positive_int(max_length, "max_length")
        self.symbols = len(alphabet) + 1  # index 0 = padding
        self.symbol_bits = max(1, (self.symbols - 1).bit_length())
        self.bits = self.max_length * self.symbol_bits
        if self.bits > MAX_CODE_BITS:
            raise ValidationError(f"max_length * bits per symbol must be <= {MAX_CODE_BITS}, got "
                                  f"{self.max_length} * {self.symbol_bits}", parameter="max_length")
        cps = np.array([ord(c) for c in alphabet], dtype=np.int64)
        self._order = np.argsort(cps)
        self._sorted = cps[self._order]
        self._chars = np.array([0] + [ord(c) for c in alphabet], dtype=np.uint32)  # symbol -> code point
        self._shifts = (self.symbol_bits * np.arange(self.max_length - 1, -1, -1)).astype(np.int64)
        self._lookup = np.full(int(cps.max()) + 2, OUTSIDE, dtype=np.uint32)   # code point -> symbol
        self._lookup[0] = 0
        self._lookup[cps] = np.arange(1, cps.size + 1)
        # the same table in uint8 (sentinel 255) when every symbol fits: no widening, no final cast
        self._outside = OUTSIDE if self.symbols > 255 else np.uint8(255)
        self._table = self._lookup if self.symbols > 255 else \
            np.where(self._lookup == OUTSIDE, 255, self._lookup).astype(np.uint8)

    def symbols_of(self, values: Any) -> np.ndarray:
        """``(n, L)`` uint8 symbol matrix of ``values`` (str or bytes array; bytes read as Latin-1)."""
        arr = np.asarray(values)
        if arr.ndim != 1 or arr.dtype.kind not in "US":
            raise ValidationError(f"values must be a 1-d array of strings or bytes, got dtype {arr.dtype} "
                                  f"and shape {arr.shape}", parameter="values")
        L = self.max_length
        if arr.dtype.kind == "U":
            cp = np.ascontiguousarray(arr.astype(f"U{L}")).view(np.uint32).reshape(arr.shape[0], L)
        else:
            cp = np.ascontiguousarray(arr.astype(f"S{L}")).view(np.uint8).reshape(arr.shape[0], L)
        # code point -> symbol through a table over [0, largest code point of the alphabet + 1]
        # (padding NUL -> 0; a character outside the alphabet -> the sentinel, which is the table's
        # last entry, where every code point past the table is clipped to)
        lut = self._table
        sym = lut[np.minimum(cp, lut.size - 1)]
        bad = sym == self._outside
        if np.any(bad):
            r, c = np.argwhere(bad)[0]
            raise ValidationError(f"values[{r}] has the character {chr(int(cp[r, c]))!r} outside the alphabet "
                                  f"{self.alphabet!r}", parameter="values")
        # a NUL inside a word (padding followed by a character) cannot be represented
        if L > 1 and np.any((sym[:, :-1] == 0) & (sym[:, 1:] != 0)):
            raise ValidationError("values must not contain NUL characters", parameter="values")
        return sym.astype(np.uint8, copy=False)

    def encode(self, values: Any) -> np.ndarray:
        """int64 codes (module docstring) of ``values``."""
        return self.codes_of(self.symbols_of(values))

    def codes_of(self, symbols: np.ndarray) -> np.ndarray:
        """int64 codes of an ``(n, L)`` symbol matrix."""
        sym = np.asarray(symbols)
        code = np.zeros(sym.shape[0], dtype=np.int64)
        for i in range(sym.shape[1]):  # L columns, most significant first: one shift-or each
            code <<= self.symbol_bits
            code |= sym[:, i]
        return code

    def symbol_matrix(self, codes: Any) -> np.ndarray:
        """``(n, L)`` symbols of int64 codes."""
        c = np.asarray(codes, dtype=np.int64)
        return (c[:, None] >> self._shifts[None, :]) & ((1 << self.symbol_bits) - 1)

    def decode(self, codes: Any) -> np.ndarray:
        """The words (numpy ``U`` strings, padding stripped) of int64 codes."""
        sym = self.symbol_matrix(codes)
        if sym.size and int(sym.max()) >= self.symbols:
            raise ValidationError("codes hold symbols outside the alphabet", parameter="codes")
        cp = self._chars[sym].astype(np.uint32)
        return np.ascontiguousarray(cp).view(f"U{self.max_length}").reshape(-1)

    def valid_prefixes(self, prefixes: np.ndarray, t: int) -> np.ndarray:
        """Whether each ``t``-bit prefix is the prefix of some encoded word: every complete
        symbol is ``< A``, no character follows a padding symbol, and a partial last symbol can
        still be completed below ``A``."""
        p = np.asarray(prefixes, dtype=np.int64)
        b = self.symbol_bits
        full, rem = divmod(int(t), b)
        ok = np.ones(p.shape, dtype=bool)
        prev_pad = np.zeros(p.shape, dtype=bool)
        for i in range(full):  # at most L symbols
            s = (p >> (t - (i + 1) * b)) & ((1 << b) - 1)
            ok &= s < self.symbols
            ok &= ~(prev_pad & (s != 0))
            prev_pad = s == 0
        if rem:
            part = p & ((1 << rem) - 1)
            ok &= (part << (b - rem)) < self.symbols  # the smallest completion is a symbol
            ok &= ~(prev_pad & (part != 0))
        return ok


class HexWordCodec(StringCodec):
    """Integers in ``[0, 2^bits)`` as fixed-length words of hexadecimal digits (most significant
    first), ``L = ceil(bits / 4)`` rounded up to a multiple of ``multiple``: the fragment-based
    SFP over integer identifiers. ``decode`` returns the integers; encodings with a padding symbol
    are invalid (every word has exactly ``L`` digits)."""

    def __init__(self, bits: int, multiple: int = 1) -> None:
        self.value_bits = check_positive_int(bits, "bits")
        if self.value_bits > 48:
            raise ValidationError(f"bits must be an integer in [1, 48], got {bits}", parameter="bits")
        digits = -(-self.value_bits // 4)
        digits = -(-digits // multiple) * multiple
        super().__init__("0123456789abcdef", digits)
        self.kind = "integer"

    def symbols_of(self, values: Any) -> np.ndarray:
        arr = np.asarray(values)
        if arr.ndim != 1 or arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
            raise ValidationError(f"values must be a 1-d array of integers in [0, 2^{self.value_bits}), "
                                  f"got dtype {arr.dtype} and shape {arr.shape}", parameter="values")
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= (1 << self.value_bits)):
            raise ValidationError(f"values must lie in [0, 2^{self.value_bits}), got [{arr.min()}, {arr.max()}]",
                                  parameter="values")
        x = arr.astype(np.int64)
        shifts = 4 * np.arange(self.max_length - 1, -1, -1, dtype=np.int64)
        return (((x[:, None] >> shifts[None, :]) & 15) + 1).astype(np.uint8)

    def decode(self, codes: Any) -> np.ndarray:
        sym = self.symbol_matrix(codes)
        if sym.size and (int(sym.min()) < 1 or int(sym.max()) > 16):
            raise ValidationError("codes hold symbols outside the hexadecimal digits", parameter="codes")
        shifts = 4 * np.arange(self.max_length - 1, -1, -1, dtype=np.int64)
        return ((sym - 1) << shifts[None, :]).sum(axis=1).astype(np.int64)

    def valid_prefixes(self, prefixes: np.ndarray, t: int) -> np.ndarray:
        ok = super().valid_prefixes(prefixes, t)
        p = np.asarray(prefixes, dtype=np.int64)
        b = self.symbol_bits
        for i in range(int(t) // b):  # no padding symbol anywhere
            ok &= ((p >> (t - (i + 1) * b)) & ((1 << b) - 1)) != 0
        return ok


def make_codec(alphabet: str | None, max_length: int | None, bits: int | None) -> StringCodec | IntegerCodec:
    """``bits`` given: integer values in ``[0, 2^bits)``; otherwise words over ``alphabet``."""
    if bits is not None:
        if alphabet is not None or max_length is not None:
            raise ValidationError("give either bits (integer values) or alphabet/max_length (words), not both",
                                  parameter="bits")
        return IntegerCodec(bits)
    return StringCodec(DEFAULT_ALPHABET if alphabet is None else alphabet, 10 if max_length is None else max_length)


class HeavyHitterMechanism(LocalRandomizer[Estimate]):
    """Base of the heavy-hitter mechanisms: an eps-LDP randomizer of words (or integers) whose
    analyzer returns the discovered items.

    ``estimate(statistic, n)`` returns an :class:`~shuffledp.core.Estimate` of kind ``"count"``
    whose ``labels`` are the discovered items (words or integers), ``values`` their estimated
    numbers of users and ``stderr`` the closed-form standard errors; ``extra`` holds the details
    of the search. The statistic is a 1-d int64 array (concatenated oracle statistics, preceded by
    the number of users per group), so ``aggregate(a ∪ b) == aggregate(a) + aggregate(b)``.
    """

    name: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _wrap_checked(cls)

    # layout of the statistic: ``_groups`` user counts, then the oracle statistics in order
    _groups: int
    _pieces: list[tuple[int, ...]]

    def _layout(self, groups: int, shapes: list[tuple[int, ...]]) -> None:
        self._groups = groups
        self._pieces = [tuple(int(v) for v in s) for s in shapes]
        sizes = [int(np.prod(s)) for s in self._pieces]
        self._offsets = np.concatenate([[groups], groups + np.cumsum(sizes)]).astype(np.int64)

    def _pack(self, users: np.ndarray, stats: list[np.ndarray]) -> np.ndarray:
        out = np.empty(int(self._offsets[-1]), dtype=np.int64)
        out[:self._groups] = users
        for i, s in enumerate(stats):
            out[self._offsets[i]:self._offsets[i + 1]] = np.asarray(s, dtype=np.int64).ravel()
        return out

    def _piece(self, statistic: np.ndarray, i: int) -> np.ndarray:
        return np.asarray(statistic)[self._offsets[i]:self._offsets[i + 1]].reshape(self._pieces[i])

    def group_users(self, statistic: Any) -> np.ndarray:
        """Users per group (level or fragment position) recorded by ``statistic``."""
        return np.asarray(statistic)[:self._groups].astype(np.int64)

    # --- contract checks ----------------------------------------------------------------
    def _statistic_shape(self) -> tuple[int, ...]:
        return (int(self._offsets[-1]),)

    def _recorded_users(self, statistic: np.ndarray) -> float:
        return float(np.sum(np.asarray(statistic)[:self._groups]))

    def _check_statistic_for(self, statistic: Any, n: int) -> np.ndarray:
        s = np.asarray(statistic)
        if s.shape != self._statistic_shape():
            raise ValidationError(f"statistic must have shape {self._statistic_shape()} (the output of "
                                  f"{type(self).__name__}.aggregate), got {s.shape}", parameter="statistic")
        if s.dtype == np.bool_ or not np.issubdtype(s.dtype, np.integer):
            raise ValidationError(f"statistic must be integer counts, got dtype {s.dtype}", parameter="statistic")
        if s.size and int(s[:self._groups].min()) < 0:
            raise ValidationError("statistic: negative number of users in a group", parameter="statistic")
        return s

    def _check_value(self, value: Any) -> np.ndarray:
        return _check_real_array(value, "value", 0.0, 1.0)

    def _check_batch_fits(self, values: Any) -> None:
        """Reports are O(1) words per user (sketch rows at most): no plan needed."""

    def encode(self, values: Any) -> np.ndarray:
        """int64 codes of ``values`` (:class:`StringCodec` / :class:`IntegerCodec`)."""
        return self.codec.encode(values)

    def log_probabilities(self, reports: Reports, x: Any) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """Exact ``Pr[R(x) = y]`` of each report (:meth:`log_probabilities` exponentiated)."""
        return np.exp(self.log_probabilities(reports, x))

    def _one_code(self, x: Any) -> int:
        arr = np.asarray([x])
        return int(self.codec.encode(arr)[0])

    def _labels(self, codes: np.ndarray) -> tuple:
        dec = self.codec.decode(codes)
        return tuple(str(v) for v in dec.tolist()) if self.codec.kind == "string" else tuple(int(v) for v in dec)


def oracle_log_probabilities(oracle: Any, reports: Reports, x: int) -> np.ndarray:
    """``log Pr[y | x]`` of a registry oracle (its own ``log_probabilities`` where it has one:
    sketches' probabilities underflow)."""
    if hasattr(oracle, "log_probabilities"):
        return np.asarray(oracle.log_probabilities(reports, x), dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(oracle.probabilities(reports, x), dtype=np.float64))


def check_n_users(n: Any) -> int:
    return check_n(n)


@functools.lru_cache(maxsize=None)
def normal_quantile(p: float) -> float:
    """``Phi^{-1}(p)`` (scipy)."""
    from scipy.stats import norm

    return float(norm.ppf(p))


def log2_ceil(k: int) -> int:
    return max(0, math.ceil(math.log2(k))) if k > 1 else 0
