"""Task configuration: mechanism, timing, thresholds, client policy — immutable, digest-bound.

A task's configuration is canonical JSON (sorted keys, no whitespace); its SHA-256
``config_digest`` is bound into every report's HPKE ``info``, so a client with different
parameters than the analyzer produces undecryptable reports instead of silently wrong ones.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement
from ..core.validation import check_real
from .wire import MAX_CROWD_LEN, PlaintextSchema, check_envelope_fits, envelope_len

__all__ = ["TaskConfig", "ClientPolicy", "build_mechanism", "create_task_config",
           "canonical_json", "TASK_FIELDS", "MIN_TIME_PRECISION"]

#: Smallest ``time_precision`` (seconds) a deployment accepts by default. Each report carries its
#: client time in ``time_precision`` units (read by the analyzer after decryption) and the shuffler
#: stores each pending report's window (``batch_window >= time_precision``): at 1 s both learn the
#: second a report was sent, which links a report to the connection (and so the client) that
#: carried it and undoes the shuffle. 60 s makes every report of a minute look alike. Lower values
#: exist only for tests (``create_task_config(min_time_precision=...)``, ``serve --min-time-precision``).
MIN_TIME_PRECISION = 60

#: Upper bounds of the task's integer fields (their storage and arithmetic stay in int64).
MAX_BATCH_WINDOW = 366 * 86400          # seconds (one leap year)
MAX_CLOCK_SKEW = 7 * 86400              # seconds (one week)
MAX_WAIT_WINDOWS = 100
MAX_RETENTION_DAYS = 3650
MAX_REPORTS_CAP = 10**6                 # client_policy caps
MAX_BATCH_FLOOR = 10**8                 # = accounting.shuffle.min_batch_for_target's n_max
MAX_DOMAIN = 2**31 - 1                  # mechanism params.d

#: The fields a task creation request may carry (``POST /v1/tasks``); the task id is chosen by the
#: analyzer and the time-precision floor is a server setting, so neither is a request field.
TASK_FIELDS = frozenset({"name", "mechanism", "protocol", "target_central", "time_precision", "batch_window",
                         "max_wait_windows", "tolerable_clock_skew", "crowds", "min_batch_size_floor",
                         "honest_fraction", "client_policy", "retention_days", "central_mode", "drop_noise"})


def _int_field(v: Any, param: str, lo: int, hi: int) -> int:
    """An integer (not a boolean, not a float) in ``[lo, hi]``; ValidationError naming ``param``."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise ValidationError(f"{param} must be an integer in [{lo}, {hi}], got {v!r}", parameter=param)
    return int(v)


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


#: Frequency oracles with a public hash family drawn from ``params.hash_seed`` (unbiased over that draw).
HASH_FAMILY_ORACLES = frozenset({"cms", "hcms"})


def _needs_hash_seed(spec: Any) -> bool:
    params = spec.get("params", {}) if isinstance(spec, dict) else None
    return (isinstance(params, dict) and spec.get("kind") == "frequency" and isinstance(spec.get("name"), str)
            and spec["name"].lower() in HASH_FAMILY_ORACLES and "hash_seed" not in params
            and params.get("hash_table") is None)


def _with_drawn_hash_seed(spec: Any) -> Any:
    """A new task's CMS/HCMS spec gets a freshly drawn ``hash_seed`` in its params (recorded in the
    configuration, so every client and the analyzer build the same family)."""
    if not _needs_hash_seed(spec):
        return spec
    from ..local.apple import draw_hash_seed
    return {**spec, "params": {**spec["params"], "hash_seed": draw_hash_seed()}}


#: knobs a local oracle chooses when they are not given (the smallest stated variance at its
#: parameters): (constructor parameter, attribute holding the choice)
CHOSEN_KNOBS = (("variant", "variant_used"), ("g", "g"), ("omega", "omega"), ("k", "k"))


def _with_pinned_choices(spec: dict, mech: Any) -> dict:
    """A new task records the knobs its oracle chose by default (HR's variant, OLH's g, SS's omega,
    PM/HM's k) in its params: the configuration (and its digest) then fixes the mechanism, and a
    client or analyzer of another version, whose defaults may differ, builds the same one."""
    import inspect
    if spec.get("kind") not in ("frequency", "mean"):
        return spec
    params = dict(spec.get("params", {}))
    takes = inspect.signature(type(mech).__init__).parameters
    for param, attr in CHOSEN_KNOBS:
        if param in takes and param not in params and getattr(mech, attr, None) is not None:
            v = getattr(mech, attr)
            params[param] = v.item() if hasattr(v, "item") else v
    return {**spec, "params": params}


