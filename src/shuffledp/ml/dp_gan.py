"""DP-GAN for small tabular data: DP-SGD on the discriminator, the generator private by post-processing.

Xie, Lin, Wang, Wang, Zhou, "Differentially private generative adversarial network" (2018) and
Torkzadehmahani, Kairouz, Paten (2019): only the discriminator reads the private rows, and it is
trained with DP-SGD (Opacus: Poisson sampling, per-example clipping, Gaussian noise). The generator
only sees the discriminator's outputs on generated data, so it and every synthetic row are
post-processing of the discriminator's (eps, delta)-DP training transcript.

Rows are vectors in ``[-1, 1]^d`` (the caller scales them with a data-independent map); a binary
label, if any, is one more coordinate (+1/-1) generated jointly. Each training iteration makes two
discriminator steps (one on a Poisson batch of real rows, one on generated rows); both are charged
to the accountant at the real sampling rate, which over-counts the generated-data step (it reads
no private row), so the statement is conservative.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from opacus import PrivacyEngine
from torch import nn

from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement
from ..core.validation import check_delta, check_epsilon, check_positive_int, check_real
from . import accounting as _accounting  # noqa: F401  (registers the project's accountants in Opacus)

__all__ = ["DPGAN", "DPGANResult"]


@dataclass
class DPGANResult:
    statement: PrivacyStatement
    noise_multiplier: float
    discriminator_steps: int


class DPGAN:
    """A small MLP GAN whose discriminator is trained with DP-SGD.

    Parameters
    ----------
    epsilon, delta : float
        Target guarantee of the discriminator's training (and so of the generator and its samples);
        the noise multiplier is calibrated with the project's RDP accountant.
    epochs : int
        Passes over the private data (in expectation: Poisson sampling).
    batch_size : int
        Expected real batch size.
    latent_dim, hidden : int
        Sizes of the generator's input and of both networks' hidden layer.
    max_grad_norm : float
        Per-example clipping norm of the discriminator's gradients.
    seed : int, optional
        Seeds torch for simulation (the DP noise then comes from torch's seeded generator; Opacus's
        ``secure_mode`` is not used here).
    """

    def __init__(self, epsilon: float = 2.0, delta: float = 1e-5, *, epochs: int = 20, batch_size: int = 64,
                 latent_dim: int = 8, hidden: int = 32, max_grad_norm: float = 1.0, lr: float = 2e-3,
                 seed: int | None = None) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        self.epochs = check_positive_int(epochs, "epochs")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.latent_dim = check_positive_int(latent_dim, "latent_dim")
        self.hidden = check_positive_int(hidden, "hidden")
        self.max_grad_norm = check_real(max_grad_norm, "max_grad_norm", low=0.0, low_open=True)
        self.lr = check_real(lr, "lr", low=0.0, low_open=True)
        self.seed = seed

    def fit(self, X: Any) -> DPGANResult:
        """Train on rows ``X`` in [-1, 1]^d; returns the privacy of the trained generator."""
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or len(X) < 2 or not np.all(np.isfinite(X)) or np.any(np.abs(X) > 1.0):
            raise ValidationError("X must be a 2-D array of rows in [-1, 1]^d (scale it with a data-independent map)",
                                  parameter="X")
        if self.seed is not None:
            torch.manual_seed(self.seed)
        d = X.shape[1]
        self.generator_ = nn.Sequential(nn.Linear(self.latent_dim, self.hidden), nn.LeakyReLU(0.2),
                                        nn.Linear(self.hidden, d), nn.Tanh())
        disc = nn.Sequential(nn.Linear(d, self.hidden), nn.LeakyReLU(0.2), nn.Linear(self.hidden, 1))
        opt_d = torch.optim.Adam(disc.parameters(), lr=self.lr, betas=(0.5, 0.9))
        opt_g = torch.optim.Adam(self.generator_.parameters(), lr=self.lr, betas=(0.5, 0.9))
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(X)),
                                             batch_size=min(self.batch_size, len(X)))
        engine = PrivacyEngine(accountant="shuffledp-rdp")
        q = 1.0 / len(loader)
        steps = 2 * self.epochs * len(loader)  # two discriminator steps per real batch
        from .accounting import noise_multiplier_for
        sigma = noise_multiplier_for(self.epsilon, self.delta, q, steps)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            disc, opt_d, loader = engine.make_private(module=disc, optimizer=opt_d, data_loader=loader,
                                                      noise_multiplier=sigma, max_grad_norm=self.max_grad_norm)
        bce = nn.BCEWithLogitsLoss()
        for _ in range(self.epochs):
            for (real,) in loader:
                if len(real) == 0:
                    continue
                opt_d.zero_grad(set_to_none=True)
                bce(disc(real), torch.ones(len(real), 1)).backward()
                opt_d.step()
                fake = self.generator_(torch.randn(len(real), self.latent_dim)).detach()
                opt_d.zero_grad(set_to_none=True)
                bce(disc(fake), torch.zeros(len(fake), 1)).backward()
                opt_d.step()
                # generator step: gradients flow through the (private) discriminator only
                # (per-sample hooks off: this pass reads no private row and must not feed opt_d)
                disc.disable_hooks()
                opt_g.zero_grad(set_to_none=True)
                bce(disc(self.generator_(torch.randn(len(real), self.latent_dim))), torch.ones(len(real), 1)).backward()
                opt_g.step()
                disc.enable_hooks()
                opt_d.zero_grad(set_to_none=True)
        eps = engine.get_epsilon(self.delta)
        self.result_ = DPGANResult(PrivacyStatement(eps, self.delta, model="central", neighbouring="add_remove_one",
                                                    note=f"DP-GAN: discriminator by DP-SGD (Opacus, sigma={sigma:.4g}, "
                                                         f"q={q:.4g}, {len(engine.accountant)} steps, project RDP "
                                                         f"accountant); generator by post-processing"),
                                   sigma, len(engine.accountant))
        return self.result_

    def sample(self, n: int) -> np.ndarray:
        """``n`` synthetic rows (post-processing: no further privacy cost)."""
        n = check_positive_int(n, "n")
        with torch.no_grad():
            return self.generator_(torch.randn(n, self.latent_dim)).numpy()
