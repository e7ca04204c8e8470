"""The project's accountants as Opacus accountants, and DP-SGD noise calibration.

DP-SGD (Abadi et al., CCS 2016) with Poisson sampling rate ``q``, per-example gradients clipped to
L2 norm C and Gaussian noise of standard deviation ``sigma C`` on their sum is, per step, the
Poisson-subsampled Gaussian mechanism with noise multiplier ``sigma`` (add/remove-one
neighbours). ``T`` steps are its ``T``-fold adaptive self-composition, i.e. the privacy event

    SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), T)

which :class:`~shuffledp.accounting.RdpAccountant` (Mironov, Talwar, Zhang 2019, with the
conversion of Balle et al. 2020 Thm 21 / Canonne-Kamath-Steinke 2020) and
:class:`~shuffledp.accounting.PldAccountant` (pessimistic PLD, FFT composition) account for.

:class:`ShuffledpRdpOpacusAccountant` and :class:`ShuffledpPldOpacusAccountant` subclass
:class:`opacus.accountants.IAccountant`: Opacus records ``(noise_multiplier, sample_rate, steps)``
in ``history`` and the epsilon is that of the event above (composed over the history) under the
project's accountant, so both APIs give the same numbers. Importing this module registers them
under the mechanism names ``"shuffledp-rdp"`` and ``"shuffledp-pld"``, so
``PrivacyEngine(accountant="shuffledp-rdp")`` and its ``make_private_with_epsilon`` use them.
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

from opacus.accountants import IAccountant, register_accountant

from ..accounting import ComposedEvent, GaussianEvent, PldAccountant, PoissonSampledEvent, RdpAccountant, SelfComposedEvent
from ..accounting.accountants import PrivacyAccountant
from ..core.errors import ValidationError
from ..core.validation import check_delta, check_epsilon, check_positive_int, check_probability, check_real

__all__ = ["dpsgd_event", "history_event", "ShuffledpRdpOpacusAccountant", "ShuffledpPldOpacusAccountant",
           "register_opacus_accountants", "noise_multiplier_for", "dpsgd_epsilon", "MAX_NOISE_MULTIPLIER"]

AccountantName = Literal["rdp", "pld"]
#: Largest noise multiplier the calibration tries (as Opacus's ``MAX_SIGMA``).
MAX_NOISE_MULTIPLIER = 1e6


def dpsgd_event(noise_multiplier: float, sample_rate: float, steps: int) -> SelfComposedEvent:
    """The privacy event of ``steps`` DP-SGD steps: Poisson-subsampled Gaussian, self-composed."""
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_open=True)
    q = check_probability(sample_rate, "sample_rate")
    steps = check_positive_int(steps, "steps")
    return SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)


def history_event(history: Sequence[tuple[float, float, int]]) -> ComposedEvent:
    """An Opacus accountant ``history`` (``(noise_multiplier, sample_rate, steps)`` rows) as one event."""
    return ComposedEvent(tuple(dpsgd_event(s, q, n) for s, q, n in history))


def _make_accountant(name: AccountantName, **kwargs: float) -> PrivacyAccountant:
    if name == "rdp":
        return RdpAccountant(**kwargs)
    if name == "pld":
        return PldAccountant(**kwargs)
    raise ValidationError(f"accountant must be 'rdp' or 'pld', got {name!r}", parameter="accountant")


def dpsgd_epsilon(noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                  accountant: AccountantName = "rdp", **kwargs: float) -> float:
    """Epsilon at ``delta`` of ``steps`` DP-SGD steps under the project's ``accountant``."""
    return _make_accountant(accountant, **kwargs).compose(
        dpsgd_event(noise_multiplier, sample_rate, steps)).get_epsilon(check_delta(delta))


