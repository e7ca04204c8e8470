"""Aggregation throughput of archived OLH / HCMS reports per engine and worker count; archive size.

    PYTHONPATH=src python benchmarks/scale.py --n 1e7 --d 1024
    PYTHONPATH=src python benchmarks/scale.py --n 1e7 --oracle hcms --d 65536

1. Simulates ``n`` users of ``ldp_oracle`` (OLH or HCMS, d) into a Parquet archive (``--parts`` files of
   ``--row-group`` messages per row group; a row group is one engine partition) and reports the
   encoding time per engine it is asked to encode on.
2. Times, best of ``--reps``: the single-process numpy baseline (``protocol.aggregate`` on the
   whole batch already in memory: no I/O), the local engine (partition by partition from the
   archive) and each engine at each worker count (cluster/session start and one untimed warm-up
   run of the same job, in which every worker process imports shuffledp, are excluded). All runs must give the same statistic, bit for bit (checked).
3. Peak memory (``--memory``): the resident set high-water mark of a fresh process that aggregates
   the archive on the local engine, and of every Dask worker after its jobs, against the bytes
   of one partition in memory and of the whole batch: bounded by the partition, not by ``n``.
4. Archive size against the information content: an OLH report is one of ``(P-1) P`` seeds and
   one of ``g`` hash values, ``log2((P-1) P g)`` bits; an HCMS report is one of ``k`` hash
   functions, ``m`` Hadamard coefficients and a sign, ``log2(k m) + 1`` bits.

Prints Markdown tables (paste into docs/benchmarks.md) and the machine's load average.
"""

from __future__ import annotations

