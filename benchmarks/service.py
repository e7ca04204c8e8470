"""Service throughput on loopback (benchmark, not a test).

- shuffler: sustained *durable* ingest rate (SQLite WAL, synchronous=FULL; each 200 is sent after
  the commit) with concurrent uploaders posting pre-sealed reports in HTTP batches;
- analyzer: open (HPKE) + decode + validate + replay check + aggregate + commit rate of one
  batch, in process, pinned to one core (``--repeat`` fresh analyzers and batches; best and
  median); plus the HPKE open rate alone, per envelope (``open_report``) and batched as ingest
  does it (``open_reports``), and the bare X25519 exchange that bounds both.
- ``--pending N`` (alone): latency of one-report uploads (p50/p99/max, one client paced at 25/s)
  while the shuffler holds N pending reports in closed windows, in two phases: *evaluate* (a
  pool below its threshold, looked at by the batcher every second for 20 s) and *release* (the
  N-report pool shuffled into one batch while uploads go on). The pending reports are envelopes
  with a valid header and random body (the shuffler does not decrypt); the analyzer URL the
  shuffler forwards to is a closed port, so only the shuffler's own work is timed.

- ``--protocol NAME [NAME ...]``: a registry protocol task end to end over HTTP (its N shufflers):
  client encode + per-message seal, durable ingest of messages and user markers by concurrent
  uploaders, and shuffle (with the shufflers' fakes) + forward + analyzer ingest, per user and per
  message. ``--param KEY=JSON`` passes protocol parameters (e.g. ``--param mode='"parallel"'``).

Usage: PYTHONPATH=src python benchmarks/service.py [--n 20000] [--threads 4] [--batch 500] [--repeat 3]
       PYTHONPATH=src python benchmarks/service.py --pending 200000
       PYTHONPATH=src python benchmarks/service.py --protocol hist_kr cnt_2m murs --param d=64 --n 20000
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
from shuffledp.service.wire import Batch, batch_id, encode_batch, encode_upload, open_report, open_reports


def _header_only_envelopes(env_len: int, key_id: int, k: int) -> list[bytes]:
    import struct
    hdr = struct.pack(">BHHH", key_id, 0x20, 1, 1)   # X25519 / HKDF-SHA256 / AES-128-GCM
    raw = os.urandom(k * (env_len - 7))
    return [hdr + raw[i * (env_len - 7):(i + 1) * (env_len - 7)] for i in range(k)]


def upload_latency_with_pending(n_pending: int, phase: str, seconds: float = 20.0, rate: float = 25.0) -> dict:
    """Upload latencies (s) of one paced client while the shuffler holds ``n_pending`` reports."""
    with tempfile.TemporaryDirectory() as tmp:
        dep = Deployment(Path(tmp), tick_seconds=1.0 if phase == "evaluate" else 3600)
        dep.shuffler.extra_args += ["--close-delay", "-86400"]   # the current (daily) window counts as closed
        dep.start()
        try:
            r = dep.http.post(f"{dep.analyzer.url}/v1/tasks", headers=dep.admin(), json={
                "name": "latency", "mechanism": {"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                 "params": {"d": 64}},
                "target_central": {"eps": 1.0, "delta": 1e-8},
                "min_batch_size_floor": 10**8 if phase == "evaluate" else 1000})
            r.raise_for_status()
            created = r.json()
            dep.register(created, analyzer_url_for_shuffler="http://127.0.0.1:9")   # nothing listens there
            key_id = dep.http.get(f"{dep.analyzer.url}/v1/hpke-key-ids").json()["accepting"][0]
            from shuffledp.service.config import TaskConfig
            el = TaskConfig.from_json(created["config"]).envelope_len
            url = f"{dep.shuffler.url}/v1/tasks/{created['task_id']}/reports"
            for s in range(0, n_pending, 10_000):
                dep.http.post(url, content=encode_upload(
                    [(b"", e) for e in _header_only_envelopes(el, key_id, min(10_000, n_pending - s))])
                ).raise_for_status()
            out: dict = {}
            ticker = None
            if phase == "release":
                def tick() -> None:
                    t1 = time.perf_counter()
                    out["tick"] = dep.tick(close_current=True)
                    out["tick_s"] = time.perf_counter() - t1
                ticker = threading.Thread(target=tick)
            c = httpx.Client(timeout=120)
            lats: list[float] = []
            t_end = time.time() + seconds
            if ticker is not None:
                ticker.start()
            while time.time() < t_end or (ticker is not None and ticker.is_alive()):
                body = encode_upload([(b"", _header_only_envelopes(el, key_id, 1)[0])])
                t1 = time.perf_counter()
                c.post(url, content=body).raise_for_status()
                lats.append(time.perf_counter() - t1)
                time.sleep(max(0.0, 1 / rate - lats[-1]))
            if ticker is not None:
                ticker.join()
            c.close()
            lats.sort()
            q = lambda f: lats[min(len(lats) - 1, int(f * len(lats)))]   # noqa: E731
            return {"uploads": len(lats), "p50": q(0.5), "p99": q(0.99), "max": lats[-1], **out}
        finally:
            dep.stop()


def pending_main(n_pending: int) -> None:
    con = Console()
    tab = Table(title=f"one-report upload latency with {n_pending:,} pending reports (loopback, SQLite)")
    for col in ("phase", "uploads", "p50 ms", "p99 ms", "max ms", "batch formation s"):
        tab.add_column(col, justify="right")
    for phase in ("evaluate", "release"):
        r = upload_latency_with_pending(n_pending, phase, seconds=20.0 if phase == "evaluate" else 10.0)
        tab.add_row(phase, str(r["uploads"]), f"{1000 * r['p50']:.0f}", f"{1000 * r['p99']:.0f}",
                    f"{1000 * r['max']:.0f}", f"{r['tick_s']:.1f}" if "tick_s" in r else "")
    con.print(tab)


_NEEDS_D = {"hist_kr", "hist_mm", "slh", "murs", "prhr", "pucm", "ldp_oracle", "cdp_laplace_hist"}


def protocol_rows(name: str, n: int, threads: int, batch: int, params: dict, epsilon: float = 1.0,
                  delta: float = 1e-6) -> list[tuple]:
    """Stage timings of one protocol task over HTTP: (stage, users, messages, seconds)."""
    from shuffledp.service.client import encode_protocol_messages, user_markers
    from shuffledp.service.config import build_protocol
    params = {k: v for k, v in params.items() if k != "d" or name in _NEEDS_D}
    if name == "murs":
        params.setdefault("mode", "parallel")
    spec = {"name": name, "epsilon": epsilon, "delta": delta, "n": n, "params": params}
    p = build_protocol(spec)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, \
            Deployment(Path(tmp), tick_seconds=3600, n_shufflers=p.n_shufflers) as dep:
        created = dep.create_task({"name": "bench", "protocol": spec, "time_precision": 3600, "batch_window": 86400,
                                   "min_batch_size_floor": 1})
        tid = bytes.fromhex(created["task_id"])
        http = httpx.Client(timeout=600)
        cfg, key = fetch_task(http, dep.analyzer.url, tid)
        d = int(params.get("d", 2))
        x = np.random.default_rng(0).integers(0, d, n) if p.input_kind == "categorical" else \
            (np.random.default_rng(0).random(n) < 0.3).astype(np.int64) if p.input_kind == "bit" else \
            np.random.default_rng(0).random(n)
        t0 = time.perf_counter()
        pts, route, users = encode_protocol_messages(cfg, x, time.time())
        envs = seal_many(cfg, key, pts, b"")
        m = len(envs)
        rows.append(("client encode + HPKE seal per message (1 thread)", n, m, time.perf_counter() - t0))
        jobs = []
        for j, url in enumerate(dep.shuffler_urls):
            mine = [envs[i] for i in np.flatnonzero(route == j)]
            marks = user_markers(int(users[j]))
            for s0 in range(0, max(len(mine), len(marks)), batch):
                jobs.append((url, mine[s0:s0 + batch], marks[s0:s0 + batch]))

        def worker(my: list) -> None:
            c = httpx.Client(timeout=120)
            for url, items, marks in my:
                upload(c, url, tid, [(b"", e) for e in items], markers=marks)
            c.close()
        t0 = time.perf_counter()
        ths = [threading.Thread(target=worker, args=(jobs[i::threads],)) for i in range(threads)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        rows.append((f"shuffler durable ingest of messages + markers ({threads} uploaders)", n, m,
                     time.perf_counter() - t0))
        t0 = time.perf_counter()
        dep.tick(close_current=True)
        while dep.estimates(created["task_id"]).status_code != 200:
            time.sleep(0.2)
        fakes = sum(int(dep.counters(created["task_id"], shuffler=sp).get("fake_messages", 0)) for sp in dep.shufflers)
        rows.append((f"shuffle (+{fakes} fakes) + forward + analyzer ingest, {p.n_shufflers} shuffler(s)", n,
                     m + fakes, time.perf_counter() - t0))
        http.close()
    return rows


def protocol_main(names: list[str], n: int, threads: int, batch: int, params: dict) -> None:
    con = Console()
    tab = Table(title=f"protocol tasks over HTTP on loopback (n={n:,} users)")
    for col in ("protocol", "stage", "users/s", "messages/s", "seconds"):
        tab.add_column(col, justify="right")
    for name in names:
        for stage, users, msgs, sec in protocol_rows(name, n, threads, batch, params):
            tab.add_row(name, stage, f"{users / sec:,.0f}", f"{msgs / sec:,.0f}", f"{sec:.2f}")
    con.print(tab)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="fresh analyzer + batch per repetition")
    ap.add_argument("--pending", type=int, default=0,
                    help="instead: upload latency while the shuffler holds this many pending reports")
    ap.add_argument("--protocol", nargs="*", default=None, help="instead: these registry protocols over HTTP")
    ap.add_argument("--param", action="append", default=[], help="protocol parameter KEY=JSON (repeatable)")
    a = ap.parse_args()
    if a.protocol:
        import json
        params = {k: json.loads(v) for k, _, v in (it.partition("=") for it in a.param)}
        params.setdefault("d", a.d)
        protocol_main(a.protocol, a.n, a.threads, a.batch, params)
        return
    if a.pending:
        pending_main(a.pending)
        return
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