class _ShuffledpOpacusAccountant(IAccountant):
    """Opacus accountant whose epsilon is computed by a project accountant from ``history``."""

    _backend: AccountantName = "rdp"

    def __init__(self) -> None:
        super().__init__()
        self._cache: dict[tuple, float] = {}

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one step (consecutive steps with equal parameters share one history row)."""
        if self.history and self.history[-1][0] == noise_multiplier and self.history[-1][1] == sample_rate:
            s, q, n = self.history[-1]
            self.history[-1] = (s, q, n + 1)
        else:
            self.history.append((noise_multiplier, sample_rate, 1))

    def event(self) -> ComposedEvent:
        """The composed privacy event of the recorded steps."""
        return history_event(self.history)

    def project_accountant(self) -> PrivacyAccountant:
        """A fresh project accountant with each history row's event composed in turn (the same as
        composing :meth:`event`, without the extra identity convolution of the wrapper)."""
        acc = _make_accountant(self._backend)
        for s, q, n in self.history:
            acc.compose(dpsgd_event(s, q, n))
        return acc

    def get_epsilon(self, delta: float, *args: object, **kwargs: object) -> float:
        """Epsilon spent so far at ``delta`` (0 before the first step)."""
        if not self.history:
            return 0.0
        key = (tuple(tuple(h) for h in self.history), float(delta))
        if key not in self._cache:
            self._cache[key] = self.project_accountant().get_epsilon(delta)
        return self._cache[key]

    def __len__(self) -> int:
        """Number of optimisation steps recorded."""
        return int(sum(n for _, _, n in self.history))


class ShuffledpRdpOpacusAccountant(_ShuffledpOpacusAccountant):
    """Opacus accountant backed by :class:`shuffledp.accounting.RdpAccountant` (mechanism ``"shuffledp-rdp"``)."""

    _backend = "rdp"

    @classmethod
    def mechanism(cls) -> str:
        return "shuffledp-rdp"


class ShuffledpPldOpacusAccountant(_ShuffledpOpacusAccountant):
    """Opacus accountant backed by :class:`shuffledp.accounting.PldAccountant` (mechanism ``"shuffledp-pld"``)."""

    _backend = "pld"

    @classmethod
    def mechanism(cls) -> str:
        return "shuffledp-pld"


def register_opacus_accountants() -> None:
    """Register both accountants with Opacus (idempotent)."""
    register_accountant(ShuffledpRdpOpacusAccountant.mechanism(), ShuffledpRdpOpacusAccountant, force=True)
    register_accountant(ShuffledpPldOpacusAccountant.mechanism(), ShuffledpPldOpacusAccountant, force=True)


register_opacus_accountants()


def noise_multiplier_for(target_epsilon: float, delta: float, sample_rate: float, steps: int, *,
                         accountant: AccountantName = "rdp", epsilon_tolerance: float = 0.01) -> float:
    """Smallest noise multiplier (to ``epsilon_tolerance``) whose DP-SGD run is (target_epsilon, delta)-DP.

    The same search as Opacus's ``get_noise_multiplier``: double an upper bracket from 20 until the
    epsilon is at most the target, then bisect until ``target - eps(sigma_high) <= tolerance``.
    The returned ``sigma_high`` always satisfies ``eps(sigma_high) <= target_epsilon`` under the
    project's accountant. ValueError when even ``MAX_NOISE_MULTIPLIER`` does not reach the target.
    """
    target = check_epsilon(target_epsilon, "target_epsilon")
    delta = check_delta(delta)
    q = check_probability(sample_rate, "sample_rate", open_low=True)
    steps = check_positive_int(steps, "steps")
    tol = check_real(epsilon_tolerance, "epsilon_tolerance", low=0.0, low_open=True)
    _make_accountant(accountant)  # validates the name

    def eps(sigma: float) -> float:
        return dpsgd_epsilon(sigma, q, steps, delta, accountant)

    lo, hi = 0.0, 10.0
    eps_hi = math.inf
    while eps_hi > target:
        hi *= 2.0
        if hi > MAX_NOISE_MULTIPLIER:
            raise ValidationError(f"target_epsilon {target!r} is not reachable with a noise multiplier "
                                  f"<= {MAX_NOISE_MULTIPLIER:g}", parameter="target_epsilon")
        eps_hi = eps(hi)
    while target - eps_hi > tol:
        mid = 0.5 * (lo + hi)
        e = eps(mid)
        if e < target:
            hi, eps_hi = mid, e
        else:
            lo = mid
    return hi
