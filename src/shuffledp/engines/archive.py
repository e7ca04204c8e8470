"""The columnar report archive (Parquet) and engine-independent estimation from archives.

An archive is a folder of Parquet files ``part-00000.parquet ... part-<k-1>.parquet``, one per
partition of a shuffled batch of messages. Every file carries in its key-value metadata (key
``shuffledp.archive``, JSON) the protocol's registry name, its central target
``(epsilon, delta)``, the ``n`` it is calibrated for, its parameters, its message schema
(:meth:`~shuffledp.shuffle.base.Protocol.message_schema`), the task id, the number of users of the
batch and the file's part index, so an archive is self-describing: the analyzer rebuilds the
protocol with :func:`shuffledp.shuffle.protocol` and refuses any file that does not fit it.

Columns: one per message column (plus ``"shuffler"`` for multi-shuffler protocols, whose
aggregate needs it). A scalar column is a Parquet column of its integer/float type (dictionary
and run-length encoding bit-pack small ranges: a 0/1 column costs about one bit per message;
wide integer ranges are delta-encoded and bit-packed at their range's width, floats stored as
byte streams that zstd codes one byte position at a time); a
column with a row shape is a fixed-size binary column of the row's little-endian bytes, packed
with :func:`numpy.packbits` (encoding ``"packbits"``) when the rows are bit vectors (0/1 values in
one byte each), so an archive is near its information content.

Every data page carries a CRC checksum, verified when it is read: a corrupt page is an error
naming the file, never a silently different statistic.

Estimation (:func:`aggregate_archives`) runs ``protocol.aggregate`` per Parquet row group on an
:class:`~shuffledp.engines.base.Engine`, merges the partition statistics by addition in the fixed
order (part, row group) on the driver and calls ``protocol.estimate`` once.

Simulation (:func:`simulate_archive`) encodes a synthetic batch partition by partition: partition
``j`` of ``k`` draws its users' values and messages from ``SeedSequence(seed).spawn(2k + 1)[j]``,
the shufflers' fake messages come from child ``k``; every message is sent to a uniformly random
destination partition and destination ``j`` permutes what it receives with child ``k + 1 + j``
(uniform assignment to buckets followed by a uniform permutation within each bucket is a uniform
permutation of the whole batch). The archive is therefore a function of (protocol, seed, k, n)
alone, whatever the engine.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..shuffle.base import Messages, Protocol, concat_messages, n_messages, take_messages
from .base import Engine, check_engine_protocol, merge_statistics

__all__ = ["ArchiveError", "ArchiveInfo", "Partition", "FORMAT", "METADATA_KEY", "build_protocol",
           "open_archives", "read_partition", "aggregate_archives", "aggregate_partitions", "aggregate_keyed",
           "simulate_archive", "write_part", "export_release_part", "set_aggregation_device", "aggregate_each", "estimate_opened", "open_releases", "synthetic_values", "information_bits"]

METADATA_KEY = b"shuffledp.archive"
FORMAT = 1


class ArchiveError(ValidationError):
    """An archive file that cannot be used: unreadable, of another task, or not fitting its schema."""

    def __init__(self, path: Any, message: str) -> None:
        super().__init__(f"{path}: {message}", parameter="path")
        self.path = str(path)


# --- the protocol an archive was written with ------------------------------------------------

def build_protocol(spec: dict[str, Any]) -> Protocol:
    """``protocol(name, epsilon=, delta=, n=, **params)`` from an archive's metadata."""
    from ..shuffle import protocol

    return protocol(spec["protocol"], epsilon=spec["epsilon"], delta=spec["delta"], n=spec["n"],
                    **spec.get("params", {}))


