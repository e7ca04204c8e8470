"""PATE-GAN for small tabular data: teacher discriminators on disjoint partitions, a student
discriminator on noisily labelled generated rows, a generator trained against the student.

Jordon, Yoon, van der Schaar, "PATE-GAN: Generating synthetic data with differential privacy
guarantees", ICLR 2019, Algorithm 1. The private rows are split into ``k`` disjoint parts by a
data-independent random assignment of row indices. Each iteration

1. trains the ``k`` teacher discriminators, teacher ``i`` on real rows of part ``i`` only (label 1)
   against generated rows (label 0);
2. trains the student discriminator on generated rows only, each labelled by the noisy vote of the
   teachers (real / generated) through the PATE aggregators of :mod:`shuffledp.ml.pate` --
   ``"gnmax"`` (Gaussian noise, Papernot et al. 2018) or ``"lnmax"`` (Laplace noise, Papernot et
   al. 2017, the paper's choice);
3. takes generator steps against the student.

Beyond the paper (all free in privacy, see :class:`PateGAN`): the student also replays earlier
released labels, part of each query batch is uniform probes of the box, and samples come from a
moving average of the generator's weights.

Privacy (replace-one neighbours, the partition of indices fixed). Replacing one private row changes
the data of one teacher only, for the whole run, so in every query one vote moves: the vote
histogram has L1 sensitivity 2 and L2 sensitivity sqrt(2). Everything else a query depends on (the
generator, the student, the generated rows) is a function of earlier noisy labels and of randomness
independent of the data (weight initialisation, latent draws, the teachers' minibatch indices).
Conditioned on that randomness, the labels are an adaptive composition of GNMax / LNMax answers, and
mixing over data-independent randomness keeps an (eps, delta) guarantee; the student, the generator
and every synthetic row are post-processing of the labels.

Accounting is **data-independent**: each query costs the RDP curve ``lambda / sigma^2`` (GNMax) or
that of a pure ``2 gamma``-DP mechanism (LNMax; the smaller of its RDP conversion and the basic
composition ``2 gamma`` per query is used, as :class:`~shuffledp.accounting.RdpAccountant` does),
and ``N`` queries cost ``N`` times that, converted to (eps, delta) with
:func:`~shuffledp.accounting.rdp.rdp_to_epsilon` (Balle et al. 2020, Thm 21). This is a valid upper
bound whatever the votes are. Because it does not depend on the data, the number of iterations that
fit in the budget is computed before training (the largest ``T`` whose ``T`` iterations cost at most
``epsilon``); the run stops there and never overshoots. The paper instead spends the data-dependent
moments bound of Papernot et al. (2017, Thm 3) and stops on it; that bound depends on the votes and
publishing it (or a stopping time driven by it) is not itself private. Its value is computed here for
analysis only (:attr:`PateGANResult.epsilon_data_dependent`), never used to stop or to state privacy.

Noise (and the partition) come from :func:`~shuffledp.core.rng.as_generator`: a cryptographic
generator when ``random_state`` is None; a seed makes the run a reproducible simulation. The
networks' own randomness (initialisation, latent draws, minibatches) comes from a torch generator
seeded from that generator; it is not privacy noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from ..accounting.rdp import DEFAULT_ORDERS, rdp_to_epsilon
from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement
from ..core.rng import as_generator
from ..core.validation import check_delta, check_epsilon, check_positive_int, check_real
from ._tabular_gan import TabularGenerator, check_rows, init_uniform, mlp
from .pate import (gnmax, lnmax, partition_indices, rdp_gnmax_data_independent, rdp_lnmax_data_dependent,
                   rdp_lnmax_data_independent, rdp_gnmax_data_dependent)

__all__ = ["PateGAN", "PateGANResult", "pate_gan_epsilon", "pate_gan_max_iterations"]

Aggregator = Literal["gnmax", "lnmax"]


def _per_query_rdp(aggregator: Aggregator, noise: float, orders: np.ndarray) -> np.ndarray:
    if aggregator == "gnmax":
        return rdp_gnmax_data_independent(orders, noise)
    return rdp_lnmax_data_independent(orders, noise)


def pate_gan_epsilon(aggregator: Aggregator, noise: float, n_queries: int, delta: float,
                     orders: Any = None) -> float:
    """Data-independent epsilon at ``delta`` of ``n_queries`` PATE answers (0 for no query).

    ``noise`` is GNMax's sigma or LNMax's gamma (Laplace scale ``1/gamma``). GNMax: RDP
    ``n lambda / sigma^2``; LNMax: the smaller of the RDP conversion of ``n`` times the pure
    ``2 gamma``-DP curve and ``2 gamma n``.
    """
    if aggregator not in ("gnmax", "lnmax"):
        raise ValidationError(f"aggregator must be 'gnmax' or 'lnmax', got {aggregator!r}", parameter="aggregator")
    a = DEFAULT_ORDERS if orders is None else np.asarray(orders, dtype=float)
    n = int(n_queries)
    if n < 0:
        raise ValidationError(f"n_queries must be >= 0, got {n_queries}", parameter="n_queries")
    if n == 0:
        return 0.0
    eps, _ = rdp_to_epsilon(a, n * _per_query_rdp(aggregator, noise, a), delta)
    if aggregator == "lnmax":
        eps = min(eps, 2.0 * noise * n)
    return eps


def pate_gan_max_iterations(epsilon: float, delta: float, aggregator: Aggregator, noise: float,
                            queries_per_iteration: int, orders: Any = None) -> int:
    """Largest ``T`` with ``pate_gan_epsilon(T * queries_per_iteration) <= epsilon`` (0 if none)."""
    def cost(t: int) -> float:
        return pate_gan_epsilon(aggregator, noise, t * queries_per_iteration, delta, orders)

    if cost(1) > epsilon:
        return 0
    lo, hi = 1, 2
    while cost(hi) <= epsilon:
        lo, hi = hi, 2 * hi
        if hi > 1 << 40:  # noise so large that the budget never runs out
            raise ValidationError("the budget allows more than 2^40 iterations: set max_iterations",
                                  parameter="max_iterations")
    while hi - lo > 1:  # cost(lo) <= epsilon < cost(hi); cost is non-decreasing in t
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if cost(mid) <= epsilon else (lo, mid)
    return lo


@dataclass
class PateGANResult:
    """Privacy of a trained :class:`PateGAN`.

    ``statement`` is the data-independent guarantee of everything released (generator, samples,
    student, noisy labels). ``epsilon_data_dependent`` is the cost conditioned on the teachers'
    votes (the moments bound the paper uses, capped by the data-independent curve); it depends on
    the private data and is **not** a DP statement: for analysis only, do not publish it.
    """

    statement: PrivacyStatement
    aggregator: str
    noise: float
    iterations: int
    n_queries: int
    epsilon_data_dependent: float
    label_real_rate: float = field(default=float("nan"))


class _TeacherEnsemble(nn.Module):
    """``k`` independent two-hidden-layer discriminators evaluated together (batched matmul)."""

    def __init__(self, k: int, d: int, hidden: int, gen: torch.Generator) -> None:
        super().__init__()

        def uniform(shape: tuple[int, ...], fan_in: int) -> nn.Parameter:
            b = 1.0 / math.sqrt(fan_in)
            return nn.Parameter(torch.rand(shape, generator=gen) * 2 * b - b)

        self.w1, self.b1 = uniform((k, d, hidden), d), uniform((k, 1, hidden), d)
        self.w2, self.b2 = uniform((k, hidden, hidden), hidden), uniform((k, 1, hidden), hidden)
        self.w3, self.b3 = uniform((k, hidden, 1), hidden), uniform((k, 1, 1), hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (k, B, d) rows per teacher, or (B, d) shared rows; returns logits (k, B)."""
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.w1.shape[0], -1, -1)
        h = nn.functional.leaky_relu(torch.baddbmm(self.b1, x, self.w1), 0.2)
        h = nn.functional.leaky_relu(torch.baddbmm(self.b2, h, self.w2), 0.2)
        return torch.baddbmm(self.b3, h, self.w3).squeeze(-1)


