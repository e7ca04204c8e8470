"""The end-to-end demo: both services on loopback, 10^5 simulated clients through the SDK path.

Every report is randomized with the task's mechanism (OS-seeded randomness), sealed
individually to the analyzer's HPKE key, uploaded to the shuffler over HTTP in batches,
released as one shuffled batch once the window closes, opened and aggregated by the analyzer.
A small number of the clients use the full :class:`ShuffleDPClient` (outbox, budget ledger,
fresh randomness per report); the rest use the same encode/seal functions vectorized over users.
"""

from __future__ import annotations

import contextlib
import html
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..core.errors import ValidationError

__all__ = ["run_demo", "in_process_estimate", "demo_task_spec", "check_demo_arguments", "run_protocol_demo",
           "protocol_demo_spec", "protocol_demo_params", "DEFAULT_MULTI_MESSAGE"]

#: The multi-message protocol the default demo deploys beside the single-message one.
DEFAULT_MULTI_MESSAGE = "cnt_2m"

#: Demo clients that run the full :class:`ShuffleDPClient` (outbox, ledger, sealed state).
SDK_CLIENTS = 50

#: Task parameters as the ``shuffledp demo`` options name them (for one-line errors).
_CLI_NAMES = {"mechanism": "--mechanism", "mechanism.name": "--mechanism", "mechanism.epsilon": "--epsilon",
              "mechanism.params.d": "--d", "target_central.eps": "--eps-central",
              "target_central.delta": "--delta"}


def demo_task_spec(d: int, epsilon: float, mechanism: str, eps_central: float, delta: float) -> dict[str, Any]:
    """The task the demo creates on the analyzer: one batch window holding the whole population."""
    return {"name": "demo", "mechanism": {"kind": "frequency", "name": mechanism, "epsilon": epsilon,
                                          "params": {"d": d}},
            "target_central": {"eps": eps_central, "delta": delta}, "time_precision": 3600, "batch_window": 86400,
            "client_policy": {"max_reports_per_window": 1, "max_reports_per_day": 1, "memoize": False}}


def check_demo_arguments(n: int, d: int, epsilon: float, mechanism: str, eps_central: float,
                         delta: float, sdk_clients: int = SDK_CLIENTS) -> int:
    """Validate the demo's parameters without starting anything; return the task's minimum batch size.

    Runs the analyzer's own task validation (:func:`~shuffledp.service.config.create_task_config`)
    in process, so a parameter the analyzer would refuse is refused here, and requires ``n`` to
    reach the minimum batch size (the demo releases the whole population as one batch; a smaller
    batch would carry no amplified guarantee and the demo would wait for it in vain). Raises
    :class:`ValidationError` whose message starts with the ``shuffledp demo`` option it concerns.
    """
    from ..core.validation import check_delta, check_epsilon, check_positive_int
    from .config import create_task_config

    check_positive_int(n, "--n")
    check_positive_int(d, "--d", minimum=2)
    check_epsilon(epsilon, "--epsilon")
    check_epsilon(eps_central, "--eps-central")
    check_delta(delta, "--delta")
    try:
        cfg = create_task_config(**demo_task_spec(d, epsilon, mechanism, eps_central, delta))
    except ValidationError as e:
        msg, param = str(e), e.parameter or ""
        opt = _CLI_NAMES.get(param)
        if opt is not None and msg.startswith(param):
            msg = opt + msg[len(param):]
        elif param.startswith("mechanism") or param in ("name", "d", "epsilon"):
            msg = f"--mechanism: {msg}"
        else:
            msg = f"--eps-central/--delta: {msg}"
        raise ValidationError(msg, parameter=opt or param) from None
    if n < max(cfg.min_batch_size, sdk_clients):
        raise ValidationError(f"--n must be >= {max(cfg.min_batch_size, sdk_clients):,} (the minimum batch size "
                              f"for eps0={epsilon:g}, target eps_c={eps_central:g}, delta={delta:g}; the demo "
                              f"releases all n reports as one batch), got {n:,}", parameter="--n")
    return cfg.min_batch_size


def in_process_estimate(cfg, plaintexts: np.ndarray):
    """The same math without services: decode the plaintexts, aggregate, estimate."""
    mech = cfg.mechanism_object()
    reports, _ids, _t = cfg.report_schema.decode(plaintexts)
    return mech.estimate(mech.aggregate(mech.validate_reports(reports)), plaintexts.shape[0])