def build_mechanism(spec: dict) -> Any:
    """Build the local mechanism a task names (core registry names).

    ``spec = {"kind": "frequency"|"mean"|"test", "name": <registry name>, "epsilon": float,
    "params": {...}}``; any malformed spec raises ValidationError naming ``mechanism``.
    """
    try:
        return _build_mechanism(spec)
    except ValidationError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as e:
        raise ValidationError(f"mechanism must be {{'kind', 'name', 'epsilon', 'params'}} with valid values "
                              f"({type(e).__name__}: {e})", parameter="mechanism") from e


def _build_mechanism(spec: dict) -> Any:
    if not isinstance(spec, dict) or not isinstance(spec.get("params", {}), dict):
        raise ValidationError("mechanism must be an object with an object 'params'", parameter="mechanism")
    kind, name = spec.get("kind"), spec.get("name")
    params = dict(spec.get("params", {}))

    def eps() -> float:
        return check_real(spec["epsilon"], "mechanism.epsilon", low=0.0, low_open=True)

    def d() -> int:
        return _int_field(params.pop("d"), "mechanism.params.d", 1, MAX_DOMAIN)

    if kind == "frequency":
        from ..local import frequency_oracle
        if _needs_hash_seed(spec):   # a stored configuration without a seed means seed 0 (the former default):
            params["hash_seed"] = 0  # every client and the analyzer must build one family, never a fresh draw
        return frequency_oracle(name, eps(), d(), **params)
    if kind == "mean":
        from ..local import mean_oracle
        return mean_oracle(name, eps(), **params)
    if kind in ("central", "test"):
        # imported here: the central package loads scipy, which a local-oracle client never needs
        from ..central.curator_input import ExactHistogramInput
    if kind == "central":
        if name != "histogram":
            raise ValidationError(f"unknown central-mode mechanism {name!r} (use 'histogram')",
                                  parameter="mechanism.name")
        return ExactHistogramInput(d(), model="central")
    if kind == "test":
        if name != "test_identity":
            raise ValidationError(f"unknown test mechanism {name!r}", parameter="mechanism.name")
        return ExactHistogramInput(d(), model="none")
    raise ValidationError(f"mechanism.kind must be 'frequency', 'mean' or 'test', got {kind!r}",
                          parameter="mechanism.kind")


_PROTOCOLS: dict[bytes, Any] = {}
#: mechanisms the analyzer shares (TaskConfig.mechanism_object(shared=True)), at most _MAX_BUILT
_MECHANISMS: dict[bytes, Any] = {}
_MAX_BUILT = 256
PROTOCOL_SPEC_FIELDS = frozenset({"name", "epsilon", "delta", "n", "params"})


def build_protocol(spec: Any) -> Any:
    """Build the registry protocol a task names: ``{"name", "epsilon", "delta", "n", "params"}``.

    Memoized per canonical spec (a protocol's calibration may search over parameters; the
    analyzer, the shufflers and the clients build the same object from the same configuration).
    A malformed spec raises ValidationError naming ``protocol`` or the offending ``protocol.*``.
    """
    if not isinstance(spec, dict) or not set(spec) <= PROTOCOL_SPEC_FIELDS or "name" not in spec:
        raise ValidationError(f"protocol must be an object with fields {sorted(PROTOCOL_SPEC_FIELDS)} ('name' "
                              f"required), got {spec!r}"[:300], parameter="protocol")
    key = canonical_json(spec)
    p = _PROTOCOLS.get(key)
    if p is not None:
        return p
    from ..shuffle.registry import protocol as make_protocol
    params = spec.get("params", {})
    if not isinstance(params, dict):
        raise ValidationError("protocol.params must be an object", parameter="protocol.params")
    name = spec["name"]
    if not isinstance(name, str):
        raise ValidationError(f"protocol.name must be a registry name, got {name!r}", parameter="protocol.name")
    kw: dict[str, Any] = {}
    if "epsilon" in spec:
        kw["epsilon"] = check_real(spec["epsilon"], "protocol.epsilon", low=0.0, low_open=True)
    if "delta" in spec:
        kw["delta"] = check_real(spec["delta"], "protocol.delta", low=0.0, high=1.0, high_open=True)
    if "n" in spec:
        kw["n"] = _int_field(spec["n"], "protocol.n", 1, MAX_BATCH_FLOOR)
    try:
        p = make_protocol(name, **kw, **params)
    except ValidationError as e:
        param = e.parameter or ""
        if param in ("name",):
            param = "protocol.name"
        elif param and not param.startswith("protocol"):
            param = f"protocol.{param}" if param in ("epsilon", "delta", "n") else f"protocol.params.{param}"
        raise ValidationError(str(e), parameter=param or "protocol") from None
    except (TypeError, ValueError, OverflowError) as e:
        raise ValidationError(f"protocol {name!r} cannot be built from {params!r}: {e}"[:400],
                              parameter="protocol.params") from e
    if p.model == "shuffle" and p.n_shufflers > 255:
        raise ValidationError("a deployment has at most 255 shufflers", parameter="protocol")
    if len(_PROTOCOLS) > 256:
        _PROTOCOLS.clear()
    _PROTOCOLS[key] = p
    return p


