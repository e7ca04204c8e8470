"""The contract every protocol implements: local, shuffle or central, one interface.

A protocol is built from its **central target** ``(epsilon, delta)`` and the number of users
``n``; it chooses its own local parameters from the theorems it implements.

Data flow (see :func:`shuffledp.pipeline.run`)::

    values --encode--> messages --shuffle--> shuffled messages --aggregate--> statistic
                                                                  --estimate--> Estimate

* ``encode(values, rng)`` runs every user's client (vectorized): it returns **columnar
  messages** (a ``dict`` of numpy arrays whose first axis indexes *messages*, not users; a
  multi-message protocol emits several rows per user). An optional integer column
  ``"shuffler"`` routes each message to one of ``n_shufflers`` shufflers.
* The shuffle step (:mod:`shuffledp.shuffle.shuffler`) adds each shuffler's fake messages
  (:meth:`Protocol.shuffler_messages`), permutes each shuffler's batch uniformly, and
  concatenates the batches in shuffler order (the ``"shuffler"`` column is kept: the analyzer
  knows which shuffler forwarded a batch, never which user sent a message).
* ``aggregate(messages)`` returns a **mergeable sufficient statistic** (an array; the statistic
  of a union of batches is the sum of the statistics), ``estimate(statistic, n)`` debiases it.
* ``simulate_statistic(data, rng)`` samples the statistic directly where its distribution is
  known exactly (cost independent of n); ``data`` is what :meth:`summarize` returns for the
  input (true counts for counting/histograms).

Estimates are **totals**: counts (counting), per-item counts (histograms), the sum (sums),
as in the survey, which reports RMSE of counts and sums.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

import numpy as np

from ..core.batch import Columns, concat_rows, n_rows, row_layout, take_rows
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from ..core.validation import check_delta, check_epsilon, check_positive_int

__all__ = ["Messages", "Protocol", "InputKind", "n_messages", "concat_messages", "take_messages"]

#: A columnar message batch (:data:`shuffledp.core.batch.Columns`): one row per message.
Messages = Columns
InputKind = Literal["bit", "categorical", "unit_interval", "multi_categorical", "set"]


# The batch helpers of :mod:`shuffledp.core.batch` under the names the protocol modules use.
n_messages = n_rows
concat_messages = concat_rows
take_messages = take_rows


class Protocol(ABC):
    """A complete collection protocol (encoder + analyzer + privacy statement).

    Subclasses set the class attributes and implement the abstract methods.

    Attributes
    ----------
    name : str
        Registry name (e.g. ``"cnt_rr"``).
    model : {"local", "shuffle", "central"}
        Trust model: what the analyzer sees (raw reports, the shuffled multiset, or a noisy
        release by a trusted curator).
    input_kind : str
        ``"bit"``, ``"categorical"`` (ints in [0, d)), ``"unit_interval"`` (floats in [0, 1]),
        ``"multi_categorical"`` (an (n, k) int array), ``"set"``.
    n_shufflers : int
        Number of independent shufflers (1 for single-shuffler protocols).
    robust : bool
        Whether ``privacy`` is a robust statement (holds when a ``gamma`` fraction is honest).
    """

    name: ClassVar[str] = ""
    model: ClassVar[Literal["local", "shuffle", "central"]] = "shuffle"
    input_kind: ClassVar[InputKind] = "bit"
    robust: ClassVar[bool] = False
    #: How a multi-shuffler protocol's users reach the shufflers: ``"one"`` (all of a user's
    #: messages go to one shuffler: the users of a release are the sum of the users each shuffler
    #: served) or ``"every"`` (every user sends to every shuffler: each shuffler serves them all).
    user_routing: ClassVar[Literal["one", "every"]] = "one"
    #: Whether every user sends exactly one message whatever its input (a deployment then counts
    #: users by messages and needs no user markers). Verified against ``encode`` by the tests.
    one_message_per_user: ClassVar[bool] = False

    def __init__(self, epsilon: float, delta: float, n: int) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta) if delta else 0.0
        self.n = check_positive_int(n, "n")
        self.n_shufflers = 1

    # --- client -----------------------------------------------------------------------
    @abstractmethod
    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        """Every user's messages (vectorized over users), columnar."""

    # --- shufflers --------------------------------------------------------------------
    def shuffler_messages(self, shuffler: int, rng: np.random.Generator) -> Messages:
        """Fake messages shuffler ``shuffler`` injects before permuting (default: none)."""
        return {}

    # --- analyzer ---------------------------------------------------------------------
    @abstractmethod
    def aggregate(self, messages: Messages) -> np.ndarray:
        """Mergeable sufficient statistic of a (shuffled) message batch."""

    @abstractmethod
    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """Estimate (totals) with standard errors from the statistic of ``n`` users."""

    def analyze(self, messages: Messages, n: int) -> Estimate:
        """``estimate(aggregate(messages), n)``."""
        return self.estimate(self.aggregate(messages), n)

    # --- simulation -------------------------------------------------------------------
    def summarize(self, values: Any) -> np.ndarray:
        """The input summary ``simulate_statistic`` needs (default: true counts over [0, d))."""
        raise NotImplementedError(f"{type(self).__name__} has no exact statistic simulation")

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Sample ``aggregate(shuffle(encode(values)))`` directly from ``summarize(values)``."""
        raise NotImplementedError(f"{type(self).__name__} has no exact statistic simulation")

    @property
    def has_exact_simulation(self) -> bool:
        return type(self).simulate_statistic is not Protocol.simulate_statistic

    # --- privacy and cost -------------------------------------------------------------
    def privacy(self, n: int | None = None) -> PrivacyStatement:
        """The central guarantee of the released statistic for ``n`` users (default ``self.n``).

        Computed once per ``n`` by :meth:`_privacy` and memoized on the instance: a protocol's
        parameters are fixed at construction, so the statement is a function of ``n`` alone
        (an accountant computation that ``estimate`` would otherwise redo on every release).
        Raises :class:`ValidationError` unless ``n`` is a positive integer.
        """
        n = self.n if n is None else check_positive_int(n, "n")
        cache: dict[int, PrivacyStatement] = self.__dict__.setdefault("_privacy_cache", {})
        st = cache.get(n)
        if st is None:
            st = cache[n] = self._privacy(n)
        return st

    @abstractmethod
    def _privacy(self, n: int) -> PrivacyStatement:
        """The central guarantee for exactly ``n >= 1`` users (called by :meth:`privacy`, once per n)."""

    @property
    def local_randomizer(self) -> Any:
        """The per-user eps_l-LDP randomizer, when the protocol has one (else ``None``).

        It exposes ``epsilon`` and ``probabilities(reports, x)`` for the exact ratio check.
        """
        return None

    @property
    @abstractmethod
    def messages_per_user(self) -> float:
        """Expected number of messages each user sends."""

    @property
    @abstractmethod
    def bits_per_message(self) -> float:
        """Bits needed to encode one message."""

    @property
    def bits_per_user(self) -> float:
        """Expected communication per user in bits."""
        return self.messages_per_user * self.bits_per_message

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Closed-form variance (or the stated error bound, squared) of one coordinate of the estimate.

        One signature for every protocol: the variance of one estimated total (the count of a
        counting protocol, one item's count of a histogram, the sum of a summation protocol) for
        ``n`` users (default ``self.n``) when that coordinate's true value is ``value`` (a count,
        or the true sum). Protocols whose variance does not depend on the true value ignore
        ``value``; each subclass says what it returns.
        """
        raise NotImplementedError(f"{type(self).__name__} states no closed-form variance")

    # --- deployment -------------------------------------------------------------------
    def example_values(self, n: int = 1) -> Any:
        """``n`` valid inputs of the protocol's ``input_kind`` (all zeros), e.g. to lay out messages."""
        n = check_positive_int(n, "n")
        if self.input_kind == "unit_interval":
            return np.zeros(n, dtype=np.float64)
        if self.input_kind == "multi_categorical":
            return np.zeros((n, int(getattr(self, "k"))), dtype=np.int64)
        return np.zeros(n, dtype=np.int64)

    def message_schema(self) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
        """The fixed layout of one message: ``(column, little-endian dtype, row shape)`` per column.

        Sorted by column name; the routing column ``"shuffler"`` is not part of a message (the
        analyzer learns it from the shuffler that forwards the batch). Every message a protocol
        emits has this layout whatever the input (``encode`` draws dtypes and shapes from the
        parameters, never from the values), so it is read off the encoding of
        :meth:`example_values`; a deployment refuses a message that does not fit it.
        """
        cached = self.__dict__.get("_message_schema")
        if cached is None:
            cached = row_layout(self.encode(self.example_values(1), np.random.default_rng(0)), exclude=("shuffler",))
            self.__dict__["_message_schema"] = cached
        return cached

    def count_users(self, users_per_shuffler: Any) -> int:
        """Users of a release from the number of users each shuffler served (see ``user_routing``)."""
        u = np.asarray(users_per_shuffler, dtype=np.int64).reshape(-1)
        if u.size == 0:
            return 0
        return int(u.min()) if self.user_routing == "every" else int(u.sum())

    # --- helpers ----------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self.epsilon:g}, delta={self.delta:g}, n={self.n})"


def bits_for(k: int) -> float:
    """Bits to encode one of ``k`` values (at least 1)."""
    return float(max(1, math.ceil(math.log2(max(k, 2)))))