@contextlib.contextmanager
def _services(deployment: Any, name: str, forward_timeout: float, n_shufflers: int = 1) -> Iterator[tuple[str, Any]]:
    """(directory for the SDK clients' files, deployment): ``deployment`` when given (left running,
    ``shuffledp demo --serve``), else fresh services in a temporary directory, stopped afterwards."""
    from .harness import Deployment
    if deployment is not None:
        clients = Path(deployment.workdir) / f"clients-{name}"
        clients.mkdir(parents=True, exist_ok=True)
        yield str(clients), deployment
        return
    with tempfile.TemporaryDirectory(prefix="shuffledp-demo-") as tmp, \
            Deployment(Path(tmp), forward_timeout=forward_timeout, n_shufflers=n_shufflers) as dep:
        yield tmp, dep


def _run_sdk_clients(analyzer_url: str, shuffler_urls: Any, task_id: bytes, workdir: str, http: Any,
                     values: list[Any], now: float) -> list[dict]:
    """Report ``values[i]`` through the full :class:`ShuffleDPClient` of user ``i`` (its own outbox,
    ledger and sealed memo in ``workdir``); returns each user's message as the client sent it."""
    from .client import ShuffleDPClient

    msgs = []
    for i, v in enumerate(values):  # a handful of full clients; the rest of the population is vectorized
        c = ShuffleDPClient(analyzer_url, shuffler_urls, task_id, Path(workdir) / f"client{i}.db", http=http)
        c.report(v, now=now)
        c.flush()
        msgs.append(c.last_message)
        c.close()
    return msgs


def _wait_until(done: Any, deadline_s: float, failure: Any) -> None:
    """Poll ``done()`` every 0.5 s until it is true; after ``deadline_s`` raise ``RuntimeError(failure())``.
    A timed-out forward is retried meanwhile by the shuffler's batcher (idempotent PUT)."""
    deadline = time.monotonic() + deadline_s
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(failure())
        time.sleep(0.5)


def _estimate_fields(est: dict[str, Any]) -> dict[str, Any]:
    """The analyzer's estimate response as the demo's result records it."""
    return {"estimate": est["estimate"], "std_error": est["std_error"], "ci_low": est["ci_low"],
            "ci_high": est["ci_high"], "privacy_statement": est["privacy_statement"], "n_aggregated": est["n"],
            **({"labels": est["labels"]} if "labels" in est else {})}


