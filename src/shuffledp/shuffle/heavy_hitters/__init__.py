"""Heavy hitters in the shuffle model: SFP, PEM and TreeHist reports, shuffled.

Each protocol runs the local mechanism of :mod:`shuffledp.local.heavy_hitters` at the local
epsilon whose shuffled reports meet the central ``(epsilon, delta)`` target (amplification by
shuffling, Feldman, McMillan, Talwar FOCS 2021, valid for any eps_l-LDP randomizer).
"""
