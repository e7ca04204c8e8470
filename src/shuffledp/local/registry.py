"""Registry: build a local mechanism by its short name, and plan a run's memory.

Frequency oracles: grr, sue, oue, rappor, blh, olh, hr, ss, cms, hcms; longitudinal (memoized)
l_grr, l_oue, loloha, dbitflip (:mod:`shuffledp.local.longitudinal`).
Mean oracles: duchi, harmony, pm, hm.
Modules register lazily so importing :mod:`shuffledp.local` stays cheap.

Parameters are checked against the constructor's signature: an unknown keyword is a
:class:`~shuffledp.core.errors.ValidationError` naming it and the closest accepted name
(``eps`` -> ``epsilon``), a missing required one a :class:`ValidationError` naming it.

Memory rule (:func:`check_domain_fits`, :func:`check_run_fits`): a frequency oracle over ``d``
items refuses to be built when the ``d``-long arrays that its aggregate and every estimate need
(:func:`domain_bytes`: at least 48 bytes per item) exceed the available memory; a run of
``randomize`` + ``aggregate`` over ``n`` users in chunks, then ``estimate``, is planned with
:func:`run_memory_bytes` and refused before anything is allocated when it does not fit, with the
chunk size, domain size or mechanism that would fit.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
from typing import Any

from ..core.errors import ValidationError
from ..core.memory import CHECK_FLOOR, available_memory, check_fits, format_bytes
from .base import FrequencyOracle, MeanOracle

__all__ = ["FREQUENCY_ORACLES", "MEAN_ORACLES", "frequency_oracle", "mean_oracle", "check_parameters",
           "domain_bytes", "check_domain_fits", "run_memory_bytes", "check_batch_fits", "check_run_fits", "check_simulation_fits",
           "device_oracles"]

#: name -> "module:ClassName" (relative to shuffledp.local)
FREQUENCY_ORACLES: dict[str, str] = {
    "grr": "grr:GeneralizedRandomizedResponse",
    "sue": "unary:SymmetricUnaryEncoding",
    "oue": "unary:OptimizedUnaryEncoding",
    "rappor": "rappor:Rappor",
    "blh": "hashing:BinaryLocalHashing",
    "olh": "hashing:OptimizedLocalHashing",
    "hr": "hadamard:HadamardResponse",
    "ss": "subset:SubsetSelection",
    "cms": "count_mean_sketch:CountMeanSketch",
    "hcms": "hadamard_count_mean_sketch:HadamardCountMeanSketch",
    # longitudinal (memoized permanent answer; ``randomize(..., users=ids)`` reuses it)
    "l_grr": "longitudinal.l_grr:LongitudinalGRR",
    "l_oue": "longitudinal.l_oue:LongitudinalOUE",
    "loloha": "longitudinal.loloha:LOLOHA",
    "dbitflip": "longitudinal.dbitflip:DBitFlip",
}

MEAN_ORACLES: dict[str, str] = {
    "duchi": "mean:DuchiMechanism",
    "harmony": "mean:Harmony",
    "pm": "mean:PiecewiseMechanism",
    "hm": "mean:HybridMechanism",
}


def _load(table: dict[str, str], name: str, kind: str) -> type:
    if not isinstance(name, str) or name.lower() not in table:
        raise ValidationError(f"unknown {kind} {name!r}; choose one of {sorted(table)}", parameter="name")
    mod, cls = table[name.lower()].split(":")
    return getattr(importlib.import_module(f"{__package__}.{mod}"), cls)


def constructor_parameters(cls: type) -> tuple[list[inspect.Parameter], bool]:
    """``cls.__init__``'s named parameters (``self`` and ``*args``/``**kwargs`` left out), and
    whether it also takes ``**kwargs`` (then any keyword is passed on)."""
    sig = inspect.signature(cls.__init__)
    params = [p for p in list(sig.parameters.values())[1:]
              if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    return params, any(p.kind == inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def check_parameters(cls: type, given: dict[str, Any], what: str) -> None:
    """Check keyword arguments ``given`` against ``cls``'s constructor signature.

    An unknown name is a :class:`ValidationError` naming it and suggesting the closest accepted
    names (``difflib``); a required parameter absent from ``given`` is a :class:`ValidationError`
    naming it. Constructors taking ``**kwargs`` accept any name.
    """
    params, takes_any = constructor_parameters(cls)
    accepted = [p.name for p in params]
    if not takes_any:
        for key in given:
            if key not in accepted:
                close = difflib.get_close_matches(key, accepted, n=2, cutoff=0.5)
                if not close and key.lower() in ("e", "eps", "epsilon_", "epsilons"):
                    close = ["epsilon"] if "epsilon" in accepted else []
                hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
                raise ValidationError(f"{what} has no parameter {key!r}{hint} (accepted: {', '.join(accepted)})",
                                      parameter=key)
    for p in params:
        if p.default is inspect.Parameter.empty and p.name not in given:
            raise ValidationError(f"{what} needs the parameter {p.name!r} (accepted: {', '.join(accepted)})",
                                  parameter=p.name)


def frequency_oracle(name: str, epsilon: float | None = None, d: int | None = None,
                     **params: Any) -> FrequencyOracle:
    """Build the eps-LDP frequency oracle ``name`` over the domain [0, d).

    Raises :class:`ValidationError` naming the parameter for an unknown or misspelled keyword
    (``eps=`` suggests ``epsilon``), a missing ``epsilon`` or ``d``, and a ``d`` whose statistic and
    estimate cannot fit in the available memory (:func:`check_domain_fits`).
    """
    cls = _load(FREQUENCY_ORACLES, name, "frequency oracle")
    given = dict(params)
    for key, value in (("epsilon", epsilon), ("d", d)):
        if value is not None:
            given[key] = value
    check_parameters(cls, given, f"frequency oracle {name!r}")
    return cls(**given)


def device_oracles() -> list[str]:
    """Names of the frequency oracles that take ``device`` (``FrequencyOracle.accepts_device``):
    their server-side counting (and the integer steps of their estimate) can run with PyTorch."""
    return sorted(name for name in FREQUENCY_ORACLES
                  if getattr(_load(FREQUENCY_ORACLES, name, "frequency oracle"), "accepts_device", False))


def mean_oracle(name: str, epsilon: float | None = None, **params: Any) -> MeanOracle:
    """Build the eps-LDP mean oracle ``name`` for values in [-1, 1].

    Raises :class:`ValidationError` naming the parameter for an unknown or misspelled keyword
    (``eps=`` suggests ``epsilon``) or a missing ``epsilon``.
    """
    cls = _load(MEAN_ORACLES, name, "mean oracle")
    given = dict(params)
    if epsilon is not None:
        given["epsilon"] = epsilon
    check_parameters(cls, given, f"mean oracle {name!r}")
    return cls(**given)


# ------------------------------------------------------------------------------- memory plan

#: Cells of the chunked O(chunk * d) temporaries (local hashing, sketches, subset selection).
_TEMP_CELLS = 1 << 24

#: Bytes per item of the ``d``-long arrays that the aggregate and every estimate of a class need
#: (int64 statistic, the estimate's values, clipped values, variances, standard errors and a
#: float copy of the counts); Hadamard response also holds two d-long index arrays and a
#: statistic of up to 2d outputs.
_BYTES_PER_ITEM = {"HadamardResponse": 88}
_DEFAULT_BYTES_PER_ITEM = 48


def domain_bytes(cls_name: str, d: int) -> int:
    """Lower bound of the bytes a frequency oracle ``cls_name`` over ``d`` items must hold to
    aggregate and estimate (its ``d``-long arrays)."""
    return _BYTES_PER_ITEM.get(cls_name, _DEFAULT_BYTES_PER_ITEM) * int(d)


def check_domain_fits(cls_name: str, d: int) -> None:
    """Refuse a domain whose statistic and estimate cannot fit in the available memory.

    Raises :class:`ValidationError` naming ``d``, with the bytes needed, the bytes available and
    the largest ``d`` that fits.
    """
    need = domain_bytes(cls_name, d)
    avail = available_memory()
    hint = ""
    if avail is not None:
        hint = f"use d <= {max(2, avail // (need // d))}"
    check_fits(need, f"{cls_name} over d={d} items (its statistic and estimate)", parameter="d", hint=hint)


def _cost(mech: FrequencyOracle, d: int) -> tuple[float, float]:
    """``(fixed, per_user)`` bytes of randomize + aggregate + estimate for ``mech``'s settings
    over ``d`` items: ``fixed`` is held once (statistic, estimate, bounded temporaries),
    ``per_user`` is held for each user of a chunk (reports and the randomizer's temporaries)."""
    name = type(mech).__name__
    fixed = domain_bytes(name, d) + 16.0 * d  # + a chunk's statistic and the running sum
    if name == "GeneralizedRandomizedResponse":
        return fixed, 64.0
    if name in ("SymmetricUnaryEncoding", "OptimizedUnaryEncoding"):
        return fixed + 8.0 * _TEMP_CELLS, 2.0 * math.ceil(d / 8) + 64.0
    if name in ("BinaryLocalHashing", "OptimizedLocalHashing"):
        return fixed + 48.0 * max(_TEMP_CELLS // 4, 2 * d), 256.0
    if name == "HadamardResponse":
        return fixed, 80.0
    if name == "SubsetSelection":
        omega = max(1.0, mech.omega * d / mech.d)
        # reports: omega items per user (int16 or int32); chunked temporaries of the sampler and the
        # aggregate's bincount input
        return fixed + 24.0 * max(_TEMP_CELLS, d) + 16.0 * (1 << 20), omega * (2 if d <= 32768 else 4) + 64.0
    if name == "CountMeanSketch":
        return fixed + 24.0 * max(_TEMP_CELLS, d) + 16.0 * mech.k * (mech.m + 1), 3.0 * mech.n_bytes + 64.0
    if name == "HadamardCountMeanSketch":
        return fixed + 24.0 * max(_TEMP_CELLS, d) + 24.0 * mech.k * mech.m, 96.0
    if name == "Rappor":
        # the OLS decoder's design over all d candidates: X, A, A^2 of (m, k, d) floats, the d x d
        # Gram matrix, its inverse, the identity and Q, and the Bloom positions (m, d, h)
        k = max(16, 8 * -(-4 * d // (8 * mech.m))) if d != mech.d else mech.k
        design = 24.0 * mech.m * k * d + 48.0 * d * d + 16.0 * mech.m * d * mech.h
        return fixed + design, 3.0 * ((k + 7) // 8) + 64.0
    return fixed, 128.0


def run_memory_bytes(mech: FrequencyOracle, n: int, chunk: int) -> int:
    """Peak bytes (estimated) of ``randomize`` + ``aggregate`` over ``n`` users in chunks of
    ``chunk`` users, summing the statistics, then ``estimate``."""
    fixed, per_user = _cost(mech, mech.d)
    return int(fixed + per_user * min(int(n), int(chunk)))


def check_batch_fits(mech: FrequencyOracle, n: int) -> None:
    """Refuse a ``randomize`` call on ``n`` users whose reports and temporaries cannot fit.

    Only batches planned at :data:`~shuffledp.core.memory.CHECK_FLOOR` bytes or more are checked
    (small batches read nothing). The :class:`ValidationError` names ``values`` and the largest
    batch that fits.
    """
    _, per_user = _cost(mech, mech.d)
    need = per_user * n
    if need < CHECK_FLOOR:
        return
    avail = available_memory()
    if avail is None or need <= avail:
        return
    raise ValidationError(f"{type(mech).__name__}.randomize of n={n} users over d={mech.d} items needs about "
                          f"{format_bytes(need)} but {format_bytes(avail)} is available; randomize in chunks of "
                          f"<= {max(1, int(avail // per_user))} users (aggregates add up)", parameter="values")


def check_run_fits(mech: FrequencyOracle, n: int, chunk: int, *, extra_fixed: float = 0.0,
                   extra_per_item: float = 0.0, extra_per_user: float = 0.0, what: str = "the run") -> None:
    """Refuse a run of ``mech`` over ``n`` users in chunks of ``chunk`` that cannot fit in memory.

    ``extra_*`` add the caller's own arrays (``extra_per_item`` bytes per item of the domain,
    ``extra_per_user`` bytes per user of the whole batch). The one-line
    :class:`ValidationError` names ``d``, ``n`` and ``chunk``, the bytes needed and available,
    and an option that fits: a smaller chunk, a smaller ``d``, or a sketch mechanism (``cms``,
    ``hcms``) when the reports grow with ``d``.
    """
    d = mech.d

    def need_for(dd: int, c: int) -> float:
        fixed, per_user = _cost(mech, dd)
        return fixed + extra_fixed + extra_per_item * dd + extra_per_user * n + per_user * min(n, c)

    need = need_for(d, chunk)
    avail = available_memory()
    if avail is None or need <= avail or need < 64 << 20:
        return
    fixed, per_user = _cost(mech, d)
    base = fixed + extra_fixed + extra_per_item * d + extra_per_user * n
    options = []
    if base < avail:
        c_max = int((avail - base) // per_user)
        if c_max >= 1:
            options.append(f"chunk <= {c_max}")
    if need_for(2, chunk) <= avail:  # the largest d that fits with this chunk (need grows with d)
        lo, hi = 2, d
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if need_for(mid, chunk) <= avail else (lo, mid)
        options.append(f"d <= {lo}")
    if per_user * min(n, chunk) > 0.5 * need and type(mech).__name__ not in ("CountMeanSketch",
                                                                              "HadamardCountMeanSketch"):
        options.append("a sketch mechanism (cms, hcms) whose reports do not grow with d")
    if extra_per_user * n > 0.5 * need:
        options.append(f"n <= {max(1, int((avail - (need - extra_per_user * n)) // extra_per_user))}")
    hint = "use " + " or ".join(options) if options else "no setting of chunk or d fits"
    raise ValidationError(f"{what} ({type(mech).__name__}, d={d}, n={n}, chunk={chunk}) needs about "
                          f"{format_bytes(need)} but {format_bytes(avail)} is available; {hint}",
                          parameter="d" if base >= avail else "chunk")


def check_simulation_fits(name: str, epsilon: float, d: int, n: int, chunk: int, **params: Any) -> None:
    """Refuse a simulated collection (``shuffledp simulate``) that cannot fit in memory.

    Its own arrays: a Zipf dataset of ``n`` users (the d-long weights, probabilities and CDF,
    the users' items and sampling temporaries) and the true frequencies, on top of
    :func:`run_memory_bytes`. Raises one :class:`ValidationError` line naming ``d``, ``n``, the
    bytes needed and available and an option that fits. Nothing of size ``d`` or ``n`` is
    allocated before the check.
    """
    cls = _load(FREQUENCY_ORACLES, name, "frequency oracle")
    sim_per_item, sim_per_user = 48.0, 24.0
    lower = domain_bytes(cls.__name__, d) + sim_per_item * d + sim_per_user * n
    avail = available_memory()
    if avail is not None and lower > avail and lower >= 64 << 20:
        per_item = domain_bytes(cls.__name__, 1) + sim_per_item
        d_max = int((avail - sim_per_user * n) // per_item)
        n_max = int((avail - per_item * d) // sim_per_user)
        options = [f"d <= {d_max}" if d_max >= 2 else "", f"n <= {n_max}" if n_max >= 1 else ""]
        hint = " or ".join(o for o in options if o) or "a smaller d and n"
        raise ValidationError(f"simulating {name} with d={d}, n={n} needs at least {format_bytes(lower)} "
                              f"but {format_bytes(avail)} is available; use {hint}",
                              parameter="d" if per_item * d >= sim_per_user * n else "n")
    mech = frequency_oracle(name, epsilon, d, **params)
    check_run_fits(mech, n, chunk, extra_per_item=sim_per_item, extra_per_user=sim_per_user,
                   what=f"simulating {name}")
