"""``hh_sfp``: Apple's SFP reports (Apple, "Learning with Privacy at Scale", 2017), shuffled,
calibrated for a central target."""

from __future__ import annotations

from ...core.validation import check_probability
from ...local.heavy_hitters import SequenceFragmentPuzzle
from ..base import Protocol
from ._base import ShuffledHeavyHitters

__all__ = ["ShuffledSFP", "PROTOCOLS"]


class ShuffledSFP(ShuffledHeavyHitters):
    """``hh_sfp``: :class:`~shuffledp.local.heavy_hitters.SequenceFragmentPuzzle` at the amplified
    local epsilon (:class:`~._base.ShuffledHeavyHitters`): the user's whole report (fragment and
    word sketches, ``eps_f + eps_w = eps_l``) is one message; ``fragment_share`` is the fragment
    sketch's share of ``eps_l`` (default 1/2). ``d`` (integers in ``[0, d)`` as hexadecimal words,
    default 2^16) or ``alphabet``/``max_length`` (words); the other parameters as in the local
    mechanism."""

    name = "hh_sfp"
    mechanism_class = SequenceFragmentPuzzle

    def __init__(self, epsilon: float, delta: float, n: int, d: int = 1 << 16, fragment_share: float = 0.5,
                 sketch: str = "cms", fragment_k: int = 64, fragment_m: int = 1024, word_k: int = 64,
                 word_m: int = 1024, alphabet: str | None = None, max_length: int | None = None,
                 fragment_top: int = 20, k: int | None = None, word_domain: int = 1 << 20,
                 hash_seed: int | None = None) -> None:
        enc = self._setup(epsilon, delta, n, d, alphabet, max_length)
        share = check_probability(fragment_share, "fragment_share", open_low=True, open_high=True)
        kw = ({"alphabet": alphabet or "abcdefghijklmnopqrstuvwxyz", "max_length": max_length or 10}
              if self.words else enc)
        self.mechanism = SequenceFragmentPuzzle(self.eps_l, fragment_epsilon=share * self.eps_l, sketch=sketch,
                                                fragment_k=fragment_k, fragment_m=fragment_m, word_k=word_k,
                                                word_m=word_m, fragment_top=fragment_top, k=k,
                                                word_domain=word_domain, hash_seed=hash_seed, **kw)


PROTOCOLS: dict[str, type[Protocol]] = {"hh_sfp": ShuffledSFP}
