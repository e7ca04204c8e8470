"""Privacy accounting: statements, composition, RDP/zCDP, subsampling, shuffle amplification, budgets.

Every epsilon reported by this package is rounded outward (:func:`shuffledp.core.privacy.round_up`).
See ``docs/accounting.md`` for each method's source and validity domain.
"""

from ..core.privacy import PrivacyStatement, round_up
from .accountants import (AdvancedCompositionAccountant, BasicCompositionAccountant, PrivacyAccountant, RdpAccountant,
                          ZCdpAccountant)
from .composition import (advanced_composition, basic_composition, gaussian_delta_exact, gaussian_epsilon_classic,
                          gaussian_epsilon_exact, group_privacy, group_privacy_log_delta, group_privacy_or_none, parallel_composition,
                          subsampling_amplification)
from .events import (ApproxDpEvent, ComposedEvent, GaussianEvent, LaplaceEvent, ParallelComposedEvent,
                     PoissonSampledEvent, PureDpEvent, RandomizedResponseEvent, SelfComposedEvent, UnsupportedEventError,
                     ZCdpEvent)
from .ledger import BudgetExceededError, BudgetLedger
from .pld import DiscretePld, PldAccountant
from .session import BudgetExceeded, PrivacySession
from .rdp import (DEFAULT_ORDERS, rdp_gaussian, rdp_laplace, rdp_poisson_subsampled_gaussian, rdp_pure,
                  rdp_randomized_response, rdp_to_delta, rdp_to_epsilon, rdp_zcdp, zcdp_to_delta, zcdp_to_epsilon)
from .shuffle import (METHODS, ShuffledBinaryRR, local_epsilon_for, min_users_for, shuffle_amplification,
                      shuffle_amplification_delta, shuffle_statement, shuffled_binary_rr_epsilon,
                      shuffled_batch_epsilon, min_batch_for_target)

__all__ = [
    "PrivacyStatement", "round_up",
    # accountants and events
    "PrivacyAccountant", "BasicCompositionAccountant", "AdvancedCompositionAccountant", "RdpAccountant",
    "ZCdpAccountant", "PldAccountant", "DiscretePld", "UnsupportedEventError",
    "PureDpEvent", "ApproxDpEvent", "LaplaceEvent", "GaussianEvent", "RandomizedResponseEvent", "ZCdpEvent",
    "PoissonSampledEvent", "SelfComposedEvent", "ComposedEvent", "ParallelComposedEvent",
    # (eps, delta) algebra
    "basic_composition", "parallel_composition", "advanced_composition", "subsampling_amplification",
    "group_privacy", "group_privacy_log_delta", "group_privacy_or_none", "gaussian_delta_exact", "gaussian_epsilon_exact", "gaussian_epsilon_classic",
    # RDP / zCDP
    "DEFAULT_ORDERS", "rdp_gaussian", "rdp_laplace", "rdp_randomized_response", "rdp_pure", "rdp_zcdp",
    "rdp_poisson_subsampled_gaussian", "rdp_to_epsilon", "rdp_to_delta", "zcdp_to_epsilon", "zcdp_to_delta",
    # shuffle amplification
    "METHODS", "shuffle_amplification", "shuffle_amplification_delta", "shuffle_statement", "local_epsilon_for",
    "min_users_for", "ShuffledBinaryRR", "shuffled_binary_rr_epsilon", "shuffled_batch_epsilon",
    "min_batch_for_target",
    # budgets
    "BudgetLedger", "BudgetExceededError", "PrivacySession", "BudgetExceeded",
]
