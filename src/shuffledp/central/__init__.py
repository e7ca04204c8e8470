"""Central differential privacy: noise added once by a trusted curator.

Every mechanism has two entry points:

- ``release(true_value)`` — production: exact integer noise from the OS (:mod:`secrets`);
  any ``rng``/``seed`` argument raises :class:`~shuffledp.core.ValidationError`.
- ``simulate(true_values, rng)`` — experiments: vectorized numpy with a seeded Generator.

and reports ``privacy`` (a :class:`~shuffledp.core.PrivacyStatement`, model ``"central"``) and
``variance``. See ``docs/central.md`` for each guarantee and the floating-point defence.
"""

from .base import CentralMechanism, fixed_point_encode, refuse_seed
from .calibration import (
    analytic_gaussian_sigma,
    binomial_delta,
    binomial_minimal_trials,
    binomial_trials_survey,
    classic_gaussian_sigma,
    discrete_gaussian_delta,
    discrete_gaussian_epsilon,
    discrete_gaussian_sigma,
    gaussian_delta,
    gaussian_epsilon,
)
from .distributed import (
    DistributedGeometricMechanism,
    SplitAndMix,
    sample_polya,
    split_and_mix_delta,
    split_and_mix_messages,
    split_and_mix_security_bits,
)
from .distributions import (
    discrete_gaussian_pmf,
    discrete_gaussian_variance,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    polya_pmf,
    simulate_discrete_gaussian,
    simulate_discrete_laplace,
    simulate_polya,
    simulate_symmetric_binomial,
)
from .mechanisms import (
    BinomialMechanism,
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    sample_symmetric_binomial,
)
from .selection import ExponentialMechanism, PermuteAndFlip

__all__ = [
    "CentralMechanism",
    "refuse_seed",
    "fixed_point_encode",
    # mechanisms
    "DiscreteLaplaceMechanism",
    "GeometricMechanism",
    "LaplaceMechanism",
    "GaussianMechanism",
    "DiscreteGaussianMechanism",
    "BinomialMechanism",
    "PermuteAndFlip",
    "ExponentialMechanism",
    "DistributedGeometricMechanism",
    "SplitAndMix",
    # production (exact, OS) samplers
    "sample_discrete_laplace",
    "sample_discrete_gaussian",
    "sample_symmetric_binomial",
    "sample_polya",
    # simulation samplers
    "simulate_discrete_laplace",
    "simulate_discrete_gaussian",
    "simulate_polya",
    "simulate_symmetric_binomial",
    # pmfs and variances
    "discrete_laplace_pmf",
    "discrete_laplace_variance",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "polya_pmf",
    # calibration
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "gaussian_delta",
    "gaussian_epsilon",
    "discrete_gaussian_delta",
    "discrete_gaussian_epsilon",
    "discrete_gaussian_sigma",
    "binomial_trials_survey",
    "binomial_delta",
    "binomial_minimal_trials",
    # split-and-mix parameters
    "split_and_mix_messages",
    "split_and_mix_delta",
    "split_and_mix_security_bits",
]
