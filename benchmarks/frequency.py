"""Frequency-oracle benchmark: encode s, aggregate s, peak MB and MSE/theory.

Each (mechanism, n, d, eps) case runs in a fresh subprocess so its peak RSS is its own.
Peak MB = peak RSS of the case process minus its RSS after imports and data generation
(i.e. what the mechanism's reports and server state cost).

    python benchmarks/frequency.py                     # our mechanisms, full grid
    python benchmarks/frequency.py --quick             # n=1e5 only
    python benchmarks/frequency.py --peers             # + pure-ldp / multi-freq-ldpy side by side
    python benchmarks/frequency.py --markdown out.md   # also write the table as markdown

Peers need their own virtualenv (they break on numpy >= 2.3 and xxhash >= 4, see
docs/benchmarks.md): ``make peers-venv`` creates ``.venv-peers``; ``--peers-python`` overrides.
Peer cases predicted to exceed ``--peer-budget`` seconds run on fewer users and are scaled
linearly to the target n (marked ``~``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MECHS = ["grr", "sue", "oue", "olh", "hr", "cms", "hcms"]


def zipf_data(n: int, d: int, seed: int = 20240601):
    import numpy as np

    w = 1.0 / np.arange(1, d + 1) ** 1.1
    return np.random.default_rng(seed).choice(d, size=n, p=w / w.sum())


def rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_case(mech_name: str, n: int, d: int, eps: float, chunk: int = 1 << 18) -> dict:
    """Our mechanism on the standard workload (called inside the case subprocess)."""
    import time

    import numpy as np

    from shuffledp.local import frequency_oracle

    x = zipf_data(n, d)
    true = np.bincount(x, minlength=d) / n
    mech = frequency_oracle(mech_name, eps, d)
    rng = np.random.default_rng(1)
    mech.aggregate(mech.randomize(x[:100], rng))  # warm-up
    base = current_rss_mb()
    t_enc = t_agg = 0.0
    stat = None
    for s in range(0, n, chunk):  # the simulator streams chunks; each chunk = encode then aggregate
        t0 = time.perf_counter()
        rep = mech.randomize(x[s:s + chunk], rng)
        t1 = time.perf_counter()
        part = mech.aggregate(rep)
        t_agg += time.perf_counter() - t1
        t_enc += t1 - t0
        stat = part if stat is None else stat + part
        del rep
    t0 = time.perf_counter()
    est = mech.estimate(stat, n)
    t_est = time.perf_counter() - t0
    mse = float(np.mean((est.values - true) ** 2))
    if hasattr(mech, "variances"):  # exact per-item variances for the true distribution (HR, CMS, HCMS)
        theory = float(np.mean(mech.variances(n, true)))
    else:
        theory = float(np.mean([mech.variance(n, f) for f in true]))
    return {"encode_s": t_enc, "server_s": t_agg + t_est, "peak_mb": rss_mb() - base,
            "mse_theory": mse / theory, "n_run": n}


def run_subprocess(args: list[str], python: str = sys.executable, timeout: float = 900) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
    out = subprocess.run([python, *args], capture_output=True, text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1][:120]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def fmt(v, nd=3):
    if v is None:
        return "–"
    if isinstance(v, str):
        return v
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{nd}f}" if abs(v) >= 0.01 else f"{v:.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="n = 1e5 only")
    ap.add_argument("--mechs", default=",".join(MECHS))
    ap.add_argument("--n", default="100000,1000000")
    ap.add_argument("--d", default="64,1024")
    ap.add_argument("--eps", default="1,4")
    ap.add_argument("--peers", action="store_true", help="also run pure-ldp and multi-freq-ldpy")
    ap.add_argument("--peers-python", default=str(ROOT / ".venv-peers" / "bin" / "python"))
    ap.add_argument("--peer-budget", type=float, default=60.0, help="max seconds per peer case before scaling")
    ap.add_argument("--markdown", help="write the table to this markdown file")
    a = ap.parse_args()

    if a.case:
        m, n, d, eps = json.loads(a.case)
        print(json.dumps(run_case(m, n, d, eps)))
        return

    ns = [100_000] if a.quick else [int(float(v)) for v in a.n.split(",")]
    ds = [int(v) for v in a.d.split(",")]
    epss = [float(v) for v in a.eps.split(",")]
    mechs = a.mechs.split(",")
    rows = []
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    for n in ns:
        for d in ds:
            for eps in epss:
                for m in mechs:
                    r = run_subprocess([__file__, "--case", json.dumps([m, n, d, eps])])
                    rows.append({"mech": m, "impl": "shuffledp", "n": n, "d": d, "eps": eps, **r})
                    if a.peers and Path(a.peers_python).exists():
                        for peer in ("pure-ldp", "multi-freq-ldpy"):
                            r = run_subprocess([str(HERE / "_peer_worker.py"),
                                                json.dumps([peer, m, n, d, eps, a.peer_budget])],
                                               python=a.peers_python, timeout=3600)
                            if r.get("skip"):
                                continue
                            rows.append({"mech": m, "impl": peer, "n": n, "d": d, "eps": eps, **r})
                    console.print(f"done {m} n={n:,} d={d} eps={eps:g}", style="dim")
    cols = ["mech", "impl", "n", "d", "eps", "encode s", "server s", "peak MB", "MSE/theory", "note"]
    tab = Table(title="Frequency oracles (2-core machine, one process per case)")
    for c in cols:
        tab.add_column(c, justify="right")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        tilde = "~" if r.get("scaled") else ""
        vals = [r["mech"], r["impl"], f"{r['n']:,}", str(r["d"]), f"{r['eps']:g}",
                tilde + fmt(r.get("encode_s")), tilde + fmt(r.get("server_s")), fmt(r.get("peak_mb"), 0),
                fmt(r.get("mse_theory"), 2), r.get("error", "") or (f"ran n={r['n_run']:,}" if r.get("scaled") else "")]
        tab.add_row(*vals)
        lines.append("| " + " | ".join(vals) + " |")
    console.print(tab)
    if a.markdown:
        Path(a.markdown).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