class PateGAN:
    """PATE-GAN (Jordon et al. 2019) with data-independent accounting; stops when the budget is spent.

    Parameters
    ----------
    epsilon, delta : float
        Budget of the released labels (and so of the generator and its samples), replace-one.
    n_teachers : int
        Number of teacher discriminators (disjoint partitions; at most the number of rows).
    aggregator : {"gnmax", "lnmax"}
        Noisy vote: GNMax with ``sigma`` or LNMax with ``gamma`` (Laplace scale ``1/gamma``).
    sigma, gamma : float
        Noise of the aggregator. With ``None`` (default) ``sigma = n_teachers / 2`` and
        ``gamma = 2 / n_teachers``: a unanimous vote survives the noise with high probability.
    batch_size : int
        Rows per teacher step (capped by the smallest partition) and generated rows per generator step.
    query_batch_size : int
        Generated rows the teachers label per student step (each is one PATE query).
    replay : int
        If positive, the student also trains on ``batch_size`` rows drawn from the last ``replay``
        labelled queries (already released: no privacy cost). 0 is the paper's student.
    probe_fraction : float
        Fraction of each query batch drawn uniformly from the box [-1, 1]^d instead of from the
        generator (data-independent queries, same cost per query): they show the student where the
        teachers see real rows away from the generator's current samples. 0 is the paper's choice.
    teacher_steps, student_steps, generator_steps : int
        Steps per iteration (the paper's ``n_T`` and ``n_S``; the paper makes one generator step); an
        iteration asks ``student_steps * query_batch_size`` queries. Teacher and generator steps ask
        none: they only change how much each query buys.
    max_iterations : int, optional
        Stop earlier than the budget allows (the statement is then that of the iterations run).
    conditional : bool
        The last column of ``X`` is a binary label in {-1, +1}: generated rows take their label from
        ``label_prior`` (a data-independent choice, not estimated from the private rows) and the
        generator produces the other columns given it. Otherwise every column is generated jointly.
    label_prior : float
        Probability of the label +1 in generated rows (``conditional`` only).
    latent_dim, hidden, lr : network sizes and Adam's learning rate.
    generator_average : float
        Samples come from an exponential moving average of the generator's weights with this decay
        (post-processing; 0 uses the last weights).
    random_state : None, int or numpy Generator
        None: cryptographic noise and partition; a seed is for simulation only.

    The defaults of the steps, ``query_batch_size``, ``replay``, ``probe_fraction``, ``hidden`` and
    ``generator_average`` were chosen on a public two-blob problem (docs/private-learning.md).
    """

    def __init__(self, epsilon: float = 1.0, delta: float = 1e-5, *, n_teachers: int = 20,
                 aggregator: Aggregator = "gnmax", sigma: float | None = None, gamma: float | None = None,
                 batch_size: int = 64, teacher_steps: int = 5, student_steps: int = 1, generator_steps: int = 5,
                 query_batch_size: int = 8, replay: int = 4096, probe_fraction: float = 0.5,
                 max_iterations: int | None = None, conditional: bool = False, label_prior: float = 0.5,
                 latent_dim: int = 8, hidden: int = 32, lr: float = 1e-3,
                 generator_average: float = 0.995,
                 random_state: Any = None) -> None:
        if aggregator not in ("gnmax", "lnmax"):
            raise ValidationError(f"aggregator must be 'gnmax' or 'lnmax', got {aggregator!r}", parameter="aggregator")
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        self.n_teachers = check_positive_int(n_teachers, "n_teachers")
        self.aggregator = aggregator
        self.sigma = self.n_teachers / 2.0 if sigma is None else check_real(sigma, "sigma", low=0.0, low_open=True)
        self.gamma = 2.0 / self.n_teachers if gamma is None else check_real(gamma, "gamma", low=0.0, low_open=True)
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.query_batch_size = check_positive_int(query_batch_size, "query_batch_size")
        self.replay = check_positive_int(replay, "replay", minimum=0)
        self.probe_fraction = check_real(probe_fraction, "probe_fraction", low=0.0, high=1.0)
        self.teacher_steps = check_positive_int(teacher_steps, "teacher_steps")
        self.student_steps = check_positive_int(student_steps, "student_steps")
        self.generator_steps = check_positive_int(generator_steps, "generator_steps")
        self.max_iterations = None if max_iterations is None else check_positive_int(max_iterations, "max_iterations")
        self.conditional = bool(conditional)
        self.label_prior = check_real(label_prior, "label_prior", low=0.0, high=1.0, low_open=True, high_open=True)
        self.latent_dim = check_positive_int(latent_dim, "latent_dim")
        self.hidden = check_positive_int(hidden, "hidden")
        self.lr = check_real(lr, "lr", low=0.0, low_open=True)
        self.generator_average = check_real(generator_average, "generator_average", low=0.0, high=1.0, high_open=True)
        self.rng = as_generator(random_state)

    @property
    def noise(self) -> float:
        """The aggregator's noise parameter (GNMax sigma or LNMax gamma)."""
        return self.sigma if self.aggregator == "gnmax" else self.gamma

    def _aggregate(self, counts: np.ndarray) -> np.ndarray:
        if self.aggregator == "gnmax":
            return gnmax(counts, self.sigma, self.rng)
        return lnmax(counts, self.gamma, self.rng)

    def fit(self, X: Any) -> PateGANResult:
        """Train on rows ``X`` in [-1, 1]^d (scaled with a data-independent map)."""
        X = check_rows(X, self.conditional)
        n, d = X.shape
        k = self.n_teachers
        parts = partition_indices(n, k, self.rng)  # raises if k > n
        per_iteration = self.student_steps * self.query_batch_size
        budget_iterations = pate_gan_max_iterations(self.epsilon, self.delta, self.aggregator, self.noise,
                                                     per_iteration)
        if budget_iterations == 0:
            need = pate_gan_epsilon(self.aggregator, self.noise, per_iteration, self.delta)
            raise ValidationError(f"epsilon {self.epsilon:g} does not cover one iteration ({per_iteration} queries "
                                  f"cost {need:.4g}): raise epsilon or the noise, or lower student_steps * "
                                  f"query_batch_size", parameter="epsilon")
        T = budget_iterations if self.max_iterations is None else min(budget_iterations, self.max_iterations)

        gen = torch.Generator().manual_seed(int(self.rng.integers(2**63)))
        sizes = torch.tensor([len(p) for p in parts])
        padded = torch.zeros(k, int(sizes.max()), dtype=torch.long)
        for i, p in enumerate(parts):  # k rows, once
            padded[i, :len(p)] = torch.from_numpy(p)
        Xt = torch.from_numpy(X)
        bt = min(self.batch_size, int(sizes.min()))  # real rows per teacher step
        self.generator_ = TabularGenerator(self.latent_dim, self.hidden, d, self.conditional, self.label_prior)
        student = mlp(d, self.hidden, 1)
        init_uniform([self.generator_, student], gen)  # from the run's generator, not torch's global one
        teachers = _TeacherEnsemble(k, d, self.hidden, gen)
        opt_t = torch.optim.Adam(teachers.parameters(), lr=self.lr, betas=(0.5, 0.9))
        opt_s = torch.optim.Adam(student.parameters(), lr=self.lr, betas=(0.5, 0.9))
        opt_g = torch.optim.Adam(self.generator_.parameters(), lr=self.lr, betas=(0.5, 0.9))
        bce = nn.BCEWithLogitsLoss()
        ones_t, zeros_t = torch.ones(k, bt), torch.zeros(k, bt)
        a = DEFAULT_ORDERS
        rdp_dd = np.zeros_like(a)
        real_labels = 0
        pool_u, pool_r = torch.zeros(0, d), torch.zeros(0)
        n_probe = int(round(self.probe_fraction * self.query_batch_size))
        self._gen = gen
        for _ in range(T):
            for _ in range(self.teacher_steps):
                pick = (torch.rand(k, bt, generator=gen) * sizes[:, None]).long()  # uniform within each part
                real = Xt[torch.gather(padded, 1, pick)]                           # (k, bt, d), part i only
                with torch.no_grad():
                    fake = self.generator_(bt, gen)
                opt_t.zero_grad(set_to_none=True)
                # sum over teachers: parameters are disjoint, so each teacher gets its own BCE gradient
                loss = (bce(teachers(real), ones_t) + bce(teachers(fake), zeros_t)) * k
                loss.backward()
                opt_t.step()
            for _ in range(self.student_steps):
                with torch.no_grad():
                    u = self.generator_(self.query_batch_size - n_probe, gen)
                    if n_probe:  # data-independent probes, uniform in the box (labels uniform in {-1, +1})
                        probe = torch.rand(n_probe, d, generator=gen) * 2 - 1
                        if self.conditional:
                            probe[:, -1] = torch.where(probe[:, -1] < 0, -1.0, 1.0)
                        u = torch.cat([u, probe])
                    real_votes = (teachers(u) > 0).sum(0).numpy()
                counts = np.column_stack([k - real_votes, real_votes])  # class 0: generated, 1: real
                labels = self._aggregate(counts)
                real_labels += int(labels.sum())
                if self.aggregator == "lnmax":
                    rdp_dd += rdp_lnmax_data_dependent(a, counts, self.gamma).sum(axis=0)
                else:
                    rdp_dd += rdp_gnmax_data_dependent(a, counts, self.sigma).sum(axis=0)
                r = torch.from_numpy(labels.astype(np.float32))
                if self.replay:  # earlier released labels: post-processing
                    pool_u = torch.cat([pool_u, u])[-self.replay:]
                    pool_r = torch.cat([pool_r, r])[-self.replay:]
                    pick = torch.randint(0, len(pool_u), (self.batch_size,), generator=gen)
                    u, r = torch.cat([u, pool_u[pick]]), torch.cat([r, pool_r[pick]])
                opt_s.zero_grad(set_to_none=True)
                bce(student(u).squeeze(1), r).backward()
                opt_s.step()
            for _ in range(self.generator_steps):
                opt_g.zero_grad(set_to_none=True)
                g = self.generator_(self.batch_size, gen)
                bce(student(g).squeeze(1), torch.ones(self.batch_size)).backward()  # student's params not stepped
                opt_g.step()
                self.generator_.update_average(self.generator_average)
        self.student_ = student
        N = T * per_iteration
        eps = pate_gan_epsilon(self.aggregator, self.noise, N, self.delta)
        rdp_indep = N * _per_query_rdp(self.aggregator, self.noise, a)
        eps_dd, _ = rdp_to_epsilon(a, np.minimum(rdp_dd, rdp_indep), self.delta)
        agg = (f"GNMax sigma={self.sigma:g}" if self.aggregator == "gnmax"
               else f"LNMax gamma={self.gamma:g}")
        stop = "budget" if T == budget_iterations else "max_iterations"
        statement = PrivacyStatement(eps, self.delta, model="central", neighbouring="replace_one",
                                     note=f"PATE-GAN (Jordon et al. 2019): {k} teachers, {agg} (Papernot et al.), "
                                          f"{N} queries in {T} iterations (stopped by {stop}), data-independent "
                                          f"RDP; generator and samples by post-processing")
        self.result_ = PateGANResult(statement, self.aggregator, self.noise, T, N, min(eps_dd, eps),
                                     real_labels / N)
        return self.result_

    def sample(self, n: int) -> np.ndarray:
        """``n`` synthetic rows (post-processing: no further privacy cost)."""
        n = check_positive_int(n, "n")
        if not hasattr(self, "generator_"):
            raise ValidationError("call fit before sample", parameter="n")
        return self.generator_.sample(n, self._gen)
