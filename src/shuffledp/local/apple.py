"""Apple's sketches under their former module name: :class:`CountMeanSketch`
(:mod:`shuffledp.local.count_mean_sketch`), :class:`HadamardCountMeanSketch`
(:mod:`shuffledp.local.hadamard_count_mean_sketch`) and their shared hash family
(:mod:`shuffledp.local.sketch`). Kept as a re-export for the service layer and external users."""

from .count_mean_sketch import CountMeanSketch
from .hadamard_count_mean_sketch import HadamardCountMeanSketch
from .sketch import ExplicitHashFamily, HashFamily, TabulationHashFamily, draw_hash_seed, grouped_bit_sums

__all__ = ["draw_hash_seed", "HashFamily", "TabulationHashFamily", "ExplicitHashFamily", "CountMeanSketch",
           "HadamardCountMeanSketch", "grouped_bit_sums"]
