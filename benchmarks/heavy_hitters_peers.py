"""Heavy hitters side by side with pure-ldp's PEMServer, SFPServer and TreeHistServer.

Same data (Zipf(1.1) words of 3..6 letters over 5000 words, or ``--data wordfreq``), same epsilon
(3, pure-ldp's paper setting) and k (10); shuffledp's mechanisms at their defaults (SFP over CMS
64 x 1024 at eps/2 + eps/2; PEM and TreeHist over OLH), pure-ldp as configured in its own paper
experiments (CMS 32 x 1024, fragments of 2, start length 2; its SFP also splits eps/2 + eps/2, its
PEM and TreeHist use the full eps per report). Reports F1/NCR of the top k, client and server time:
wall clock and CPU time of the process (``time.process_time``; both libraries are single-threaded
here, and CPU time moves much less than wall time when other jobs share the machine).
pure-ldp runs in its own virtualenv (``.venv-peers``: numpy<2.3, xxhash<4) in a subprocess with a
time limit; a case that exceeds it is reported as such. Times on a shared machine: indicative only.

    python benchmarks/heavy_hitters_peers.py --n 100000 [--n 1000000] [--timeout 600] [--repeat 3]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

from shuffledp.experiments.heavy_hitters import topk_metrics, wordfreq_words, zipf_words  # noqa: E402
from shuffledp.local.heavy_hitters import heavy_hitter  # noqa: E402

METHODS = {"sfp": "SFP", "pem": "PEM", "treehist": "TreeHist"}


def ours(method: str, values: np.ndarray, eps: float, k: int, max_length: int, seed: int) -> dict:
    mech = heavy_hitter(method, eps, k=k, alphabet="abcdefghijklmnopqrstuvwxyz", max_length=max_length,
                        hash_seed=seed)
    rng = np.random.default_rng(seed)
    t0, c0 = time.perf_counter(), time.process_time()
    rep = mech.randomize(values, rng)
    t1, c1 = time.perf_counter(), time.process_time()
    est = mech.estimate(mech.aggregate(rep), values.size)
    t2, c2 = time.perf_counter(), time.process_time()
    return {"labels": list(est.labels), "values": list(est.values), "client_s": t1 - t0, "server_s": t2 - t1,
            "client_cpu_s": c1 - c0, "server_cpu_s": c2 - c1}


def ours_median(method: str, values: np.ndarray, eps: float, k: int, max_length: int, seed: int,
                repeat: int) -> dict:
    """:func:`ours` ``repeat`` times with the same seed (same output): the median of each time, and
    every run's client + server wall time in ``runs_s`` (one run's time on a shared 2-core machine
    varies by up to 1.8x between identical runs)."""
    runs = [ours(method, values, eps, k, max_length, seed) for _ in range(max(1, repeat))]
    out = dict(runs[0])
    for key in ("client_s", "server_s", "client_cpu_s", "server_cpu_s"):
        out[key] = float(np.median([r[key] for r in runs]))
    out["runs_s"] = [round(r["client_s"] + r["server_s"], 3) for r in runs]
    return out


def peer(method: str, values: np.ndarray, eps: float, k: int, max_length: int, python: str, timeout: float) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("\n".join(values.tolist()))
        path = fh.name
    try:
        out = subprocess.run([python, str(HERE / "_hh_peer_worker.py"), METHODS[method], path, str(eps), str(k),
                              str(max_length)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"exceeded {timeout:g} s"}
    finally:
        Path(path).unlink(missing_ok=True)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"rc={out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, action="append")
    ap.add_argument("--epsilon", type=float, default=3.0)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--max-length", type=int, default=6)
    ap.add_argument("--data", choices=["zipf", "wordfreq"], default="zipf")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each shuffledp case (the median time is reported; pure-ldp runs once)")
    ap.add_argument("--peers-python", default=str(ROOT / ".venv-peers" / "bin" / "python"))
    ap.add_argument("--out", default=str(ROOT / "results" / "heavy_hitters" / "peers.csv"))
    args = ap.parse_args()
    rows = []
    for n in args.n or [100_000]:
        g = np.random.default_rng(args.seed)
        values = (zipf_words(n, 5000, 1.1, args.max_length, g) if args.data == "zipf"
                  else wordfreq_words(n, args.max_length, g))
        for method in METHODS:
            for who in ("shuffledp", "pure-ldp"):
                r = (ours_median(method, values, args.epsilon, args.k, args.max_length, args.seed, args.repeat)
                     if who == "shuffledp"
                     else peer(method, values, args.epsilon, args.k, args.max_length, args.peers_python, args.timeout))
                row = {"data": args.data, "n": n, "epsilon": args.epsilon, "k": args.k, "method": method, "library": who}
                if "error" in r:
                    row.update({"f1": "", "ncr": "", "client_s": "", "server_s": "", "client_cpu_s": "",
                                "server_cpu_s": "", "note": r["error"]})
                else:
                    m = topk_metrics(r["labels"], r.get("values", [0.0] * len(r["labels"])), values, args.k)
                    row.update({"f1": round(m["f1"], 3), "ncr": round(m["ncr"], 3), "client_s": round(r["client_s"], 3),
                                "server_s": round(r["server_s"], 3), "client_cpu_s": round(r["client_cpu_s"], 3),
                                "server_cpu_s": round(r["server_cpu_s"], 3),
                                "note": f"median of {len(r['runs_s'])} runs, client+server {r['runs_s']}"
                                if "runs_s" in r else ""})
                rows.append(row)
                print(json.dumps(row), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
