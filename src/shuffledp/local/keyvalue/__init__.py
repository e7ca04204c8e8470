"""Key-value data collection under LDP: PrivKV(M), KVUE, KVOH, PCKV-UE/GRR, LDPKV-approx, HISKV and the
RAPPOR+Harmony baseline.

Entry point: :func:`keyvalue_mechanism` builds a mechanism by name.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import ValidationError
from .base import KeyValueEstimate, KeyValueMechanism
from .data import KeyValueData, as_keyvalue_data, discretize, padding_sample, uniform_key_sample
from .padding import HISKV, OETL, PCKVGRR, PCKVUE, PaddingSamplingKeyValue, hiskv_cell_probabilities
from .rappor_harmony import RapporHarmony
from .uniform import KVOH, KVUE, LDPKVApprox, PrivKV, PrivKVM, UniformSamplingKeyValue

__all__ = [
    "KeyValueData", "KeyValueEstimate", "KeyValueMechanism", "as_keyvalue_data", "discretize",
    "padding_sample", "uniform_key_sample", "PrivKV", "PrivKVM", "KVUE", "KVOH", "LDPKVApprox",
    "PCKVUE", "PCKVGRR", "HISKV", "OETL", "hiskv_cell_probabilities", "UniformSamplingKeyValue",
    "PaddingSamplingKeyValue", "RapporHarmony", "KEYVALUE_MECHANISMS", "keyvalue_mechanism",
]

KEYVALUE_MECHANISMS: dict[str, type[KeyValueMechanism]] = {
    "privkv": PrivKV,
    "privkvm": PrivKVM,
    "kvue": KVUE,
    "kvoh": KVOH,
    "pckv-ue": PCKVUE,
    "pckv-grr": PCKVGRR,
    "ldpkv": LDPKVApprox,
    "hiskv": HISKV,
    "rappor-harmony": RapporHarmony,
}


def keyvalue_mechanism(name: str, epsilon: float, d: int, **params: Any) -> KeyValueMechanism:
    """Build the key-value mechanism ``name`` (one of :data:`KEYVALUE_MECHANISMS`) over keys [0, d)."""
    if not isinstance(name, str) or name.lower() not in KEYVALUE_MECHANISMS:
        raise ValidationError(f"unknown key-value mechanism {name!r}; choose one of {sorted(KEYVALUE_MECHANISMS)}",
                              parameter="name")
    try:
        return KEYVALUE_MECHANISMS[name.lower()](epsilon, d, **params)
    except TypeError as e:
        raise ValidationError(f"bad parameters for {name}: {e}", parameter="params") from e
