"""Memoization for longitudinal collection: the state a client keeps between reports.

Longitudinal oracles (RAPPOR, L-GRR, L-OUE, LOLOHA, dBitFlip, 1BitMean) split a client into
three layers:

1. **setup** (once per user, independent of the data): a hash seed (LOLOHA), the sampled buckets
   (dBitFlip), the rounding offset ``alpha`` (1BitMean); an ``(n, w)`` int64 array, ``w >= 0``;
2. **permanent** answer (once per user and *memo key*): an eps_perm-LDP randomization of the memo
   key, which is the value itself (L-GRR, L-OUE), its hash (LOLOHA), the sampled-bucket state
   (dBitFlip) or the rounded value (1BitMean). It is drawn the first time a key is reported and
   **reused** for every later report of that key;
3. **instantaneous** randomization, fresh for every report (the identity for dBitFlip and
   1BitMean without output perturbation).

Every report about one memo key is post-processing of that key's permanent answer, so any
number of them is ``eps_perm``-LDP about the key. Redrawing a permanent answer (a lost memo, a
restart that forgets it) spends another ``eps_perm``: :class:`Memo` is the table that prevents it
in simulations, and the client SDK keeps the same entries, encrypted, in its local store.

:class:`Memo` is vectorized: look-ups and inserts of a batch of users are ``searchsorted`` on
sorted int64 keys (no Python loop per user).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.validation import check_int_values

__all__ = ["Memo", "LongitudinalMixin", "transcript_epsilon", "key_epsilon"]

#: Largest user id a memo accepts (ids are combined with the memo key in one int64).
MAX_USER = (1 << 62) - 1


def _find(sorted_keys: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``q`` in ``sorted_keys`` (clipped) and whether each is present."""
    if sorted_keys.size == 0:
        return np.zeros(q.size, dtype=np.int64), np.zeros(q.size, dtype=bool)
    idx = np.searchsorted(sorted_keys, q)
    idx_c = np.minimum(idx, sorted_keys.size - 1)
    return idx_c, (idx < sorted_keys.size) & (sorted_keys[idx_c] == q)