#: Protocols whose public hashes are drawn from their own ``hash_seed`` parameter (heavy hitters).
HASH_SEED_PROTOCOLS = ("hh_sfp", "hh_pem", "hh_treehist")


def _with_drawn_protocol_hash_seed(spec: Any) -> Any:
    """``ldp_oracle`` over CMS/HCMS, and the heavy-hitter protocols: a new task draws the public
    hashes' seed (recorded in the task)."""
    if isinstance(spec, dict) and spec.get("name") in HASH_SEED_PROTOCOLS and isinstance(spec.get("params"), dict) \
            and spec["params"].get("hash_seed") is None:
        from ..local.apple import draw_hash_seed
        return {**spec, "params": {**spec["params"], "hash_seed": draw_hash_seed()}}
    if not isinstance(spec, dict) or spec.get("name") != "ldp_oracle" or not isinstance(spec.get("params"), dict):
        return spec
    params = spec["params"]
    oracle = params.get("oracle")
    op = params.get("oracle_params") or {}
    if not (isinstance(oracle, str) and oracle.lower() in HASH_FAMILY_ORACLES and isinstance(op, dict)
            and "hash_seed" not in op and op.get("hash_table") is None):
        return spec
    from ..local.apple import draw_hash_seed
    return {**spec, "params": {**params, "oracle_params": {**op, "hash_seed": draw_hash_seed()}}}


def protocol_min_batch_size(p: Any, floor: int) -> int:
    """Users a shuffler must hold before it releases a batch of protocol ``p``.

    A single-shuffler shuffle-model protocol is calibrated for ``p.n`` users: fewer would release
    with a weaker guarantee than its target, so each batch waits for ``max(floor, n)`` users. With
    several shufflers a batch is one shuffler's part of a release: when every user reaches every
    shuffler each part holds all ``n``; when users are spread over the shufflers no single part
    can be held to ``n``, and the floor applies (the analyzer states the guarantee of each
    window's release, ``privacy(n_w)``, from the users all shufflers delivered). Local- and
    central-model protocols do not depend on the batch: the floor applies.
    """
    if p.model != "shuffle":
        return floor
    if p.n_shufflers == 1 or p.user_routing == "every":
        return max(floor, int(p.n))
    return floor