import argparse
import math
import warnings
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def best(fn, reps: int) -> tuple[float, object]:
    out, ts = None, []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e7)
    ap.add_argument("--d", type=int, default=1024)
    ap.add_argument("--oracle", choices=("olh", "hcms"), default="olh")
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--parts", type=int, default=4, help="archive files (encoding partitions)")
    ap.add_argument("--row-group", type=int, default=500_000)
    ap.add_argument("--engines", default="dask,spark")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--dir", default=None, help="folder for the archive (default: a temporary one)")
    ap.add_argument("--memory", action="store_true", help="measure peak memory per worker (see 3.)")
    ap.add_argument("--skip-numpy", action="store_true",
                    help="no in-memory baseline (the whole batch in memory; at 1e8 OLH reports ~1.6 GB)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")

    from shuffledp.engines import LocalEngine, get_engine
    from shuffledp.engines.archive import aggregate_partitions, read_partition, simulate_archive
    from shuffledp.shuffle.base import concat_messages

    n = int(args.n)
    engines = [e for e in args.engines.split(",") if e]
    workers = [int(w) for w in args.workers.split(",") if w]
    root = Path(args.dir or tempfile.mkdtemp(prefix="shuffledp-scale-"))
    path = root / f"{args.oracle}-{n}"
    if path.exists():
        shutil.rmtree(path)
    print(f"load average before: {os.getloadavg()}  cpus: {os.cpu_count()}")

    t0 = time.perf_counter()
    info = simulate_archive("ldp_oracle", path, epsilon=args.eps, delta=0.0, n=n,
                            params={"d": args.d, "oracle": args.oracle}, seed=1, partitions=args.parts,
                            row_group=args.row_group)
    t_encode = time.perf_counter() - t0
    proto = info.protocol
    parts = info.partitions
    m = info.messages

    # --- archive size --------------------------------------------------------------------
    import pyarrow.parquet as pq

    size = sum(os.path.getsize(f) for f in info.files)
    col_bytes: dict[str, int] = {}
    for f in info.files:
        md = pq.ParquetFile(f).metadata
        for g in range(md.num_row_groups):
            for c in range(md.num_columns):
                cc = md.row_group(g).column(c)
                col_bytes[cc.path_in_schema] = col_bytes.get(cc.path_in_schema, 0) + cc.total_compressed_size
    oracle = proto.oracle
    if args.oracle == "olh":
        col_info = {"seed": math.log2(oracle.n_seeds), "y": math.log2(oracle.g)}
    else:
        col_info = {"j": math.log2(oracle.k), "l": math.log2(oracle.m), "w": 1.0}
    info_bits = sum(col_info.values())

    # --- throughput ------------------------------------------------------------------------
    first = read_partition(parts[0])
    part_bytes = sum(np.asarray(v).nbytes for v in first.values()) * max(p.rows for p in parts) // max(1, parts[0].rows)
    del first
    memory: list[tuple[str, float]] = []
    if args.memory:   # before anything else grows this process: a fresh interpreter per measure
        memory.append(("local engine, fresh process", _local_peak_mb(info.files)))
    rows = []
    if args.skip_numpy:
        t_np, ref = None, None
    else:
        whole = concat_messages([read_partition(p) for p in parts])
        t_np, ref = best(lambda: proto.aggregate(whole), args.reps)
        del whole
        rows.append(("numpy, one process, in memory (no I/O)", 1, t_np))
    t_loc, st = best(lambda: aggregate_partitions(proto, parts, LocalEngine()), args.reps)
    if ref is None:
        ref = st
    assert st.tobytes() == ref.tobytes()
    rows.append(("local engine (reads the archive)", 1, t_loc))
    for name in engines:
        for w in workers:
            opts = {"workers": w} if name == "dask" else {"master": f"local[{w}]"}
            eng = get_engine(name, **opts)
            try:
                aggregate_partitions(proto, parts, eng)  # warm-up: every worker imports shuffledp
                t, st = best(lambda: aggregate_partitions(proto, parts, eng), args.reps)
                if args.memory and name == "dask":
                    peaks = eng.client.run(_maxrss_mb)
                    memory.append((f"dask worker ({w} workers), max over workers", max(peaks.values())))
            finally:
                eng.close()
            assert st.tobytes() == ref.tobytes(), f"{name} x{w}: statistic differs"
            rows.append((f"{name} ({'LocalCluster' if name == 'dask' else f'local[{w}]'})", w, t))

    print()
    print(f"{args.oracle.upper()} d={args.d}, eps={args.eps:g}: {m:,} archived reports in {len(info.files)} files, "
          f"{len(parts)} partitions of <= {args.row_group:,}; encode + shuffle + write {t_encode:.1f} s "
          f"({m / t_encode / 1e6:.2f} M reports/s, local engine)")
    print()
    print("| engine | workers | time (s) | M reports/s | per worker vs numpy | vs 1 worker |")
    print("|---|---:|---:|---:|---:|---:|")
    one = {}
    for label, w, t in rows:
        key = label.split(" (")[0]
        if w == 1:
            one[key] = t
        thr = m / t / 1e6
        per = (m / t / w) / (m / t_np) if t_np else float("nan")
        sp = one.get(key, float("nan")) / t
        print(f"| {label} | {w} | {t:.2f} | {thr:.2f} | {per:.2f}x | {sp:.2f}x |")
    print()
    print("| archive | bytes | bits/report | information content (bits/report) | ratio |")
    print("|---|---:|---:|---:|---:|")
    print(f"| total ({len(info.files)} files, zstd) | {size:,} | {8 * size / m:.2f} | {info_bits:.2f} | "
          f"{8 * size / m / info_bits:.3f} |")
    for c, b in col_bytes.items():
        ib = col_info[c]
        print(f"| column `{c}` | {b:,} | {8 * b / m:.2f} | {ib:.2f} | {8 * b / m / ib:.3f} |")
    print()
    if memory:
        print(f"| peak resident memory | MB | one partition in memory: {part_bytes / 2**20:.0f} MB; "
              f"whole batch: {part_bytes * len(parts) / 2**20:.0f} MB |")
        print("|---|---:|---|")
        for label, mb in memory:
            print(f"| {label} | {mb:.0f} | |")
        print()
    print(f"load average after: {os.getloadavg()}")
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


def _maxrss_mb() -> float:
    """This process's resident high-water mark (``VmHWM``, MB). Not ``ru_maxrss``: Linux keeps that
    across ``exec``, so a worker spawned by a big parent would report the parent's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024   # kB
    raise RuntimeError("no VmHWM in /proc/self/status")


def _local_peak_mb(files: list[str]) -> float:
    """Peak RSS of a fresh interpreter that aggregates the archive on the local engine."""
    import json
    import subprocess
    import sys

    code = ("import json, sys; from shuffledp.engines import LocalEngine; "
            "from shuffledp.engines.archive import aggregate_archives; "
            "aggregate_archives(json.loads(sys.argv[1]), LocalEngine()); "
            "print([int(l.split()[1]) / 1024 for l in open('/proc/self/status') if l.startswith('VmHWM:')][0])")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(files)], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