class Memo:
    """Per-user setup rows and per-(user, memo key) permanent answers of one mechanism.

    ``setup(users, draw)`` returns each user's setup row, drawing ``draw(m)`` (``m`` new rows)
    for users seen for the first time; ``answers(users, keys, draw)`` returns the permanent
    answer of each ``(user, key)``, drawing ``draw(rows)`` (the permanent answers of the listed
    batch rows, one per new pair) for pairs seen for the first time. A memo is bound to one
    mechanism's layout (key space and row widths) on first use; using it with another layout is a
    :class:`ValidationError` naming ``memo``.
    """

    def __init__(self) -> None:
        self._layout: tuple[int, int, int, str] | None = None
        self._users = np.zeros(0, dtype=np.int64)
        self._setup = np.zeros((0, 0), dtype=np.int64)
        self._keys = np.zeros(0, dtype=np.int64)
        self._answers: np.ndarray | None = None

    # --- layout --------------------------------------------------------------------------
    def bind(self, key_space: int, setup_width: int, answer_width: int, answer_dtype: Any) -> None:
        """Fix the layout on first use; refuse a different one later."""
        layout = (int(key_space), int(setup_width), int(answer_width), np.dtype(answer_dtype).str)
        if self._layout is None:
            self._layout = layout
            self._setup = np.zeros((0, layout[1]), dtype=np.int64)
        elif self._layout != layout:
            raise ValidationError(f"this memo holds answers of another mechanism layout {self._layout} "
                                  f"(key space, setup width, answer width, dtype), not {layout}; use one Memo "
                                  "per mechanism", parameter="memo")

    @property
    def key_space(self) -> int:
        return 0 if self._layout is None else self._layout[0]

    # --- state ---------------------------------------------------------------------------
    def setup(self, users: np.ndarray, draw: Callable[[int], np.ndarray]) -> np.ndarray:
        """Setup rows of ``users`` (int64 ids), drawn once per new user."""
        assert self._layout is not None, "bind() first"
        idx, found = _find(self._users, users)
        if not found.all():
            new = np.unique(users[~found])
            rows = np.asarray(draw(new.size), dtype=np.int64).reshape(new.size, self._layout[1])
            ids = np.concatenate([self._users, new])
            order = np.argsort(ids, kind="stable")
            self._users = ids[order]
            self._setup = np.concatenate([self._setup, rows])[order]
            idx, found = _find(self._users, users)
        return self._setup[idx]

    def answers(self, users: np.ndarray, keys: np.ndarray, draw: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Permanent answers of the pairs ``(users[i], keys[i])``, drawn once per new pair.

        ``draw(rows)`` gets the batch rows (one per new pair, its first occurrence) and returns
        their permanent answers, ``(len(rows), answer_width)``.
        """
        assert self._layout is not None, "bind() first"
        space, _, width, dt = self._layout
        combined = users * np.int64(space) + keys
        idx, found = _find(self._keys, combined)
        if not found.all():
            new, first = np.unique(combined[~found], return_index=True)
            rows = np.asarray(draw(np.flatnonzero(~found)[first]), dtype=np.dtype(dt)).reshape(new.size, width)
            allk = np.concatenate([self._keys, new])
            alla = rows if self._answers is None else np.concatenate([self._answers, rows])
            order = np.argsort(allk, kind="stable")
            self._keys, self._answers = allk[order], alla[order]
            idx, found = _find(self._keys, combined)
        assert self._answers is not None
        return self._answers[idx]

    def entries(self, users: Any = None) -> np.ndarray | int:
        """Number of memoized permanent answers: in total (``users=None``) or per given user id."""
        if users is None:
            return int(self._keys.size)
        u = np.asarray(users, dtype=np.int64)
        if self._keys.size == 0:
            return np.zeros(u.shape, dtype=np.int64)
        space = np.int64(self.key_space)
        lo = np.searchsorted(self._keys, u * space)
        hi = np.searchsorted(self._keys, u * space + space)
        return (hi - lo).astype(np.int64)

    def __len__(self) -> int:
        return int(self._keys.size)

    def __repr__(self) -> str:
        return f"Memo(users={self._users.size}, answers={self._keys.size})"


def key_epsilon(reports: Any, epsilon_perm: float, epsilon_one: float, epsilon_irr: float | None = None) -> Any:
    """Privacy loss of ``reports`` reports about one memo key (vectorized over ``reports``).

    * 0 reports: 0; one report: ``min(epsilon_perm, epsilon_one)`` (the composed one-report channel);
    * ``r >= 2`` reports: ``epsilon_perm`` (all are post-processing of the one permanent answer), or
      ``min(epsilon_perm, r epsilon_irr)`` when the instantaneous layer is a channel of loss
      ``epsilon_irr`` applied to a single permanent symbol: the joint law of the ``r`` reports is a
      mixture over the permanent answer ``B`` of product laws, and the ratio of two mixtures is at
      most the largest ratio of their components, ``e^{r epsilon_irr}``.

    ``r epsilon_one`` is **not** a bound for ``r >= 2``: the reports share ``B``, and e.g. L-GRR at
    ``(eps_perm, eps_1, d) = (3, 0.2, 4)`` loses 0.3709 over two reports against ``2 eps_1 = 0.3687``.
    """
    r = np.asarray(reports, dtype=np.float64)
    if r.size and (not np.all(np.isfinite(r)) or r.min() < 0):
        raise ValidationError("reports per memo key must be non-negative counts", parameter="reports_per_key")
    many = np.full(r.shape, float(epsilon_perm)) if epsilon_irr is None else np.minimum(epsilon_perm, r * epsilon_irr)
    return np.where(r <= 0, 0.0, np.where(r < 2, min(epsilon_perm, epsilon_one), np.maximum(many, min(epsilon_perm, epsilon_one))))


def transcript_epsilon(reports_per_key: Any, epsilon_perm: float, epsilon_one: float,
                       epsilon_irr: float | None = None) -> float:
    """Privacy loss of one user's whole transcript, from the number of reports per memo key.

    Keys are memoized independently (independent permanent answers and coins), so the loss adds
    over keys: ``sum_k key_epsilon(r_k)`` (:func:`key_epsilon`).
    """
    return float(np.sum(key_epsilon(reports_per_key, epsilon_perm, epsilon_one, epsilon_irr)))


class LongitudinalMixin:
    """The memoized client path shared by the longitudinal oracles.

    A subclass defines ``key_space`` (number of memo keys per user), ``setup_width``,
    ``answer_width``, ``answer_dtype``, ``epsilon_perm``, ``epsilon_one`` and the methods
    :meth:`setup`, :meth:`memo_keys`, :meth:`permanent` and :meth:`instantaneous`; its
    ``randomize(values, rng, users=None, memo=None)`` calls :meth:`_randomize_longitudinal`.
    """

    key_space: int
    setup_width: int
    answer_width: int
    answer_dtype: Any
    epsilon_perm: float
    epsilon_one: float

    def setup(self, n: int, rng: np.random.Generator) -> np.ndarray:  # pragma: no cover - interface
        """``(n, setup_width)`` int64: each new user's data-independent state."""
        raise NotImplementedError

    def memo_keys(self, x: np.ndarray, setup: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        """int64 memo key in ``[0, key_space)`` of each (checked) value given its user's setup."""
        raise NotImplementedError

    def permanent(self, keys: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``(n, answer_width)``: a fresh permanent answer for each memo key."""
        raise NotImplementedError  # pragma: no cover - interface

    def instantaneous(self, answers: np.ndarray, setup: np.ndarray, rng: np.random.Generator) -> dict:
        """The reports: a fresh randomization of each permanent answer."""
        raise NotImplementedError  # pragma: no cover - interface

    @property
    def memo(self) -> Memo:
        """The mechanism's own memo (used when ``randomize`` gets ``users`` but no ``memo``)."""
        m = self.__dict__.get("_memo")
        if m is None:
            m = self.__dict__["_memo"] = Memo()
        return m

    def reset_memo(self) -> None:
        """Forget the mechanism's own memo (a new population of clients)."""
        self.__dict__["_memo"] = Memo()

    def _check_user_ids(self, users: Any, n: int) -> np.ndarray:
        u = check_int_values(users, MAX_USER // max(1, self.key_space), "users")
        if u.shape != (n,):
            raise ValidationError(f"users must have one id per value ({n}), got shape {u.shape}", parameter="users")
        return u

    def randomize(self, values: Any, rng: np.random.Generator, users: Any = None, memo: Memo | None = None) -> dict:
        """Reports of ``values`` in the oracle's layout (its ``report_schema()``).

        ``users=None``: each row is a new user (fresh setup and permanent answers; simulation).
        ``users`` (one id per value): the setup and the permanent answers are memoized per user (and
        per memo key) in ``memo`` (default the mechanism's own), the instantaneous layer drawn fresh.
        """
        return self._randomize_longitudinal(self.check_values(values), rng, users, memo)  # type: ignore[attr-defined]

    def _randomize_longitudinal(self, x: np.ndarray, rng: np.random.Generator, users: Any,
                                memo: Memo | None) -> dict:
        """Reports of checked values ``x``; memoized per user when ``users`` is given."""
        n = x.shape[0]
        if users is None:
            if memo is not None:
                raise ValidationError("memo needs users (one id per value)", parameter="memo")
            setup = self.setup(n, rng)
            answers = self.permanent(self.memo_keys(x, setup), setup, rng)
            return self.instantaneous(answers, setup, rng)
        if memo is not None and not isinstance(memo, Memo):
            raise ValidationError(f"memo must be a shuffledp.local.longitudinal.Memo, got {type(memo).__name__}",
                                  parameter="memo")
        u = self._check_user_ids(users, n)
        m = self.memo if memo is None else memo
        m.bind(self.key_space, self.setup_width, self.answer_width, self.answer_dtype)
        setup = m.setup(u, lambda k: self.setup(k, rng))
        keys = self.memo_keys(x, setup)
        answers = m.answers(u, keys, lambda rows: self.permanent(keys[rows], setup[rows], rng))
        return self.instantaneous(answers, setup, rng)

    def longitudinal_epsilon(self, distinct_keys: int) -> float:
        """Bound on a user's loss over unboundedly many reports that touched ``distinct_keys``
        memo keys: ``min(distinct_keys, key_space) * epsilon_perm``."""
        k = int(distinct_keys)
        if k < 0:
            raise ValidationError(f"distinct_keys must be >= 0, got {distinct_keys}", parameter="distinct_keys")
        return min(k, self.key_space) * self.epsilon_perm

    #: loss of the instantaneous layer on one permanent symbol, where it is one (GRR chains, a flipped
    #: bit); ``None`` where the permanent answer is a bit vector (then r >= 2 reports cost eps_perm)
    epsilon_irr: float | None = None

    def transcript_epsilon(self, reports_per_key: Any) -> float:
        """``sum_k key_epsilon(r_k)`` (:func:`transcript_epsilon`)."""
        return transcript_epsilon(reports_per_key, self.epsilon_perm, self.epsilon_one, self.epsilon_irr)


def log_up(x: float) -> float:
    """``ln x`` rounded outward (a privacy bound is never understated by float error)."""
    from ...core.privacy import round_up

    return round_up(math.log(x))