def _zipf_items(n: int, d: int, zipf: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` items of ``[0, d)`` drawn with probability proportional to ``1 / (i + 1)^zipf``."""
    w = 1.0 / np.arange(1, d + 1) ** zipf
    return rng.choice(d, size=n, p=w / w.sum())


def _upload_vectorized(http: Any, cfg: Any, key: Any, shuffler_url: str, task_id: bytes, values: np.ndarray,
                       now: float, upload_batch: int, timings: dict[str, float]) -> tuple[np.ndarray, int]:
    """Encode ``values`` (one user each), seal each report to the analyzer and upload them in
    batches of ``upload_batch``; returns the plaintexts and the number the shuffler accepted, and
    records the three steps' seconds in ``timings``."""
    from .client import encode_reports, seal_many, upload

    t0 = time.perf_counter()
    pts = encode_reports(cfg, values, now)
    timings["encode_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    envs = seal_many(cfg, key, pts, b"")
    timings["seal_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    acked = 0
    for s in range(0, len(envs), upload_batch):
        acked += upload(http, shuffler_url, task_id, [(b"", e) for e in envs[s:s + upload_batch]])["accepted"]
    timings["upload_s"] = time.perf_counter() - t0
    return pts, acked


def run_demo(n: int = 100_000, d: int = 16, epsilon: float = 2.0, mechanism: str = "grr", eps_central: float = 1.0,
             delta: float = 1e-8, zipf: float = 1.1, sdk_clients: int = SDK_CLIENTS, out_dir: str | Path = "out/demo",
             upload_batch: int = 5000, data_seed: int = 1, progress=None, forward_timeout: float = 600.0,
             aggregate_deadline: float = 1800.0, deployment: Any = None) -> dict[str, Any]:
    """Run the demo; returns a dict with truth, estimates, privacy statement, timings, report path.

    The whole population is released as one batch, which the analyzer opens in roughly 10–40 s at
    n = 10^5 depending on machine load. ``forward_timeout`` is therefore long. If a forward still
    times out, the shuffler's batcher re-forwards it (idempotently), and the demo waits until the
    analyzer has aggregated all ``n`` reports, for at most ``aggregate_deadline`` seconds.
    ``deployment``: run on these (started) services and leave them running; default: fresh ones.
    """
    import httpx

    from .client import fetch_task

    check_demo_arguments(n, d, epsilon, mechanism, eps_central, delta, sdk_clients)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    say = progress or (lambda msg: None)
    x = _zipf_items(n, d, zipf, np.random.default_rng(data_seed))  # the data only; randomization is OS-seeded
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with _services(deployment, "demo", forward_timeout) as (tmp, dep):
        say(f"services up: analyzer {dep.analyzer.url}, shuffler {dep.shuffler.url} (SQLite in {tmp})")
        created = dep.create_task(demo_task_spec(d, epsilon, mechanism, eps_central, delta))
        task_id = bytes.fromhex(created["task_id"])
        say(f"task {created['task_id'][:16]}…: min batch size {created['config']['min_batch_size']} "
            f"(from target central eps={eps_central}, delta={delta:g})")
        http = httpx.Client(timeout=120.0, headers={"user-agent": "shuffledp-sdk/1"})
        cfg, key = fetch_task(http, dep.analyzer.url, task_id)
        now = time.time()
        # (a) full SDK clients: outbox, budget ledger, sealed state
        t0 = time.perf_counter()
        sdk_msgs = [{k: np.asarray(v, dtype=dt) for k, (v, dt) in msg.items()}
                    for msg in _run_sdk_clients(dep.analyzer.url, dep.shuffler.url, task_id, tmp, http,
                                                [int(v) for v in x[:sdk_clients]], now)]
        timings["sdk_clients_s"] = time.perf_counter() - t0
        # (b) the other clients: same encode + per-report seal, vectorized over users, uploaded in batches
        pts, acked = _upload_vectorized(http, cfg, key, dep.shuffler.url, task_id, x[sdk_clients:], now,
                                        upload_batch, timings)
        say(f"{acked + sdk_clients:,} reports acknowledged by the shuffler")
        t0 = time.perf_counter()
        tick = dep.tick(close_current=True)

        def aggregated() -> bool:
            return dep.analyzer_stats(created["task_id"]).get("received", 0) >= n

        _wait_until(aggregated, aggregate_deadline, lambda: (
            f"the analyzer aggregated {dep.analyzer_stats(created['task_id']).get('received', 0):,} of {n:,} "
            f"reports within {aggregate_deadline:g} s; shuffler counters {dep.counters(created['task_id'])}"))
        timings["release_forward_aggregate_s"] = time.perf_counter() - t0
        counters = dep.counters(created["task_id"])
        r = dep.estimates(created["task_id"])
        r.raise_for_status()
        est = r.json()
        http.close()
    # in-process pipeline on the same reports (services must not change the math)
    mech = cfg.mechanism_object()
    rep_all = {k: np.concatenate([cfg.report_schema.decode(pts)[0][k]] + [m[k] for m in sdk_msgs])
               for k in sdk_msgs[0]} if sdk_msgs else cfg.report_schema.decode(pts)[0]
    local = mech.estimate(mech.aggregate(rep_all), n)
    truth = np.bincount(x, minlength=d) / n
    values = np.asarray(est["estimate"])
    result = {
        "n": n, "d": d, "mechanism": mechanism, "epsilon_local": epsilon, "truth": truth.tolist(),
        **_estimate_fields(est),
        "max_abs_diff_in_process": float(np.max(np.abs(values - local.values))),
        "max_abs_error": float(np.max(np.abs(values - truth))), "counters": counters, "tick": tick,
        "min_batch_size": created["config"]["min_batch_size"], "timings": timings,
        "total_s": time.perf_counter() - t_start,
    }
    result["report"] = str(_write_report(out, result))
    return result


def protocol_demo_spec(name: str, epsilon: float, delta: float, n: int, params: dict[str, Any]) -> dict[str, Any]:
    """The task ``shuffledp demo --protocol NAME`` creates: one window holding the whole population."""
    return {"name": f"demo-{name}", "protocol": {"name": name, "epsilon": epsilon, "delta": delta, "n": n,
                                                 "params": params},
            "time_precision": 3600, "batch_window": 86400, "min_batch_size_floor": 1,
            "client_policy": {"max_reports_per_window": 1, "max_reports_per_day": 1, "memoize": False}}


def _demo_values(p: Any, n: int, d: int, zipf: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic inputs of the protocol's kind and their truth (what the estimate estimates, as totals)."""
    x = _zipf_items(n, d, zipf, rng)
    kind = p.input_kind
    if kind == "bit":
        bits = (x == 0).astype(np.int64)   # "holds the most popular item"
        return bits, np.array([bits.sum()], dtype=np.float64)
    if kind == "unit_interval":
        u = (x + 0.5) / d
        return u, np.array([u.sum()])
    if kind == "multi_categorical":
        dims = [int(v) for v in getattr(p, "dims")]
        cols = [_zipf_items(n, da, zipf, rng) for da in dims]
        arr = np.stack(cols, axis=1)
        return arr, np.concatenate([np.bincount(c, minlength=da) for c, da in zip(cols, dims)]).astype(float)
    dd = int(getattr(p, "d", d))
    x = np.minimum(x, dd - 1)
    return x, np.bincount(x, minlength=dd).astype(float)


def run_protocol_demo(name: str, n: int = 100_000, epsilon: float = 1.0, delta: float = 1e-8,
                      params: dict[str, Any] | None = None, d: int = 16, zipf: float = 1.1,
                      sdk_clients: int = 20, out_dir: str | Path = "out/demo", data_seed: int = 1, progress=None,
                      forward_timeout: float = 600.0, aggregate_deadline: float = 1800.0,
                      deployment: Any = None) -> dict[str, Any]:
    """Deploy registry protocol ``name`` over HTTP (its ``n_shufflers`` shufflers and an analyzer).

    ``sdk_clients`` users go through :class:`ShuffleDPClient` (outbox, ledger, one envelope per
    message, a user marker per shuffler); the rest through the same encode/seal/upload vectorized
    over users. The shufflers add the protocol's fakes; the analyzer's estimate is compared with
    ``protocol.analyze`` of the messages the clients sent (the in-process pipeline), which is exact
    unless the shufflers add fakes or the curator adds noise (then those differ by design).
    ``deployment``: run on these (started) services, with at least the protocol's shufflers, and
    leave them running; default: fresh ones.
    """
    import httpx

    from .client import fetch_task, upload_protocol_users
    from .config import build_protocol

    params = protocol_demo_params(name, params or {}, d)
    spec = protocol_demo_spec(name, epsilon, delta, n, params)
    p = build_protocol(spec["protocol"])
    say = progress or (lambda msg: None)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    rng = np.random.default_rng(data_seed)
    x, truth = _demo_values(p, n, d, zipf, rng)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if deployment is not None and len(deployment.shufflers) != p.n_shufflers:
        raise ValidationError(f"{name} runs on {p.n_shufflers} shuffler(s), the deployment has "
                              f"{len(deployment.shufflers)}", parameter="deployment")
    with _services(deployment, name, forward_timeout, p.n_shufflers) as (tmp, dep):
        say(f"{name}: analyzer {dep.analyzer.url}, {p.n_shufflers} shuffler(s) {', '.join(dep.shuffler_urls)}")
        created = dep.create_task(spec)
        task_id = bytes.fromhex(created["task_id"])
        http = httpx.Client(timeout=120.0, headers={"user-agent": "shuffledp-sdk/1"})
        cfg, key = fetch_task(http, dep.analyzer.url, task_id)
        p = cfg.protocol_object()   # the task's protocol: with the public hash seed the analyzer drew
        now = time.time()
        t0 = time.perf_counter()
        k = min(sdk_clients, n)
        sdk_msgs = _run_sdk_clients(dep.analyzer.url, dep.shuffler_urls, task_id, tmp, http,
                                    [x[i].tolist() if x.ndim > 1 else x[i].item() for i in range(k)], now)
        timings["sdk_clients_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        pts, route, acked = upload_protocol_users(http, cfg, key, dep.shuffler_urls, x[k:], now)
        timings["encode_seal_upload_s"] = time.perf_counter() - t0
        say(f"{name}: {pts.shape[0] + sum(len(next(iter(m.values()))[0]) for m in sdk_msgs):,} messages of {n:,} "
            f"users acknowledged by the shuffler(s)")
        t0 = time.perf_counter()
        dep.tick(close_current=True)
        last: list[Any] = []

        def released() -> bool:
            last[:] = [dep.estimates(created["task_id"])]
            return last[0].status_code == 200

        _wait_until(released, aggregate_deadline,
                    lambda: f"no release of {name} within {aggregate_deadline:g} s: {last[0].text[:300]}")
        timings["release_forward_aggregate_s"] = time.perf_counter() - t0
        est = last[0].json()
        counters = [dep.counters(created["task_id"], shuffler=sp) for sp in dep.shufflers]
        http.close()
    sent = _messages_sent(cfg, pts, route, sdk_msgs, p.n_shufflers)
    fakes = sum(int(c.get("fake_messages", 0)) for c in counters)
    exact = fakes == 0 and p.model != "central"
    local = p.analyze(sent, n) if exact else None
    values = np.asarray(est["estimate"])
    result = {
        "protocol": name, "params": params, "n": n, "epsilon": epsilon, "delta": delta,
        "n_shufflers": p.n_shufflers, "messages_per_user": p.messages_per_user, "truth": truth.tolist(),
        **_estimate_fields(est), "fake_messages": fakes,
        "max_abs_diff_in_process": float(np.max(np.abs(values - local.values))) if local is not None else None,
        "max_abs_error": _max_abs_error(values, truth, est.get("labels")),
        "counters": counters, "timings": timings, "total_s": time.perf_counter() - t_start,
    }
    (out / f"{name}.json").write_text(json.dumps(result, indent=1))
    return result


def _max_abs_error(values: np.ndarray, truth: np.ndarray, labels: list | None) -> float | None:
    """Largest |estimate - truth| over the estimated items: the items a discovery names (``labels``,
    indices into ``truth``), else every item; ``None`` when the shapes do not correspond."""
    if labels is not None:
        idx = np.asarray(labels, dtype=np.int64)
        return float(np.max(np.abs(values - truth[idx]))) if idx.size else None
    return float(np.max(np.abs(values - truth))) if values.shape == truth.shape else None


def _messages_sent(cfg: Any, pts: np.ndarray, route: np.ndarray, sdk_msgs: list[dict], n_shufflers: int) -> dict:
    """Every message the demo's users sent, as columns: the vectorized users' plaintexts, then the
    SDK clients' messages, with each message's shuffler when there are several."""
    sent = cfg.report_schema.decode(pts)[0]
    for m in sdk_msgs:
        for col in sent:
            sent[col] = np.concatenate([sent[col], np.asarray(m[col][0], dtype=m[col][1])])
    if n_shufflers > 1:
        sent["shuffler"] = np.concatenate([route] + [np.asarray(m.get("shuffler", [[], "<i8"])[0], dtype=np.int64)
                                                     for m in sdk_msgs]) if sdk_msgs and "shuffler" in sdk_msgs[0] else route
    return sent


def protocol_demo_params(name: str, params: dict[str, Any], d: int) -> dict[str, Any]:
    """``params`` with the demo's domain size ``d`` added when protocol ``name``'s constructor
    requires ``d`` and ``params`` does not give it."""
    import inspect

    from ..local.registry import constructor_parameters
    from ..shuffle.registry import protocol_class

    if "d" in params:
        return dict(params)
    required, _ = constructor_parameters(protocol_class(name))
    needs = any(p.name == "d" and p.default is inspect.Parameter.empty for p in required)
    return {**params, "d": d} if needs else dict(params)


def _write_report(out: Path, res: dict) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = res["d"]
    idx = np.arange(d)
    est, lo, hi = (np.asarray(res[k]) for k in ("estimate", "ci_low", "ci_high"))
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(idx - 0.2, res["truth"], width=0.4, label="true fraction", color="#999")
    ax.bar(idx + 0.2, est, width=0.4, yerr=[est - lo, hi - est], capsize=2, label="estimate (95% CI)",
           color="#2a6fb0")
    ax.set_xlabel("item")
    ax.set_ylabel("fraction of users")
    ax.set_title(f"ESA over the wire: {res['mechanism'].upper()}, eps0={res['epsilon_local']:g}, n={res['n']:,}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "demo.png", dpi=110)
    plt.close(fig)
    rows = "".join(f"<tr><td>{i}</td><td>{res['truth'][i]:.5f}</td><td>{est[i]:.5f}</td>"
                   f"<td>{res['std_error'][i]:.5f}</td><td>[{lo[i]:.5f}, {hi[i]:.5f}]</td></tr>" for i in range(d))
    ps = html.escape(res["privacy_statement"]["text"])
    tm = "".join(f"<li>{html.escape(k)}: {v:.2f} s</li>" for k, v in res["timings"].items())
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>shuffledp demo</title>
<style>body{{font-family:sans-serif;max-width:900px;margin:2em auto}}td,th{{padding:2px 10px;text-align:right}}</style>
</head><body><h1>shuffledp: Encode–Shuffle–Analyze over the wire</h1>
<p>{res['n']:,} simulated clients → shuffler → analyzer on loopback (SQLite, HPKE-sealed reports).
Minimum batch size {res['min_batch_size']:,}; {res['n_aggregated']:,} reports aggregated.</p>
<p><b>Privacy:</b> {ps}</p><img src="demo.png" alt="estimates vs truth">
<table><tr><th>item</th><th>truth</th><th>estimate</th><th>std err</th><th>95% CI</th></tr>{rows}</table>
<p>Max |service − in-process| = {res['max_abs_diff_in_process']:.3g}; max |estimate − truth| =
{res['max_abs_error']:.4f}.</p><ul>{tm}</ul></body></html>"""
    p = out / "index.html"
    p.write_text(page)
    return p
