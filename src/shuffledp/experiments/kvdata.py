"""Seeded, chunked generators of key-value datasets for the HISKV experiments.

Synthetic sets GAUSS and LNR (linear) follow the HISKV paper's qualitative description, and Zipf
(power-law); TalkingData-like and JData-like are *stand-ins* with the published characteristics
(users, keys, mean pairs per user) — not the real data, which is not available offline.
Every recipe is [R] (reconstructed) except the published counts; see docs/keyvalue.md.

All generators are vectorised over users and stream chunks (``iter_chunks``), so 10^6 users take
seconds and bounded memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..core.errors import ValidationError
from ..local.keyvalue.data import KeyValueData

__all__ = ["DatasetSpec", "DATASETS", "dataset_spec", "iter_chunks", "generate"]


@dataclass(frozen=True)
class DatasetSpec:
    """Recipe of a key-value dataset: popularity of keys, set lengths, per-key value means."""

    name: str
    n: int
    d: int
    length: str  # "negbin" (1 + NegBin(r, mean)) or "poisson" (1 + Poisson(mean))
    mean_extra_pairs: float
    popularity: str  # "zipf", "gauss", "linear"
    values: str  # "uniform-means", "gauss-means", "linear-means"
    value_sd: float
    zipf_s: float = 1.0
    negbin_r: float = 4.0
    label: str = ""

    def key_weights(self) -> np.ndarray:
        k = np.arange(self.d, dtype=np.float64)
        if self.popularity == "zipf":
            w = 1.0 / (k + 1) ** self.zipf_s
        elif self.popularity == "gauss":
            w = np.exp(-0.5 * ((k - self.d / 2) / (self.d / 6)) ** 2)
        elif self.popularity == "linear":
            w = (self.d - k) + 1.0
        else:
            raise ValidationError(f"unknown popularity {self.popularity!r}", parameter="popularity")
        return w / w.sum()

    def key_means(self, seed: int) -> np.ndarray:
        k = np.arange(self.d, dtype=np.float64)
        if self.values == "uniform-means":
            return np.random.default_rng([seed, 7]).uniform(-0.8, 0.8, self.d)
        if self.values == "gauss-means":
            return -0.8 + 1.6 * np.exp(-0.5 * ((k - self.d / 2) / (self.d / 4)) ** 2)
        if self.values == "linear-means":
            return np.linspace(-0.9, 0.9, self.d)
        raise ValidationError(f"unknown values {self.values!r}", parameter="values")


DATASETS: dict[str, DatasetSpec] = {
    # TalkingData (as the HISKV paper describes it): 60 822 devices, 306 app categories, mean ~21.1 pairs, 98% < 50
    "talkingdata": DatasetSpec("talkingdata", 60_822, 306, "negbin", 20.1, "zipf", "uniform-means", 0.3,
                               label="TalkingData-like (stand-in)"),
    # JData (as the HISKV paper describes it): 105 180 users, 442 brands; pairs per user not published (default 5)
    "jdata": DatasetSpec("jdata", 105_180, 442, "negbin", 4.0, "zipf", "uniform-means", 0.3, zipf_s=1.1,
                         label="JData-like (stand-in)"),
    "gauss": DatasetSpec("gauss", 1_000_000, 100, "poisson", 2.0, "gauss", "gauss-means", 0.2,
                         label="GAUSS (synthetic)"),
    "lnr": DatasetSpec("lnr", 1_000_000, 100, "poisson", 2.0, "linear", "linear-means", 0.2,
                       label="LNR (synthetic, linear)"),
    "zipf": DatasetSpec("zipf", 1_000_000, 100, "poisson", 2.0, "zipf", "uniform-means", 0.3, zipf_s=1.2,
                        label="Zipf (synthetic, power law)"),
}


def dataset_spec(name: str, **overrides: object) -> DatasetSpec:
    if name not in DATASETS:
        raise ValidationError(f"unknown dataset {name!r}; choose one of {sorted(DATASETS)}", parameter="name")
    spec = DATASETS[name]
    if overrides:
        spec = DatasetSpec(**{**spec.__dict__, **overrides})
    if spec.n < 1:
        raise ValidationError(f"n must be >= 1, got {spec.n}", parameter="n")
    return spec


def iter_chunks(spec: DatasetSpec, seed: int = 0, chunk: int = 50_000) -> Iterator[KeyValueData]:
    """Users of ``spec`` in chunks of ``chunk`` users; chunk i uses generator seed [seed, i]."""
    logw = np.log(spec.key_weights())
    mu = spec.key_means(seed)
    for i, start in enumerate(range(0, spec.n, chunk)):
        m = min(chunk, spec.n - start)
        rng = np.random.default_rng([seed, i, 1])
        if spec.length == "negbin":
            p = spec.negbin_r / (spec.negbin_r + spec.mean_extra_pairs)
            extra = rng.negative_binomial(spec.negbin_r, p, m)
        else:
            extra = rng.poisson(spec.mean_extra_pairs, m)
        lens = np.minimum(1 + extra, spec.d)
        # keys without replacement with probability ∝ weight: Gumbel top-l (Efraimidis–Spirakis)
        g = rng.gumbel(size=(m, spec.d)) + logw
        top = np.argsort(-g, axis=1)
        mask = np.arange(spec.d)[None, :] < lens[:, None]
        keys = top[mask]
        vals = np.clip(mu[keys] + spec.value_sd * rng.standard_normal(keys.size), -1.0, 1.0)
        offs = np.concatenate([[0], np.cumsum(lens)])
        yield KeyValueData(keys.astype(np.int64), vals, offs, spec.d)


def generate(name: str, seed: int = 0, chunk: int = 50_000, **overrides: object) -> KeyValueData:
    """The whole dataset ``name`` (chunks concatenated)."""
    spec = dataset_spec(name, **overrides)
    parts = list(iter_chunks(spec, seed, chunk))
    keys = np.concatenate([p.keys for p in parts])
    vals = np.concatenate([p.vals for p in parts])
    lens = np.concatenate([p.lengths for p in parts])
    return KeyValueData(keys, vals, np.concatenate([[0], np.cumsum(lens)]), spec.d)
