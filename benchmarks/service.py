"""Service throughput on loopback (benchmark, not a test).

- shuffler: sustained *durable* ingest rate (SQLite WAL, synchronous=FULL; each 200 is sent after
  the commit) with concurrent uploaders posting pre-sealed reports in HTTP batches;
- analyzer: open (HPKE) + decode + validate + replay check + aggregate + commit rate of one
  batch, in process, pinned to one core (``--repeat`` fresh analyzers and batches; best and
  median); plus the HPKE open rate alone, per envelope (``open_report``) and batched as ingest
  does it (``open_reports``), and the bare X25519 exchange that bounds both.

Usage: PYTHONPATH=src python benchmarks/service.py [--n 20000] [--threads 4] [--batch 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table

from shuffledp.service.analyzer import AnalyzerState, ingest_batch
from shuffledp.service.client import encode_reports, fetch_task, seal_many, upload
from shuffledp.service.harness import Deployment
from shuffledp.service.wire import Batch, batch_id, encode_batch, open_report, open_reports


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="fresh analyzer + batch per repetition")
    a = ap.parse_args()
    con = Console()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Deployment(Path(tmp), tick_seconds=3600) as dep:
        created = dep.create_task({"name": "bench", "mechanism": {"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                                  "params": {"d": a.d}},
                                   "target_central": {"eps": 1.0, "delta": 1e-8}})
        tid = bytes.fromhex(created["task_id"])
        http = httpx.Client(timeout=120)
        cfg, key = fetch_task(http, dep.analyzer.url, tid)
        x = np.random.default_rng(0).integers(0, a.d, a.n)
        t0 = time.perf_counter()
        pts = encode_reports(cfg, x, time.time())
        envs = seal_many(cfg, key, pts, b"")
        seal_s = time.perf_counter() - t0
        rows.append(("client encode + HPKE seal (1 thread)", a.n, seal_s))
        chunks = [envs[s:s + a.batch] for s in range(0, a.n, a.batch)]
        lock = threading.Lock()

        def worker(my: list) -> None:
            c = httpx.Client(timeout=120)
            for ch in my:
                r = upload(c, dep.shuffler.url, tid, [(b"", e) for e in ch])
                assert r["accepted"] == len(ch)
            c.close()
        _ = lock
        t0 = time.perf_counter()
        ths = [threading.Thread(target=worker, args=(chunks[i::a.threads],)) for i in range(a.threads)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        rows.append((f"shuffler durable ingest ({a.threads} uploaders x {a.batch}/request)", a.n,
                     time.perf_counter() - t0))
        t0 = time.perf_counter()
        dep.tick(close_current=True)
        rows.append(("shuffle + forward + analyzer ingest (HTTP, one batch)", a.n, time.perf_counter() - t0))
        http.close()
        # analyzer in process, pinned to one core: open + validate + aggregate + commit
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

        from shuffledp.service.wire import KeyConfig, seal_report
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
        reps: dict[str, list[float]] = {}
        # one running analyzer (warm engine, as in service), a fresh task and batch per repetition
        an = AnalyzerState(f"sqlite:///{Path(tmp) / 'bench_an.db'}", admin_token="a", collector_token="c",
                           peer_secret=b"p", retention_every=0)
        from shuffledp.service.config import TaskConfig
        base = cfg.to_json()
        for r in range(a.repeat):
            cfg = TaskConfig.from_json({**base, "task_id": os.urandom(32).hex()})
            an.add_task(cfg)
            k2 = an.public_configs[0]
            envs2 = [seal_report(KeyConfig(k2.key_id, k2.public_key), cfg.task_id, cfg.digest, b"", p.tobytes())
                     for p in pts]
            sk = an.private_keys[k2.key_id][0]
            t0 = time.perf_counter()
            for e in envs2:
                sk.exchange(X25519PublicKey.from_public_bytes(e[7:39]))
            reps.setdefault("bare X25519 exchange per report (bound, 1 core)", []).append(time.perf_counter() - t0)
            dig = cfg.digest   # (the loop used to recompute it per report: canonical JSON + SHA-256)
            t0 = time.perf_counter()
            for e in envs2:
                open_report(e, an.private_keys, cfg.task_id, dig, b"")
            reps.setdefault("analyzer HPKE open only, per envelope (1 core)", []).append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            opened, _, _ = open_reports(envs2, an.private_keys, cfg.task_id, cfg.digest, b"")
            reps.setdefault("analyzer HPKE open only, batched (1 core)", []).append(time.perf_counter() - t0)
            assert all(o is not None for o in opened)
            window = int(time.time()) // cfg.batch_window
            body = encode_batch(Batch(cfg.task_id, b"", window, envs2))
            t0 = time.perf_counter()
            res = ingest_batch(an, cfg.task_id, batch_id(cfg.task_id, b"", window, envs2), body)
            reps.setdefault("analyzer open + validate + aggregate + commit (1 core)", []).append(
                time.perf_counter() - t0)
            assert res["valid"] == a.n, res
        an.engine.dispose()
        for name, ts in reps.items():
            rows.append((name, a.n, min(ts), statistics.median(ts)))
    tab = Table(title=f"shuffledp service throughput on loopback (n={a.n:,}, GRR d={a.d}, envelope "
                      f"{cfg.envelope_len} B)")
    for col in ("stage", "reports", "seconds", "reports/s", f"median of {a.repeat}"):
        tab.add_column(col, justify="right")
    for name, n, s, *med in rows:
        tab.add_row(name, f"{n:,}", f"{s:.2f}", f"{n / s:,.0f}", f"{n / med[0]:,.0f}" if med else "")
    con.print(tab)


if __name__ == "__main__":
    main()
