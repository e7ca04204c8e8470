"""DP-GAN for small tabular data: DP-SGD on the discriminator, the generator private by post-processing.

Xie, Lin, Wang, Wang, Zhou, "Differentially private generative adversarial network" (2018) and
Torkzadehmahani, Kairouz, Paten (2019): only the discriminator reads the private rows, and it is
trained with DP-SGD (Abadi et al. 2016: Poisson sampling, per-example clipping, Gaussian noise;
per-example gradients and clipping by Opacus). The generator only sees the discriminator's outputs
on generated data, so it and every synthetic row are post-processing of the discriminator's
(eps, delta)-DP training transcript (add/remove-one neighbours).

Each iteration makes **one** private step: the gradient of the loss on a Poisson batch of real rows
is clipped per example and noised (one subsampled-Gaussian step for the accountant, at rate ``q``);
the gradient of the loss on generated rows reads no private row and depends on the data only
through the current (already private) discriminator, so it is added to the noisy gradient without
clipping or noise before the Adam update: post-processing. (An earlier version made a second noisy
step on the generated rows and charged it too.)

Randomness: the Poisson batches and the Gaussian noise are drawn from
:func:`~shuffledp.core.rng.as_generator` -- with ``seed=None`` a cryptographic generator (AES-128-CTR
or ChaCha20 keyed from ``os.urandom``), with a seed numpy's PCG64, which marks the run as a
simulation. Each noise coordinate is ``(g_1 + g_2 + g_3 + g_4) / 2`` for four standard normals,
as Opacus's ``secure_mode`` does against floating-point attacks on the Gaussian sampler. torch's
own generator (Mersenne Twister on CPU, not cryptographic) is used only for randomness the
guarantee does not rely on (initialisation, latent draws), seeded from the generator above.
Opacus's ``secure_mode`` itself needs torchcsprng and is not used.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from opacus import GradSampleModule
from opacus.optimizers import DPOptimizer
from torch import nn

from ..core.privacy import PrivacyStatement
from ..core.rng import as_generator
from ..core.validation import check_delta, check_epsilon, check_positive_int, check_real
from ._tabular_gan import TabularGenerator, check_rows, init_uniform, mlp
from .accounting import ShuffledpRdpOpacusAccountant, noise_multiplier_for

__all__ = ["DPGAN", "DPGANResult"]


@dataclass
class DPGANResult:
    statement: PrivacyStatement
    noise_multiplier: float
    discriminator_steps: int
    sample_rate: float = float("nan")


@functools.lru_cache(maxsize=64)
def _noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """:func:`~shuffledp.ml.accounting.noise_multiplier_for`, cached (a pure function; repeated fits reuse it)."""
    return noise_multiplier_for(epsilon, delta, sample_rate, steps)


class _NumpyNoiseDPOptimizer(DPOptimizer):
    """Opacus's DP optimizer with its Gaussian noise drawn from a numpy generator (see module doc)."""

    def __init__(self, *args: Any, noise_rng: np.random.Generator, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._noise_rng = noise_rng

    def add_noise(self) -> None:
        std = self.noise_multiplier * self.max_grad_norm
        for p in self.params:
            g = self._noise_rng.standard_normal((4, *p.summed_grad.shape)).sum(axis=0) / 2.0
            p.grad = (p.summed_grad + torch.from_numpy(std * g).to(p.summed_grad.dtype)).view_as(p)


class DPGAN:
    """A small MLP GAN whose discriminator is trained with DP-SGD.

    Parameters
    ----------
    epsilon, delta : float
        Target guarantee of the discriminator's training (and so of the generator and its samples);
        the noise multiplier is calibrated with the project's RDP accountant.
    epochs : int
        Passes over the private data (in expectation: Poisson sampling); the number of private
        steps is ``round(epochs / q)`` with ``q = batch_size / n``.
    batch_size : int
        Expected real batch size.
    latent_dim, hidden : int
        Sizes of the generator's input and of both networks' two hidden layers.
    max_grad_norm : float
        Per-example clipping norm of the discriminator's gradients.
    lr : float
        Adam's learning rate (both networks).
    conditional : bool
        The last column of ``X`` is a label in {-1, +1}: generated rows draw it with
        ``Pr[+1] = label_prior`` (data-independent, not estimated from the private rows) and the
        generator produces the other columns given it. Otherwise all columns are generated jointly.
    generator_average : float
        Samples come from an exponential moving average of the generator's weights with this decay
        (post-processing of the generator's trajectory; 0 uses the last weights). On public data it
        removed most of the run-to-run spread of the last weights (docs/private-learning.md).
    seed : int, optional
        None (default): Poisson sampling and DP noise from a cryptographic generator. An int makes
        the run a reproducible simulation (numpy PCG64).

    The defaults (batch 64, 60 epochs, two hidden layers of 64, Adam lr 1e-3, clipping 0.3, linear
    generator output, weight average 0.995) were chosen on public ``make_classification`` data (``random_state=11``), not
    on any dataset used for reporting; see docs/private-learning.md.
    """

    def __init__(self, epsilon: float = 2.0, delta: float = 1e-5, *, epochs: int = 60, batch_size: int = 64,
                 latent_dim: int = 8, hidden: int = 64, max_grad_norm: float = 0.3, lr: float = 1e-3,
                 conditional: bool = False, label_prior: float = 0.5, generator_average: float = 0.995,
                 seed: int | None = None) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        self.epochs = check_positive_int(epochs, "epochs")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.latent_dim = check_positive_int(latent_dim, "latent_dim")
        self.hidden = check_positive_int(hidden, "hidden")
        self.max_grad_norm = check_real(max_grad_norm, "max_grad_norm", low=0.0, low_open=True)
        self.lr = check_real(lr, "lr", low=0.0, low_open=True)
        self.conditional = bool(conditional)
        self.label_prior = check_real(label_prior, "label_prior", low=0.0, high=1.0, low_open=True, high_open=True)
        self.generator_average = check_real(generator_average, "generator_average", low=0.0, high=1.0, high_open=True)
        self.seed = None if seed is None else check_positive_int(seed, "seed", minimum=0)

    def fit(self, X: Any) -> DPGANResult:
        """Train on rows ``X`` in [-1, 1]^d; returns the privacy of the trained generator."""
        X = check_rows(X, self.conditional)
        n, d = X.shape
        rng = as_generator(self.seed)  # privacy noise and sampling
        self._gen = torch.Generator().manual_seed(int(rng.integers(2**63)))  # initialisation and latents only
        gen = self._gen
        self.generator_ = TabularGenerator(self.latent_dim, self.hidden, d, self.conditional, self.label_prior)
        disc = mlp(d, self.hidden, 1)
        init_uniform([self.generator_, disc], gen)
        B = min(self.batch_size, n)
        q = B / n
        steps = max(1, round(self.epochs / q))
        sigma = _noise_multiplier(self.epsilon, self.delta, q, steps)
        disc = GradSampleModule(disc, loss_reduction="sum")
        opt_d = _NumpyNoiseDPOptimizer(torch.optim.Adam(disc.parameters(), lr=self.lr, betas=(0.5, 0.9)),
                                       noise_multiplier=sigma, max_grad_norm=self.max_grad_norm,
                                       expected_batch_size=B, loss_reduction="mean", noise_rng=rng)
        accountant = ShuffledpRdpOpacusAccountant()
        opt_d.attach_step_hook(accountant.get_optimizer_hook_fn(sample_rate=q))
        opt_g = torch.optim.Adam(self.generator_.parameters(), lr=self.lr, betas=(0.5, 0.9))
        bce_sum = nn.BCEWithLogitsLoss(reduction="sum")
        bce = nn.BCEWithLogitsLoss()
        Xt = torch.from_numpy(X)
        params = [p for p in disc.parameters() if p.requires_grad]
        with warnings.catch_warnings():
            # torch: full backward hooks fire on inputs that need no grad (the rows): expected here
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            for t in range(steps):
                # generated rows: an ordinary gradient (per-sample hooks off), added after the noise
                disc.disable_hooks()
                opt_d.zero_grad(set_to_none=True)
                bce(disc(self.generator_(B, gen).detach()), torch.zeros(B, 1)).backward()
                fake_grads = [p.grad.detach().clone() for p in params]
                disc.enable_hooks()
                # real rows: Poisson batch, per-example clipping, Gaussian noise, divided by B
                opt_d.zero_grad(set_to_none=True)
                real = Xt[torch.from_numpy(np.flatnonzero(rng.random(n) < q))]
                bce_sum(disc(real), torch.ones(len(real), 1)).backward()
                if not opt_d.pre_step() or len(accountant) != t + 1:  # the step must be noised and counted
                    raise RuntimeError("DP-SGD step was not noised and accounted")
                for p, g in zip(params, fake_grads):
                    p.grad += g
                opt_d.original_optimizer.step()
                # generator step through the (private) discriminator, per-sample hooks off
                disc.disable_hooks()
                opt_g.zero_grad(set_to_none=True)
                bce(disc(self.generator_(B, gen)), torch.ones(B, 1)).backward()
                opt_g.step()
                self.generator_.update_average(self.generator_average)
                disc.enable_hooks()
        opt_d.zero_grad(set_to_none=True)
        eps = accountant.get_epsilon(self.delta)
        kind = "cryptographic (os.urandom-keyed)" if self.seed is None else f"seeded simulation (seed {self.seed})"
        self.result_ = DPGANResult(PrivacyStatement(eps, self.delta, model="central", neighbouring="add_remove_one",
                                                    note=f"DP-GAN: discriminator by DP-SGD (Opacus clipping, "
                                                         f"sigma={sigma:.4g}, q={q:.4g}, {len(accountant)} steps, "
                                                         f"project RDP accountant, {kind} noise); generator by "
                                                         f"post-processing"),
                                   sigma, len(accountant), q)
        return self.result_

    def sample(self, n: int) -> np.ndarray:
        """``n`` synthetic rows in [-1, 1]^d (post-processing: no further privacy cost)."""
        n = check_positive_int(n, "n")
        return self.generator_.sample(n, self._gen)