def _pin_public_randomness(name: str, proto: Protocol, params: dict[str, Any]) -> dict[str, Any]:
    """Parameters with the public randomness drawn at construction written out, so the analyzer
    rebuilds the same protocol (pucm's ``public_seed``, a sketch oracle's or a heavy-hitter protocol's
    ``hash_seed``)."""
    params = dict(params)
    for seed in ("public_seed", "hash_seed"):  # pucm; the heavy-hitter protocols
        if getattr(proto, seed, None) is not None and params.get(seed) is None and seed in _accepted(name):
            params[seed] = int(getattr(proto, seed))
    oracle = getattr(proto, "oracle", None)
    if name == "ldp_oracle" and hasattr(oracle, "hash_seed"):
        op = dict(params.get("oracle_params") or {})
        if op.get("hash_seed") is None:
            op["hash_seed"] = int(oracle.hash_seed)
            params["oracle_params"] = op
    return params


def _accepted(name: str) -> tuple[str, ...]:
    from ..shuffle.registry import protocol_parameters

    return protocol_parameters(name) or ()


def _protocol_meta(proto: Protocol, params: dict[str, Any]) -> dict[str, Any]:
    """The archive metadata that the protocol fixes: format, registry name, target, calibration n,
    parameters, message schema, whether the ``shuffler`` column is present, bits per message."""
    return {"format": FORMAT, "protocol": proto.name, "epsilon": float(proto.epsilon), "delta": float(proto.delta),
            "n": int(proto.n), "params": params, "schema": _schema_list(proto), "shuffler": proto.n_shufflers > 1,
            "bits_per_message": float(proto.bits_per_message)}


def _schema_list(proto: Protocol) -> list[list[Any]]:
    return [[c, dt, list(shape)] for c, dt, shape in proto.message_schema()]


# --- column encodings ------------------------------------------------------------------------

def _encode_column(values: np.ndarray, dtype: str, shape: tuple[int, ...]) -> tuple[Any, str]:
    """(Arrow array, encoding) of one message column."""
    import pyarrow as pa

    a = np.ascontiguousarray(np.asarray(values).astype(np.dtype(dtype), copy=False))
    m = a.shape[0]
    if not shape:
        return pa.array(a), "plain"
    rows = a.reshape(m, -1)
    if a.dtype.itemsize == 1 and a.dtype.kind in "biu" and rows.size and int(rows.min()) >= 0 and int(rows.max()) <= 1:
        packed = np.packbits(rows.astype(np.uint8), axis=1)
        enc = "packbits"
    else:
        packed = rows.view(np.uint8).reshape(m, -1) if rows.size else np.zeros((m, rows.shape[1] * a.dtype.itemsize), np.uint8)
        enc = "bytes"
    width = packed.shape[1]
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), m, [None, pa.py_buffer(packed.tobytes())]), enc


def _decode_column(col: Any, dtype: str, shape: tuple[int, ...], encoding: str) -> np.ndarray:
    """numpy column (rows x shape, dtype) of an Arrow chunked column."""
    import pyarrow as pa

    dt = np.dtype(dtype)
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    m = len(arr)
    if arr.null_count:
        raise ValueError("column has missing values")
    if encoding == "plain":
        if shape:
            raise ValueError("a plain column cannot hold rows of shape " + str(shape))
        out = arr.to_numpy(zero_copy_only=False)
        if out.dtype != dt:
            raise ValueError(f"column type {out.dtype} is not {dt}")
        return out
    if not pa.types.is_fixed_size_binary(arr.type):
        raise ValueError(f"column type {arr.type} is not fixed-size binary")
    size = int(np.prod(shape))
    width = arr.type.byte_width
    if m == 0:
        return np.zeros((0, *shape), dtype=dt)
    buf = np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=m * width, offset=arr.offset * width)
    rows = buf.reshape(m, width)
    if encoding == "packbits":
        if width != (size + 7) // 8:
            raise ValueError(f"packed width {width} does not hold {size} bits")
        return np.unpackbits(rows, axis=1, count=size).astype(dt).reshape((m, *shape))
    if encoding == "bytes":
        if width != size * dt.itemsize:
            raise ValueError(f"row width {width} bytes is not {size} x {dt}")
        return rows.copy().view(dt).reshape((m, *shape))
    raise ValueError(f"unknown column encoding {encoding!r}")


# --- writing -----------------------------------------------------------------------------------