@dataclass(frozen=True)
class ClientPolicy:
    """Per-client caps enforced by the SDK (Apple-style): the only place per-user budgets live."""

    max_reports_per_window: int = 1
    max_reports_per_day: int = 1
    #: re-send one randomized message per value (bounded local loss over any number of reports, but no
    #: amplification: :attr:`TaskConfig.reports_repeat`); off by default, so every report is fresh
    memoize: bool = False

    def __post_init__(self) -> None:
        for f in ("max_reports_per_window", "max_reports_per_day"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValidationError(f"client_policy.{f} must be an int >= 1, got {v!r}",
                                      parameter=f"client_policy.{f}")
        if not isinstance(self.memoize, bool):
            raise ValidationError(f"client_policy.memoize must be true or false, got {self.memoize!r}",
                                  parameter="client_policy.memoize")


@dataclass(frozen=True)
class TaskConfig:
    task_id: bytes
    name: str
    mechanism: dict
    report_schema: PlaintextSchema
    time_precision: int
    batch_window: int
    max_wait_windows: int
    tolerable_clock_skew: int
    crowds: tuple[bytes, ...]
    min_batch_size_floor: int
    target_central: dict
    honest_fraction: float
    min_batch_size: int
    client_policy: ClientPolicy
    retention_days: int
    test_only: bool = False
    central_mode: dict | None = None  # {"eps_per_query", "query_budget_eps"} when the analyzer adds noise
    drop_noise: dict | None = None    # {"eps", "delta"}: DP random drop before thresholding (shuffler)
    version: int = 1
    #: a registry protocol ``{"name", "epsilon", "delta", "n", "params"}`` (``shuffledp.shuffle.protocol``):
    #: its encoder runs on the clients, its shuffler side on the shufflers, its aggregate, estimate and
    #: ``privacy(n)`` on the analyzer. ``None`` for a task that names a local oracle (``mechanism``).
    protocol: dict | None = None

    # -------------------------------------------------------------- serialisation
    def to_json(self) -> dict:
        return {
            "v": self.version, "task_id": self.task_id.hex(), "name": self.name, "mechanism": self.mechanism,
            "report_schema": self.report_schema.to_json(), "plaintext_len": self.report_schema.length,
            "time_precision": self.time_precision, "batch_window": self.batch_window,
            "max_wait_windows": self.max_wait_windows, "tolerable_clock_skew": self.tolerable_clock_skew,
            "crowds": [c.hex() for c in self.crowds], "min_batch_size_floor": self.min_batch_size_floor,
            "target_central": self.target_central, "honest_fraction": self.honest_fraction,
            "min_batch_size": self.min_batch_size, "client_policy": asdict(self.client_policy),
            "retention_days": self.retention_days, "test_only": self.test_only, "central_mode": self.central_mode,
            "drop_noise": self.drop_noise,
            **({"protocol": self.protocol} if self.protocol is not None else {}),
        }

    @classmethod
    def from_json(cls, o: dict) -> "TaskConfig":
        try:
            return cls(
                task_id=bytes.fromhex(o["task_id"]), name=str(o["name"]), mechanism=dict(o["mechanism"]),
                report_schema=PlaintextSchema.from_json(o["report_schema"]),
                time_precision=int(o["time_precision"]), batch_window=int(o["batch_window"]),
                max_wait_windows=int(o["max_wait_windows"]), tolerable_clock_skew=int(o["tolerable_clock_skew"]),
                crowds=tuple(bytes.fromhex(c) for c in o["crowds"]),
                min_batch_size_floor=int(o["min_batch_size_floor"]), target_central=dict(o["target_central"]),
                honest_fraction=float(o["honest_fraction"]), min_batch_size=int(o["min_batch_size"]),
                client_policy=ClientPolicy(**o["client_policy"]), retention_days=int(o["retention_days"]),
                test_only=bool(o.get("test_only", False)), central_mode=o.get("central_mode"),
                drop_noise=o.get("drop_noise"), version=int(o.get("v", 1)), protocol=o.get("protocol"))
        except (KeyError, TypeError, ValueError) as e:
            raise ValidationError(f"malformed task configuration: {e}", parameter="config") from e

    def canonical(self) -> bytes:
        return canonical_json(self.to_json())

    @property
    def digest(self) -> bytes:
        return hashlib.sha256(self.canonical()).digest()

    @property
    def envelope_len(self) -> int:
        return envelope_len(self.report_schema.length)

    def mechanism_object(self, shared: bool = False) -> Any:
        """The task's local mechanism (see :func:`build_mechanism`).

        ``shared=True`` (the analyzer: validate, aggregate, estimate) reuses one object per
        configuration; a client gets a fresh one, since a mechanism may keep client state (RAPPOR's
        memoized permanent answers) that must never be shared between clients.
        """
        if not shared:
            return build_mechanism(self.mechanism)
        key = canonical_json(self.mechanism)
        m = _MECHANISMS.get(key)
        if m is None:
            m = build_mechanism(self.mechanism)
            if len(_MECHANISMS) >= _MAX_BUILT:
                _MECHANISMS.pop(next(iter(_MECHANISMS)))
            _MECHANISMS[key] = m
        return m

    def protocol_object(self) -> Any:
        """The task's registry protocol (built once per configuration and process)."""
        if self.protocol is None:
            raise ValidationError("this task names a local oracle, not a protocol", parameter="protocol")
        return build_protocol(self.protocol)

    @property
    def shufflers_add_messages(self) -> bool:
        """Whether the task's shufflers add messages of their own (a protocol overriding
        ``shuffler_messages``, e.g. MURS's uniform fakes), which they seal with a window's start as time."""
        if self.protocol is None:
            return False
        from ..shuffle.base import Protocol
        return type(self.protocol_object()).shuffler_messages is not Protocol.shuffler_messages

    def report_time(self, now: float) -> int:
        """The client time a client writes into a report or message (``time_precision`` units).

        ``int(now) // time_precision``; for a task whose shufflers add messages
        (:attr:`shufflers_add_messages`), the start of the client's batch window instead. A shuffler
        cannot see (or copy) client times, so it seals its fakes with a window's start: a finer
        client time would tell the analyzer users' messages from the fakes that hide them.
        """
        t = int(now) // self.time_precision
        if self.shufflers_add_messages:
            per = self.batch_window // self.time_precision
            t -= t % per
        return t

    @property
    def n_shufflers(self) -> int:
        return int(self.protocol_object().n_shufflers) if self.protocol is not None else 1

    @property
    def eps_local(self) -> float:
        """eps0: the local guarantee of one report that a batch's amplification, the batch sizing and
        the group and composition bounds take (``inf`` without local randomization).

        The mechanism's ``epsilon``; for a longitudinal oracle whose fresh layer is one channel of
        loss ``epsilon_irr`` on the whole permanent answer (L-GRR, LOLOHA), ``min(epsilon,
        epsilon_irr)``. Why ``epsilon_irr`` and not the one-report ``epsilon_one`` (docs/longitudinal.md,
        "Shuffled batches of longitudinal reports"): the permanent answer ``B = f(x, Z)`` is a function
        of the data and of randomness ``Z`` that does not depend on the data, so given ``Z`` every
        report is an independent ``epsilon_irr``-LDP randomization of some input: each batch is the
        shuffle of independent ``epsilon_irr``-LDP reports, batches are independent mechanisms (basic
        composition over them holds) and averaging over ``Z`` keeps every (eps, delta) bound. The
        ``epsilon_one`` bound holds for one batch alone, but batches share the permanent answers, so
        composing per-batch bounds computed from it is not valid.
        """
        if self.protocol is not None:
            lr = self.protocol_object().local_randomizer
            return float(lr.epsilon) if lr is not None else math.inf
        if self.mechanism.get("kind") in ("test", "central"):
            return math.inf
        if self.mechanism.get("kind") == "frequency" and _is_longitudinal_oracle(self.mechanism.get("name")):
            return report_epsilon(self.mechanism, self.mechanism_object(shared=True))
        return float(self.mechanism.get("epsilon", math.inf))

    @property
    def reports_repeat(self) -> bool:
        """Whether a client's randomness repeats across batches, so that no batch may claim amplification.

        Amplification hides a report among the fresh randomness of the other users' reports in its
        batch. When clients re-send a memoized randomized message (``client_policy.memoize`` on a
        local oracle or a protocol), a later batch repeats an earlier batch's other reports and the
        two can be differenced: window 1 holds users ``A + {j}``, window 2 holds ``A`` with unchanged
        values, and the multiset difference is ``j``'s report. A longitudinal oracle's permanent
        answers are memoized in the same way; only L-GRR and LOLOHA, whose fresh per-report layer of
        loss ``epsilon_irr`` is the task's eps0, are amplified soundly (given the permanent
        randomness every report is a fresh ``epsilon_irr``-LDP randomization).
        """
        if self.mechanism is not None and self.mechanism.get("kind") == "frequency" \
                and _is_longitudinal_oracle(self.mechanism.get("name")):
            irr = getattr(self.mechanism_object(shared=True), "epsilon_irr", None)
            return irr is None or float(irr) != self.eps_local
        if self.mechanism is not None and self.mechanism.get("kind") in ("test", "central"):
            return False
        return bool(self.client_policy.memoize)

    def batch_privacy(self, n: int) -> tuple[PrivacyStatement, str]:
        """Per-report guarantee of one released batch holding ``n`` VALID reports (honest fraction applied).

        ``n`` must count only the reports the analyzer accepted (decrypted, well-formed, in window,
        not replayed): envelopes that fail any check hide nobody. Below the task's
        ``min_batch_size``, or where clients' randomness repeats across batches
        (:attr:`reports_repeat`), no amplification is claimed: the statement is the local guarantee eps0.
        """
        from ..accounting.shuffle import shuffled_batch_epsilon as central_epsilon

        delta = float(self.target_central["delta"])
        if self.reports_repeat or n < self.min_batch_size:
            why = ("memoized randomness repeats across batches (batches can be differenced): no amplification "
                   "claimed, local guarantee only" if self.reports_repeat else
                   f"batch of {n} valid report(s) < min_batch_size {self.min_batch_size}: "
                   f"no amplification claimed, local guarantee only")
            if not math.isfinite(self.eps_local):
                return PrivacyStatement(math.inf, 0.0, "local", note=why + " (no local randomization)"), why
            return PrivacyStatement(self.eps_local, 0.0, "local", "replace_one", note=why), why
        n_eff = int(math.floor(n * self.honest_fraction))
        eps, method = central_epsilon(self.eps_local, n_eff, delta)
        if not math.isfinite(eps):
            return PrivacyStatement(math.inf, 0.0, "local", note=method), method
        return (PrivacyStatement(eps, delta if eps < self.eps_local else 0.0, "shuffle", "replace_one",
                                 gamma=self.honest_fraction,
                                 note=f"batch of {n} valid reports, {method}"), method)


def report_epsilon(spec: dict, mech: Any) -> float:
    """eps0 of one report of the local oracle ``mech`` built from ``spec`` (:attr:`TaskConfig.eps_local`):
    its ``epsilon``, or ``min(epsilon, epsilon_irr)`` for a longitudinal oracle with a fresh layer of
    loss ``epsilon_irr`` on the whole permanent answer."""
    eps = float(spec.get("epsilon", math.inf))
    irr = getattr(mech, "epsilon_irr", None)
    if spec.get("kind") == "frequency" and _is_longitudinal_oracle(spec.get("name")) and irr is not None:
        eps = min(eps, float(irr))
    return eps


def _is_longitudinal_oracle(name: Any) -> bool:
    """Whether ``name`` is a longitudinal frequency oracle of the registry (shuffledp.local.longitudinal)."""
    from ..local.registry import FREQUENCY_ORACLES

    return isinstance(name, str) and FREQUENCY_ORACLES.get(name.lower(), "").startswith("longitudinal.")


def _check(cond: bool, msg: str, param: str) -> None:
    if not cond:
        raise ValidationError(msg, parameter=param)


def create_task_config(*, name: str, mechanism: dict | None = None, target_central: dict | None = None,
                       protocol: dict | None = None, time_precision: int = 3600,
                       batch_window: int = 86400, max_wait_windows: int = 3, tolerable_clock_skew: int = 3600,
                       crowds: list[bytes] | None = None, min_batch_size_floor: int = 100,
                       honest_fraction: float = 1.0, client_policy: dict | None = None,
                       retention_days: int = 90, central_mode: dict | None = None,
                       drop_noise: dict | None = None, task_id: bytes | None = None,
                       min_time_precision: int = MIN_TIME_PRECISION) -> TaskConfig:
    """Validate a task request and compute its minimum batch size from the central target.

    Raises ValidationError (naming the parameter and its range) when anything is out of range or
    of the wrong type (booleans are not integers; numbers must be finite), including:

    - ``time_precision < min_time_precision`` (default :data:`MIN_TIME_PRECISION` = 60 s; a smaller
      value is for tests only, see the constant's comment);
    - a target central (eps, delta) unreachable from the mechanism's eps0;
    - a client policy under which the target is vacuous for every batch: the ``k =
      max_reports_per_window`` reports one user may have in a single window give, by group
      privacy, ``(k eps_c, k e^{(k-1) eps_c} delta)`` with a delta >= 1 (no guarantee).
    """
    _check(isinstance(name, str) and 0 < len(name) <= 200, "name must be a non-empty string (<= 200 chars)", "name")
    _check((mechanism is None) != (protocol is None), "a task names exactly one of protocol (a registry protocol) "
           "and mechanism (a local oracle)", "protocol")
    common = dict(time_precision=time_precision, batch_window=batch_window, max_wait_windows=max_wait_windows,
                  tolerable_clock_skew=tolerable_clock_skew, crowds=crowds,
                  min_batch_size_floor=min_batch_size_floor, honest_fraction=honest_fraction,
                  client_policy=client_policy, retention_days=retention_days, task_id=task_id,
                  min_time_precision=min_time_precision)
    if protocol is not None:
        return _create_protocol_task(name=name, protocol=protocol, target_central=target_central,
                                     central_mode=central_mode, drop_noise=drop_noise, **common)
    return _create_mechanism_task(name=name, mechanism=mechanism, target_central=target_central,
                                  central_mode=central_mode, drop_noise=drop_noise, common=_common_fields(**common))


def _target_field(target_central: Any) -> tuple[float, float]:
    _check(isinstance(target_central, dict) and set(target_central) == {"eps", "delta"},
           "target_central must be an object with exactly the fields eps and delta", "target_central")
    eps_c = check_real(target_central["eps"], "target_central.eps", low=0.0, low_open=True)
    delta = check_real(target_central["delta"], "target_central.delta", low=0.0, high=1.0, low_open=True,
                       high_open=True)
    return eps_c, delta


def _create_mechanism_task(*, name: str, mechanism: Any, target_central: Any, central_mode: Any, drop_noise: Any,
                           common: dict) -> TaskConfig:
    """A task naming a local oracle (or a central-mode / test input): build it, pin its drawn and
    chosen parameters, size its batches from the target (clone bound), lay out its reports."""
    from ..accounting.composition import group_privacy_or_none
    from ..accounting.shuffle import min_batch_for_target

    _check(target_central is not None, "a mechanism task needs target_central {eps, delta}", "target_central")
    mechanism = _with_drawn_hash_seed(mechanism)
    mech = build_mechanism(mechanism)  # validates registry name + parameters
    mechanism = _with_pinned_choices(mechanism, mech)
    eps_c, delta = _target_field(target_central)
    test_only = mechanism.get("kind") == "test"
    central = mechanism.get("kind") == "central"
    n_min = common["min_batch_size_floor"]
    if not (test_only or central):
        eps0 = report_epsilon(mechanism, mech)  # as TaskConfig.eps_local
        n_min = max(n_min, math.ceil(min_batch_for_target(eps0, eps_c, delta) / common["honest_fraction"]))
        k = common["client_policy"].max_reports_per_window
        _check(group_privacy_or_none(eps_c, delta, k) is not None,
               f"client_policy.max_reports_per_window = {k} makes the target vacuous: by group privacy the "
               f"{k} reports one user may send in one window are only ({k} eps_c, {k} e^(({k}-1) eps_c) delta)"
               f"-DP at eps_c = {eps_c:g}, delta = {delta:g}, a delta >= 1 (no guarantee); lower "
               f"max_reports_per_window, eps_c or delta", "client_policy.max_reports_per_window")
    schema = PlaintextSchema(tuple(mech.report_schema()))   # the mechanism's declared report layout
    check_envelope_fits(schema.length)
    return TaskConfig(name=name, mechanism=dict(mechanism), report_schema=schema,
                      target_central={"eps": eps_c, "delta": delta}, min_batch_size=int(n_min),
                      test_only=test_only, central_mode=_central_mode_field(central_mode, central),
                      drop_noise=_drop_noise_field(drop_noise), **common)


def _central_mode_field(central_mode: Any, central: bool) -> dict | None:
    """A central-mode task's ``{eps_per_query > 0, query_budget_eps >= eps_per_query}``; None otherwise."""
    if not central:
        _check(central_mode is None, "central_mode applies only to mechanism kind 'central'", "central_mode")
        return None
    try:
        ok = isinstance(central_mode, dict) and set(central_mode) == {"eps_per_query", "query_budget_eps"}
        if ok:
            eq = check_real(central_mode["eps_per_query"], "central_mode.eps_per_query", low=0.0, low_open=True)
            qb = check_real(central_mode["query_budget_eps"], "central_mode.query_budget_eps", low=eq)
    except ValidationError:
        ok = False
    _check(ok, "a central-mode task needs central_mode {eps_per_query > 0, query_budget_eps >= eps_per_query}"
           " (finite numbers)", "central_mode")
    return {"eps_per_query": eq, "query_budget_eps": qb}


def _drop_noise_field(drop_noise: Any) -> dict | None:
    """The shuffler's DP random drop ``{eps > 0, delta in (0, 1)}`` (None: no drop)."""
    if drop_noise is None:
        return None
    from .drop import drop_offset
    _check(isinstance(drop_noise, dict) and set(drop_noise) == {"eps", "delta"},
           "drop_noise must be {eps, delta}", "drop_noise")
    try:
        drop_noise = {"eps": check_real(drop_noise["eps"], "drop_noise.eps", low=0.0, low_open=True),
                      "delta": check_real(drop_noise["delta"], "drop_noise.delta", low=0.0, high=1.0,
                                          low_open=True, high_open=True)}
    except ValidationError as e:
        raise ValidationError(str(e), parameter="drop_noise") from None
    drop_offset(drop_noise["eps"], drop_noise["delta"])
    return drop_noise


def _common_fields(*, time_precision: Any, batch_window: Any, max_wait_windows: Any, tolerable_clock_skew: Any,
                   crowds: Any, min_batch_size_floor: Any, honest_fraction: Any, client_policy: Any,
                   retention_days: Any, task_id: Any, min_time_precision: Any) -> dict[str, Any]:
    """The task fields every task has (timing, crowds, floor, honest fraction, client policy,
    retention, id), validated; a dict of :class:`TaskConfig` keyword arguments."""
    min_time_precision = _int_field(min_time_precision, "min_time_precision", 1, MAX_BATCH_WINDOW)
    time_precision = _int_field(time_precision, "time_precision", 1, MAX_BATCH_WINDOW)
    _check(time_precision >= min_time_precision,
           f"time_precision must be >= {min_time_precision} s, got {time_precision}: a finer report time (and "
           f"batch window) tells the shuffler and the analyzer when each report was sent, which links it to "
           f"its connection", "time_precision")
    batch_window = _int_field(batch_window, "batch_window", time_precision, MAX_BATCH_WINDOW)
    _check(batch_window % time_precision == 0, "batch_window must be a multiple of time_precision", "batch_window")
    max_wait_windows = _int_field(max_wait_windows, "max_wait_windows", 1, MAX_WAIT_WINDOWS)
    tolerable_clock_skew = _int_field(tolerable_clock_skew, "tolerable_clock_skew", 0, MAX_CLOCK_SKEW)
    crowds = list(crowds) if crowds else [b""]
    _check(all(isinstance(c, bytes) and len(c) <= MAX_CROWD_LEN for c in crowds) and len(set(crowds)) == len(crowds),
           f"crowds must be distinct byte strings of at most {MAX_CROWD_LEN} bytes", "crowds")
    min_batch_size_floor = _int_field(min_batch_size_floor, "min_batch_size_floor", 1, MAX_BATCH_FLOOR)
    honest_fraction = check_real(honest_fraction, "honest_fraction", low=0.0, high=1.0, low_open=True)
    _check(client_policy is None or isinstance(client_policy, dict), "client_policy must be an object",
           "client_policy")
    try:
        pol = ClientPolicy(**(client_policy or {}))
    except TypeError as e:
        raise ValidationError(f"client_policy has unknown fields: {e}", parameter="client_policy") from e
    for f in ("max_reports_per_window", "max_reports_per_day"):
        _int_field(getattr(pol, f), f"client_policy.{f}", 1, MAX_REPORTS_CAP)
    _check(1 <= pol.max_reports_per_window <= pol.max_reports_per_day,
           "client_policy needs 1 <= max_reports_per_window <= max_reports_per_day", "client_policy")
    retention_days = _int_field(retention_days, "retention_days", 1, MAX_RETENTION_DAYS)
    _check(task_id is None or (isinstance(task_id, bytes) and len(task_id) == 32), "task_id must be 32 bytes",
           "task_id")
    return {"task_id": task_id or secrets.token_bytes(32), "time_precision": time_precision,
            "batch_window": batch_window, "max_wait_windows": max_wait_windows,
            "tolerable_clock_skew": tolerable_clock_skew, "crowds": tuple(crowds),
            "min_batch_size_floor": min_batch_size_floor, "honest_fraction": float(honest_fraction),
            "client_policy": pol, "retention_days": retention_days}


def _create_protocol_task(*, name: str, protocol: Any, target_central: Any, central_mode: Any, drop_noise: Any,
                          **fields: Any) -> TaskConfig:
    """A task that deploys a registry protocol (see :func:`build_protocol`).

    The target is the protocol's own ``(epsilon, delta)``; ``target_central``, when given, must
    equal it. The message layout is the protocol's :meth:`~shuffledp.shuffle.base.Protocol.message_schema`.
    ``central_mode`` and ``drop_noise`` belong to local-oracle tasks: a central-model protocol
    (``cdp_*``) adds its own exact noise when the analyzer aggregates a batch.
    """
    common = _common_fields(**fields)
    protocol = _with_drawn_protocol_hash_seed(protocol)
    p = build_protocol(protocol)
    spec = {"name": p.name, "epsilon": p.epsilon, "delta": p.delta, "n": p.n,
            "params": dict(protocol.get("params", {}))}
    build_protocol(spec)   # the stored (normalized) spec builds the same protocol
    target = {"eps": p.epsilon, "delta": p.delta}
    _check(target_central is None or (isinstance(target_central, dict) and target_central == target),
           f"a protocol task's target is the protocol's own (epsilon, delta) = ({p.epsilon:g}, {p.delta:g}); "
           f"omit target_central or give exactly that", "target_central")
    _check(central_mode is None, "central_mode applies to mechanism tasks; a central-model protocol (cdp_*) adds "
           "its noise itself", "central_mode")
    _check(drop_noise is None, "drop_noise applies to mechanism tasks, not to protocol tasks", "drop_noise")
    _check(p.n_shufflers <= 255, "a deployment has at most 255 shufflers", "protocol")
    try:
        schema = PlaintextSchema(p.message_schema())
    except (ValidationError, NotImplementedError, TypeError, ValueError) as e:
        raise ValidationError(f"protocol {p.name!r} has no fixed message layout: {e}", parameter="protocol") from e
    check_envelope_fits(schema.length, "protocol")
    n_min = protocol_min_batch_size(p, common["min_batch_size_floor"])
    return TaskConfig(name=name, mechanism={"kind": "protocol", "name": p.name}, report_schema=schema,
                      target_central=target, min_batch_size=int(n_min), protocol=spec, **common)
