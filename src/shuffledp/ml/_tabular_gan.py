"""Pieces shared by :mod:`shuffledp.ml.dp_gan` and :mod:`shuffledp.ml.pate_gan`: input checks, the
generator (joint or conditional on a binary label) and seeded initialisation. No privacy logic."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from ..core.errors import ValidationError


def check_rows(X: Any, conditional: bool) -> np.ndarray:
    """Rows in [-1, 1]^d as float32; with ``conditional`` the last column must be a label in {-1, +1}."""
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2 or len(X) < 2 or not np.all(np.isfinite(X)) or np.any(np.abs(X) > 1.0):
        raise ValidationError("X must be a 2-D array of rows in [-1, 1]^d (scale it with a data-independent map)",
                              parameter="X")
    if conditional and (X.shape[1] < 2 or not np.all(np.abs(X[:, -1]) == 1.0)):
        raise ValidationError("with conditional=True the last column of X must be a label in {-1, +1} and there "
                              "must be at least one other column", parameter="X")
    return X


def init_uniform(modules: list[nn.Module], gen: torch.Generator) -> None:
    """torch's default Linear initialisation (U(+-1/sqrt(fan_in))) drawn from ``gen``."""
    with torch.no_grad():
        for m in modules:
            for layer in m.modules():
                if isinstance(layer, nn.Linear):
                    b = 1.0 / math.sqrt(layer.in_features)
                    for p in (layer.weight, layer.bias):
                        if p is not None:
                            p.copy_(torch.rand(p.shape, generator=gen) * 2 * b - b)


def mlp(d_in: int, hidden: int, d_out: int, layers: int = 2) -> nn.Sequential:
    """``layers`` hidden LeakyReLU(0.2) layers of width ``hidden``, linear output."""
    mods: list[nn.Module] = []
    w = d_in
    for _ in range(layers):
        mods += [nn.Linear(w, hidden), nn.LeakyReLU(0.2)]
        w = hidden
    mods.append(nn.Linear(w, d_out))
    return nn.Sequential(*mods)


class TabularGenerator(nn.Module):
    """Latent ``z`` (and a label ``y`` in {-1, +1} when conditional) to a row in R^d; :meth:`sample`
    clamps to [-1, 1]^d.

    Conditional: the label is drawn with ``Pr[+1] = label_prior`` (fixed, data-independent), fed to
    the network with ``z`` and appended as the row's last column; the network outputs the others.
    The output layer is linear: with a tanh output the small GANs here saturated at +-1 and
    collapsed (non-private runs on public ``make_classification`` data, docs/private-learning.md).
    """

    def __init__(self, latent_dim: int, hidden: int, d: int, conditional: bool, label_prior: float = 0.5) -> None:
        super().__init__()
        self.latent_dim, self.conditional, self.label_prior = latent_dim, conditional, label_prior
        self.net = mlp(latent_dim + int(conditional), hidden, d - int(conditional))

    def forward(self, n: int, gen: torch.Generator) -> torch.Tensor:
        z = torch.randn(n, self.latent_dim, generator=gen)
        if not self.conditional:
            return self.net(z)
        y = torch.where(torch.rand(n, 1, generator=gen) < self.label_prior, 1.0, -1.0)
        return torch.cat([self.net(torch.cat([z, y], 1)), y], 1)

    def update_average(self, decay: float) -> None:
        """Exponential moving average of the weights (``decay`` in (0, 1); 0 turns it off)."""
        if decay <= 0.0:
            return
        with torch.no_grad():
            if not hasattr(self, "_average"):
                self._average = [p.detach().clone() for p in self.net.parameters()]
            for a, p in zip(self._average, self.net.parameters()):
                a.mul_(decay).add_(p, alpha=1.0 - decay)

    def sample(self, n: int, gen: torch.Generator) -> np.ndarray:
        """``n`` rows clamped to [-1, 1]^d (post-processing), from the averaged weights if kept."""
        with torch.no_grad():
            if hasattr(self, "_average"):
                current = [p.detach().clone() for p in self.net.parameters()]
                for a, p in zip(self._average, self.net.parameters()):
                    p.copy_(a)
                try:
                    return self(n, gen).clamp(-1.0, 1.0).numpy()
                finally:
                    for c, p in zip(current, self.net.parameters()):
                        p.copy_(c)
            return self(n, gen).clamp(-1.0, 1.0).numpy()