def write_part(path: str | Path, messages: Messages, meta: dict[str, Any], row_group: int = 1 << 20) -> int:
    """Write one part file (messages laid out by ``meta["schema"]``); returns its size in bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = [(c, dt, tuple(s)) for c, dt, s in meta["schema"]]
    m = n_messages(messages) if messages else 0
    arrays, names, encodings = [], [], {}
    for c, dt, shape in schema:
        col = messages[c] if messages else np.zeros((0, *shape), dtype=np.dtype(dt))
        arr, enc = _encode_column(col, dt, shape)
        arrays.append(arr)
        names.append(c)
        encodings[c] = enc
    if meta.get("shuffler"):
        arrays.append(pa.array(np.asarray(messages["shuffler"] if messages else np.zeros(0), dtype=np.int16)))
        names.append("shuffler")
        encodings["shuffler"] = "plain"
    meta = {**meta, "columns": encodings, "messages": int(m)}
    table = pa.Table.from_arrays(arrays, names=names)
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})
    # Parquet-level encodings (self-described in the file; the reader needs nothing from them): a
    # scalar column of few values is dictionary + RLE/bit-packed (a 0/1 column: 1 bit a message);
    # a wide-ranged integer one (a hash seed) is DELTA_BINARY_PACKED: bit-packed at the width of its
    # range per miniblock (an OLH seed of log2((P-1)P) = 20.02 bits costs 21.3 bits; split into byte
    # streams and zstd-coded it cost 22.4); a float column is split into byte streams for zstd
    dictionary, split = [], {}
    for name, arr in zip(names, arrays):
        if encodings[name] != "plain":
            continue
        a = arr.to_numpy(zero_copy_only=False)
        if a.dtype.kind in "iub" and (a.size == 0 or int(a.max()) - int(a.min()) < (1 << 16)):
            dictionary.append(name)
        elif a.dtype.kind in "iu" and a.dtype.itemsize >= 4:
            split[name] = "DELTA_BINARY_PACKED"
        elif a.dtype.itemsize >= 4:
            split[name] = "BYTE_STREAM_SPLIT"
    pq.write_table(table, str(path), row_group_size=max(1, int(row_group)), compression="zstd",
                   use_dictionary=dictionary, column_encoding=split or None, write_statistics=False,
                   write_page_checksum=True)
    return os.path.getsize(path)


# --- reading -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Partition:
    """One row group of one part file: the unit of work of an engine."""

    path: str
    row_group: int
    rows: int
    columns: tuple[tuple[str, str, tuple[int, ...], str], ...]  # (name, dtype, shape, encoding)


@dataclass
class ArchiveInfo:
    """An opened, checked archive: its protocol, users and partitions in the fixed order."""

    protocol: Protocol
    meta: dict[str, Any]
    users: int
    files: list[str]
    partitions: list[Partition]

    @property
    def messages(self) -> int:
        return sum(p.rows for p in self.partitions)


_IDENTITY = ("protocol", "epsilon", "delta", "n", "params", "schema", "task", "users", "parts", "shuffler")


def _expand(paths: Sequence[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.suffix == ".parquet" and not f.name.startswith("."))
            if not files:
                raise ArchiveError(p, "folder holds no .parquet archive files")
            out.extend(files)
        elif p.exists():
            out.append(p)
        else:
            raise ArchiveError(p, "no such file or folder")
    if not out:
        raise ValidationError("no archive paths given", parameter="path")
    return out


def _read_meta(path: Path) -> tuple[Any, dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(str(path), page_checksum_verification=True)
    except Exception as e:  # pyarrow raises ArrowInvalid/OSError with varied messages
        raise ArchiveError(path, f"not a readable Parquet file ({' '.join(str(e).split())})") from None
    raw = (pf.schema_arrow.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ArchiveError(path, "not a shuffledp archive (no shuffledp.archive metadata)")
    try:
        meta = json.loads(raw)
    except ValueError:
        raise ArchiveError(path, "corrupt shuffledp.archive metadata (not JSON)") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ArchiveError(path, f"unsupported archive format {meta.get('format') if isinstance(meta, dict) else meta!r} "
                                 f"(this version reads format {FORMAT})")
    missing = [k for k in (*_IDENTITY, "part", "columns", "messages") if k not in meta]
    if missing:
        raise ArchiveError(path, f"archive metadata lacks {missing}")
    return pf, meta


def open_archives(paths: Sequence[str | Path]) -> ArchiveInfo:
    """Check every file (metadata only) and list the partitions; raise :class:`ArchiveError` naming
    the first file that is unreadable, of another protocol or task, or does not fit the schema."""
    import pyarrow as pa

    files = _expand(paths)
    first: dict[str, Any] | None = None
    proto: Protocol | None = None
    seen: dict[int, Path] = {}
    part_users: dict[int, int] = {}
    parts: list[tuple[int, Partition]] = []
    for path in files:
        pf, meta = _read_meta(path)
        if first is None:
            first = meta
            try:
                proto = build_protocol(meta)
                check_engine_protocol(proto)
            except ValidationError as e:
                raise ArchiveError(path, f"cannot rebuild protocol {meta['protocol']!r}: {e}") from None
            want = _schema_list(proto)
            if meta["schema"] != want:
                raise ArchiveError(path, f"message schema {meta['schema']} does not match protocol "
                                         f"{meta['protocol']!r}'s {want}")
            if bool(meta["shuffler"]) != (proto.n_shufflers > 1):
                raise ArchiveError(path, "the 'shuffler' routing column does not fit the protocol's "
                                         f"{proto.n_shufflers} shuffler(s)")
        else:
            for k in _IDENTITY:
                if meta[k] != first[k]:
                    raise ArchiveError(path, f"belongs to another archive: {k} is {meta[k]!r}, not {first[k]!r} "
                                             f"as in {files[0]}")
        assert proto is not None
        j = meta["part"]
        if not isinstance(j, int) or not 0 <= j < int(meta["parts"]):
            raise ArchiveError(path, f"part index {j!r} outside [0, {meta['parts']})")
        if j in seen:
            raise ArchiveError(path, f"duplicate part {j} (also {seen[j]})")
        seen[j] = path
        if meta["users"] is None:   # an exported release: each part states its own shuffler's users
            u = meta.get("part_users")
            if not isinstance(u, int) or u < 0:
                raise ArchiveError(path, "archive metadata has users=null but no part_users count")
            part_users[j] = u
        # the file's columns must be the schema's, with the encodings the metadata states
        cols = [(c, dt, tuple(s)) for c, dt, s in meta["schema"]] + ([("shuffler", "<i2", ())] if meta["shuffler"] else [])
        enc = meta["columns"]
        arrow = pf.schema_arrow
        if list(arrow.names) != [c for c, _, _ in cols] or set(enc) != {c for c, _, _ in cols}:
            raise ArchiveError(path, f"columns {list(arrow.names)} do not match the message schema "
                                     f"{[c for c, _, _ in cols]}")
        for c, dt, shape in cols:
            t = arrow.field(c).type
            e = enc[c]
            if e == "plain":
                ok = not shape and t == pa.from_numpy_dtype(np.dtype(dt))
            elif e in ("packbits", "bytes"):
                size = int(np.prod(shape)) if shape else 0
                width = (size + 7) // 8 if e == "packbits" else size * np.dtype(dt).itemsize
                ok = bool(shape) and pa.types.is_fixed_size_binary(t) and t.byte_width == width
            else:
                ok = False
            if not ok:
                raise ArchiveError(path, f"column {c!r} ({t}, encoding {e!r}) does not fit the schema ({dt}, {shape})")
        md = pf.metadata
        if md.num_rows != meta["messages"]:
            raise ArchiveError(path, f"holds {md.num_rows} messages, its metadata says {meta['messages']}")
        spec = tuple((c, dt, shape, enc[c]) for c, dt, shape in cols)
        for g in range(md.num_row_groups):
            parts.append((j, Partition(str(path), g, md.row_group(g).num_rows, spec)))
    assert first is not None and proto is not None
    missing = sorted(set(range(int(first["parts"]))) - set(seen))
    if missing:
        raise ArchiveError(files[0], f"archive is incomplete: parts {missing[:10]} of {first['parts']} "
                                     f"(task {first['task']}) are missing")
    parts.sort(key=lambda t: (t[0], t[1].row_group))
    users = (int(first["users"]) if first["users"] is not None
             else proto.count_users([part_users[j] for j in range(int(first["parts"]))]))
    return ArchiveInfo(proto, first, users, [str(f) for f in files], [p for _, p in parts])


def read_partition(part: Partition) -> Messages:
    """The messages of one partition, columns as the protocol emits them."""
    import pyarrow.parquet as pq

    # one thread per partition: the engine runs partitions in parallel, one task per worker slot
    table = pq.ParquetFile(part.path, page_checksum_verification=True).read_row_group(part.row_group,
                                                                                      use_threads=False)
    if table.num_rows != part.rows:
        raise ValueError(f"row group has {table.num_rows} rows, expected {part.rows}")
    out: Messages = {}
    for c, dt, shape, enc in part.columns:
        a = _decode_column(table.column(c), dt, shape, enc)
        out[c] = a.astype(np.int64) if c == "shuffler" else a
    return out


def _aggregate_partition(protocol: Protocol, part: Partition) -> tuple[str, Any]:
    """``("ok", statistic)`` or ``("error", message)`` (errors travel as values, so every engine
    reports the same one line naming the file instead of its own retry and stack trace)."""
    try:
        msgs = read_partition(part)
        if n_messages(msgs) == 0:
            return "ok", None
        return "ok", np.asarray(protocol.aggregate(msgs))
    except Exception as e:  # noqa: BLE001 - reported with the file name on the driver
        return "error", f"{part.path}: row group {part.row_group}: {type(e).__name__}: {' '.join(str(e).split())}"


def aggregate_partitions(protocol: Protocol, partitions: Sequence[Partition], engine: Engine) -> np.ndarray:
    """The merged statistic of ``partitions`` (fixed order), each aggregated on ``engine``."""
    check_engine_protocol(protocol)
    results = engine.map(functools.partial(_aggregate_partition, protocol), list(partitions))
    stats = []
    for status, value in results:
        if status == "error":
            raise ArchiveError(value.split(": row group", 1)[0], value.split(": ", 1)[1])
        if value is not None:
            stats.append(value)
    if not stats:
        return np.asarray(protocol.aggregate({}))
    return merge_statistics(protocol, stats)


def _aggregate_keyed_item(item: tuple[Any, Protocol, Partition]) -> tuple[str, Any]:
    _, proto, part = item
    return _aggregate_partition(proto, part)


def aggregate_keyed(jobs: Mapping[Any, tuple[Protocol, Sequence[Partition]]], engine: Engine) -> dict[Any, np.ndarray]:
    """Per-key statistics (tasks, windows, crowds) in one engine job: ``{key: (protocol, partitions)}``
    -> ``{key: merged statistic}``.

    Every partition of every key is one task; each key's statistics are merged in the order of its
    partitions, so every key's statistic equals :func:`aggregate_partitions` of that key alone.
    """
    items = []
    for key, (proto, parts) in jobs.items():
        check_engine_protocol(proto)
        items.extend((key, proto, p) for p in parts)
    results = engine.map(_aggregate_keyed_item, items)
    per: dict[Any, list[np.ndarray]] = {key: [] for key in jobs}
    for (key, _, _), (status, value) in zip(items, results):
        if status == "error":
            raise ArchiveError(value.split(": row group", 1)[0], value.split(": ", 1)[1])
        if value is not None:
            per[key].append(value)
    return {key: merge_statistics(jobs[key][0], st) if st else np.asarray(jobs[key][0].aggregate({}))
            for key, st in per.items()}


def estimate_opened(infos: Sequence[ArchiveInfo], engine: Engine | None = None) -> list[tuple[ArchiveInfo, np.ndarray, Estimate]]:
    """Opened archives (:func:`open_archives`), each aggregated and estimated on its own, all in one
    engine job (:func:`aggregate_keyed`): ``[(info, statistic, estimate)]`` in the given order. A
    release is checked as in ``pipeline.run`` (the users it was calibrated for, its target)."""
    from ..pipeline import _check_batch_size, _check_release
    from .local import LocalEngine

    stats = aggregate_keyed({j: (info.protocol, info.partitions) for j, info in enumerate(infos)},
                            engine or LocalEngine())
    out = []
    for j, info in enumerate(infos):
        _check_batch_size(info.protocol, info.users)
        out.append((info, stats[j], _check_release(info.protocol, info.protocol.estimate(stats[j], info.users))))
    return out


def aggregate_each(archives: Sequence[str | Path], engine: Engine | None = None, *, device: str | None = None,
                   device_fallback: bool = False) -> list[tuple[ArchiveInfo, np.ndarray, Estimate]]:
    """Several archives (e.g. the releases an analyzer exported), each estimated on its own, in one
    engine job: ``[(info, statistic, estimate)]`` in the given order.

    Each entry of ``archives`` is one archive (a folder, or one part file); every one is opened and
    checked before the engine starts, and each equals :func:`aggregate_archives` of it alone.
    """
    if not archives:
        raise ValidationError("no archive paths given", parameter="path")
    return estimate_opened(open_releases([[a] for a in archives], device, device_fallback), engine)


def open_releases(groups: Sequence[Sequence[str | Path]], device: str | None = None,
                  device_fallback: bool = False) -> list[ArchiveInfo]:
    """Open and check each group of paths as one archive (:func:`open_archives`), counting on
    ``device`` where given (:func:`set_aggregation_device`): everything that can be refused is
    refused here, before an engine starts."""
    infos = [open_archives(g) for g in groups]
    if device is not None:
        for info in infos:
            set_aggregation_device(info.protocol, device, device_fallback)
    return infos


def set_aggregation_device(protocol: Protocol, device: str, fallback: bool = False) -> str:
    """Aggregate an ``ldp_oracle`` archive's reports on ``device`` (``'cpu'``, ``'torch-cpu'``, ``'cuda[:N]'``).

    Applies to the oracles that take ``device`` (:func:`~shuffledp.local.registry.device_oracles`:
    OLH, BLH, HR, SS, CMS, HCMS); every device gives the same integers and estimates. The device
    is checked where this runs (the driver): a missing GPU is a ValidationError naming ``device``
    unless ``fallback``, which counts on the CPU. Engines ship the protocol, device included, to
    their workers.
    """
    from ..local._device import resolve_device
    from ..local.registry import device_oracles

    oracle = getattr(protocol, "oracle", None)
    if oracle is None or not getattr(oracle, "accepts_device", False):
        raise ValidationError(f"device applies to ldp_oracle archives of {', '.join(device_oracles())}, "
                              f"not {protocol.name!r}" + (f" over {type(oracle).__name__}" if oracle is not None else ""),
                              parameter="device")
    oracle.device = resolve_device(device, fallback)
    return oracle.device


def aggregate_archives(paths: Sequence[str | Path], engine: Engine | None = None, *, device: str | None = None,
                       device_fallback: bool = False) -> tuple[ArchiveInfo, np.ndarray, Estimate]:
    """Open and check the archive files (all of one archive), aggregate them on ``engine`` (default:
    in process) and estimate once: ``(info, statistic, estimate)``. ``device`` (the oracles of
    :func:`set_aggregation_device`) picks where each partition is counted and the estimate's integer
    steps run."""
    return estimate_opened(open_releases([paths], device, device_fallback), engine)[0]


# --- simulation ----------------------------------------------------------------------------------

def synthetic_values(protocol: Protocol, m: int, rng: np.random.Generator, zipf: float = 1.1) -> Any:
    """``m`` users' inputs of the protocol's input kind: Zipf(``zipf``) items over ``[0, d)``
    (categorical; one independent Zipf item per attribute for multi-valued inputs), Bernoulli(0.3)
    bits, Beta(2, 5) values in [0, 1]."""
    kind = protocol.input_kind
    if kind == "bit":
        return (rng.random(m) < 0.3).astype(np.int64)
    if kind == "unit_interval":
        return rng.beta(2.0, 5.0, size=m)
    if kind == "multi_categorical":
        dims = tuple(int(x) for x in getattr(protocol, "dims"))
        return np.stack([_zipf_items(dd, m, rng, zipf) for dd in dims], axis=1)
    if kind == "categorical":
        return _zipf_items(int(getattr(protocol, "d")), m, rng, zipf)
    raise ValidationError(f"no synthetic data for input kind {kind!r}", parameter="protocol")


def _zipf_items(d: int, m: int, rng: np.random.Generator, zipf: float) -> np.ndarray:
    w = 1.0 / np.arange(1, d + 1) ** zipf
    return rng.choice(d, size=m, p=w / w.sum()).astype(np.int64)


def _task_id(spec: dict[str, Any], seed: int | None, k: int) -> str:
    if seed is None:
        return os.urandom(8).hex()
    blob = json.dumps({**spec, "seed": seed, "parts": k}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _bounds(n: int, k: int) -> np.ndarray:
    return np.linspace(0, n, k + 1).round().astype(np.int64)


def _encode_source(protocol: Protocol, n: int, k: int, tmp: str, seed_seq: Any, zipf: float, src: int) -> int:
    """Source ``src`` < k: encode users [lo, hi); src == k: the shufflers' fake messages. Sends each
    message to a uniform destination partition (bucket files in ``tmp``); returns messages sent."""
    rng = np.random.default_rng(seed_seq)
    if src < k:
        lo, hi = _bounds(n, k)[src:src + 2]
        msgs = protocol.encode(synthetic_values(protocol, int(hi - lo), rng, zipf), rng) if hi > lo else {}
    else:
        fakes = []
        for j in range(protocol.n_shufflers):
            f = protocol.shuffler_messages(j, rng)
            if f and protocol.n_shufflers > 1 and "shuffler" not in f:
                f = {**f, "shuffler": np.full(n_messages(f), j, dtype=np.int64)}
            fakes.append(f)
        msgs = concat_messages(fakes)
    if protocol.n_shufflers == 1:
        msgs = {c: v for c, v in msgs.items() if c != "shuffler"}
    m = n_messages(msgs)
    dest = rng.integers(0, k, size=m)
    order = np.argsort(dest, kind="stable")
    cuts = np.searchsorted(dest[order], np.arange(k + 1))
    for j in range(k):
        idx = order[cuts[j]:cuts[j + 1]]
        np.savez(os.path.join(tmp, f"b-{src:05d}-{j:05d}.npz"), **take_messages(msgs, idx) if msgs else {})
    return int(m)


def _write_destination(protocol: Protocol, k: int, tmp: str, seed_seq: Any, meta: dict[str, Any],
                       row_group: int, dst: int) -> tuple[int, int]:
    """Destination ``dst``: gather its buckets (source order), permute uniformly (grouped by shuffler
    for multi-shuffler protocols), write ``part-<dst>.parquet``; returns (messages, bytes)."""
    parts = []
    for src in range(k + 1):
        with np.load(os.path.join(tmp, f"b-{src:05d}-{dst:05d}.npz")) as z:
            parts.append({c: z[c] for c in sorted(z.files)})  # one column order for every source
    msgs = concat_messages(parts)
    rng = np.random.default_rng(seed_seq)
    m = n_messages(msgs)
    if m:
        perm = rng.permutation(m)
        if "shuffler" in msgs:
            perm = perm[np.argsort(msgs["shuffler"][perm], kind="stable")]
        msgs = take_messages(msgs, perm)
    size = write_part(os.path.join(tmp, f"part-{dst:05d}.parquet"), msgs, {**meta, "part": dst}, row_group)
    return m, size


def simulate_archive(name: str, out: str | Path, *, epsilon: float, delta: float, n: int,
                     params: dict[str, Any] | None = None, seed: int | None = None, partitions: int = 1,
                     engine: Engine | None = None, row_group: int = 1 << 20, zipf: float = 1.1) -> ArchiveInfo:
    """Encode ``n`` synthetic users with protocol ``name``, shuffle, and write the archive folder ``out``.

    Reproducible: the same (protocol, ``seed``, ``partitions``, ``n``) gives the same messages in
    the same files whatever the engine. ``out`` must not exist; the archive is written in a
    temporary sibling folder and renamed into place at the end, so nothing is left half-written.
    """
    from ..core.validation import check_positive_int
    from ..shuffle import protocol as build
    from .local import LocalEngine

    k = check_positive_int(partitions, "partitions")
    n = check_positive_int(n, "n")
    row_group = check_positive_int(row_group, "row_group")
    if seed is not None:
        seed = check_positive_int(seed, "seed", minimum=0)
    params = dict(params or {})
    proto = build(name, epsilon=epsilon, delta=delta, n=n, **params)
    check_engine_protocol(proto)
    params = _pin_public_randomness(proto.name, proto, params)
    if n < proto.n:
        raise ValidationError(f"n={n} is below the protocol's calibration n={proto.n}", parameter="n")
    out = Path(out)
    if out.exists():
        raise ValidationError(f"--out {str(out)!r} exists; an archive is written to a new folder", parameter="out")
    meta = _protocol_meta(proto, params)
    spec = {key: meta[key] for key in ("protocol", "epsilon", "delta", "n", "params")}   # what names the task
    meta.update(task=_task_id(spec, seed, k), users=n, parts=k, seed=seed)
    children = np.random.SeedSequence(seed).spawn(2 * k + 1)
    eng = engine or LocalEngine()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent)
    try:
        eng.map(functools.partial(_encode_source_item, proto, n, k, tmp, zipf),
                [(src, children[src]) for src in range(k + 1)])
        eng.map(functools.partial(_write_destination_item, proto, k, tmp, meta, row_group),
                [(dst, children[k + 1 + dst]) for dst in range(k)])
        for f in Path(tmp).glob("b-*.npz"):
            f.unlink()
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return open_archives([out])


def _encode_source_item(protocol: Protocol, n: int, k: int, tmp: str, zipf: float, item: tuple[int, Any]) -> int:
    src, ss = item
    return _encode_source(protocol, n, k, tmp, ss, zipf, src)


def _write_destination_item(protocol: Protocol, k: int, tmp: str, meta: dict[str, Any], row_group: int,
                            item: tuple[int, Any]) -> tuple[int, int]:
    dst, ss = item
    return _write_destination(protocol, k, tmp, ss, meta, row_group, dst)


def export_release_part(out: str | Path, *, spec: Mapping[str, Any], task: str, messages: Messages, users: int,
                        part: int = 0, parts: int = 1) -> Path:
    """Write one shuffled batch that a deployment accepted as part ``part`` of the archive folder ``out``.

    ``spec`` is the task's protocol (``{"name", "epsilon", "delta", "n", "params"}``, public
    randomness already pinned); ``messages`` the batch's valid messages in the order they were
    received (the shuffler's permutation), with the ``"shuffler"`` column for a multi-shuffler
    protocol; ``users`` the users the forwarding shuffler counted. A single-shuffler release is a
    one-part archive (``users`` in the metadata); a multi-shuffler release has one part per
    shuffler, each stating its own ``part_users`` and ``users = null``, and :func:`open_archives`
    counts the release's users with ``protocol.count_users`` once every part is there. The file is
    written under a temporary name and renamed, so a part is either whole or absent, and writing
    the same batch again replaces it with the same content.
    """
    from ..shuffle import protocol as build

    proto = build(spec["name"], epsilon=spec["epsilon"], delta=spec["delta"], n=spec["n"], **spec.get("params", {}))
    meta = {**_protocol_meta(proto, dict(spec.get("params", {}))), "task": task,
            "users": int(users) if parts == 1 else None, "part_users": int(users), "parts": int(parts),
            "part": int(part), "seed": None}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    final = out / f"part-{int(part):05d}.parquet"
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", dir=out)
    os.close(fd)
    try:
        write_part(tmp, messages, meta)
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return final


def information_bits(info: ArchiveInfo) -> float:
    """The reports' information content: ``bits_per_message`` x messages."""
    return float(info.protocol.bits_per_message) * info.messages

