"""Memory planning: how much memory this process may still allocate, and a one-line refusal when a
planned computation needs more.

:func:`available_memory` is the smallest of

- ``MemAvailable`` of ``/proc/meminfo`` (memory the kernel can hand out without swapping);
- the cgroup v2 limit ``/sys/fs/cgroup/memory.max`` minus ``memory.current`` (containers);
- the soft ``RLIMIT_AS`` (``ulimit -v``) minus the process's current virtual size;
- ``SHUFFLEDP_MEMORY_LIMIT`` (bytes; an optional cap set by the user, e.g. to share a machine).

Sources that do not exist on a platform are skipped; if none exists the memory is unknown and
:func:`check_fits` lets the computation run.
"""

from __future__ import annotations

import math
import os
import resource

from .errors import ValidationError

__all__ = ["available_memory", "format_bytes", "check_fits", "MEMORY_LIMIT_ENV", "CHECK_FLOOR"]

#: Environment variable capping the memory shuffledp plans with (bytes).
MEMORY_LIMIT_ENV = "SHUFFLEDP_MEMORY_LIMIT"
#: Plans below this many bytes are not checked (no file is read on small, frequent calls).
CHECK_FLOOR = 64 << 20


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_available() -> int | None:
    limit = _read_int("/sys/fs/cgroup/memory.max")  # "max" (no limit) reads as None
    if limit is None:
        return None
    used = _read_int("/sys/fs/cgroup/memory.current") or 0
    return max(0, limit - used)


def _rlimit_available() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    vm = 0
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    vm = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return max(0, soft - vm)


def _env_limit() -> int | None:
    raw = os.environ.get(MEMORY_LIMIT_ENV)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValidationError(f"{MEMORY_LIMIT_ENV} must be a number of bytes, got {raw!r}",
                              parameter=MEMORY_LIMIT_ENV) from None
    if not math.isfinite(value) or value < 0:
        raise ValidationError(f"{MEMORY_LIMIT_ENV} must be a number of bytes >= 0, got {raw!r}",
                              parameter=MEMORY_LIMIT_ENV)
    return int(value)


def available_memory() -> int | None:
    """Bytes this process can still allocate (the smallest known bound), or ``None`` if unknown."""
    bounds = [b for b in (_meminfo_available(), _cgroup_available(), _rlimit_available(), _env_limit())
              if b is not None]
    return min(bounds) if bounds else None


def format_bytes(b: float) -> str:
    """``b`` bytes in binary units with 3 significant digits (``"1.50 GiB"``)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(b) < 1024 or unit == "PiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.3g} {unit}"
        b /= 1024
    return f"{b:.3g} PiB"  # pragma: no cover


def check_fits(need: float, what: str, *, parameter: str, hint: str = "") -> None:
    """Refuse a computation that needs about ``need`` bytes when less is available.

    Raises :class:`ValidationError` (one line, naming ``parameter``) reading
    ``"<what> needs about <need> but <available> is available[; <hint>]"``. Plans under
    :data:`CHECK_FLOOR` and platforms whose available memory is unknown are not refused.
    """
    if need < CHECK_FLOOR:
        return
    avail = available_memory()
    if avail is None or need <= avail:
        return
    msg = f"{what} needs about {format_bytes(need)} but {format_bytes(avail)} is available"
    raise ValidationError(msg + (f"; {hint}" if hint else ""), parameter=parameter)
