"""The analyzer's dashboard in a real browser (headless Chromium) against services on loopback.

A protocol task (hist_kr, two windows) and a local-oracle task (GRR) get users through the
shufflers; the page is rendered by ``chromium --headless --dump-dom`` (the token in the URL
fragment, which never reaches the server) and every number drawn is compared with the JSON the
analyzer serves: the estimate and its 95% intervals per item, each window's release, the ledger's
cumulative guarantee, the health counts. The data endpoints refuse a request without the token.

Without Chromium the test is skipped with the reason; with ``SHUFFLEDP_REQUIRE_BROWSER=1`` (CI)
it fails instead. ``SHUFFLEDP_DASHBOARD_SCREENSHOTS=DIR`` also writes the screenshots kept in
``docs/`` (wide and narrow) into DIR.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import httpx
import numpy as np
import pytest

from shuffledp.service.client import fetch_task, upload_protocol_users
from shuffledp.service.harness import Deployment

from .conftest import sealed, send

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str:
    """Path of a Chromium binary, or skip (fail with ``SHUFFLEDP_REQUIRE_BROWSER=1``)."""
    for name in ((os.environ.get("SHUFFLEDP_CHROMIUM") or ""),) + CHROMIUM_NAMES:
        path = shutil.which(name) if name else None
        if path:
            return path
    msg = f"no headless browser: none of {CHROMIUM_NAMES} on PATH (apt-get install chromium)"
    if os.environ.get("SHUFFLEDP_REQUIRE_BROWSER", "") == "1":
        pytest.fail(f"{msg} (SHUFFLEDP_REQUIRE_BROWSER=1: the browser test must run)", pytrace=False)
    pytest.skip(msg)


def browser_args(binary: str, profile: Path, width: int, height: int) -> list[str]:
    return [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={profile}",
            f"--window-size={width},{height}", "--virtual-time-budget=8000"]


def dump_dom(binary: str, url: str, profile: Path) -> str:
    r = subprocess.run(browser_args(binary, profile, 1400, 1000) + ["--dump-dom", url],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def screenshot(binary: str, url: str, profile: Path, out: Path, width: int, height: int) -> None:
    r = subprocess.run(browser_args(binary, profile, width, height) + [f"--screenshot={out}", url],
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0 and out.exists(), r.stderr[-2000:]


class Dom(HTMLParser):
    """Elements as (tag, attrs, ancestors' data-task) and each element's text, from the dumped DOM."""

    VOID = {"meta", "link", "input", "br", "img", "hr", "col", "source", "wbr"}   # HTML's void elements

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[dict] = []
        self.stack: list[dict] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        task = a.get("data-task") or (self.stack[-1]["task"] if self.stack else None)
        el = {"tag": tag, "attrs": a, "cls": set((a.get("class") or "").split()), "task": task, "text": "",
              "section": a.get("class", "") if tag == "section" else (self.stack[-1]["section"] if self.stack else "")}
        self.elements.append(el)
        if tag not in self.VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if all(el["tag"] != tag for el in self.stack):
            return
        while self.stack:
            el = self.stack.pop()
            if el["tag"] == tag:
                break

    def handle_data(self, data):
        for el in self.stack:
            el["text"] += data

    def find(self, tag=None, cls=None, task=None, section=None, **attrs):
        return [e for e in self.elements
                if (tag is None or e["tag"] == tag) and (cls is None or cls in e["cls"])
                and (task is None or e["task"] == task) and (section is None or section in e["section"])
                and all(e["attrs"].get(k.replace("_", "-")) == v for k, v in attrs.items())]


def f(el: dict, key: str) -> float:
    return float(el["attrs"][key])


def _wait_estimates(dep: Deployment, task_hex: str, windows: int, deadline: float) -> dict:
    while True:
        r = dep.estimates(task_hex)
        if r.status_code == 200 and len(r.json()["windows"]) >= windows:
            return r.json()
        assert time.monotonic() < deadline, (r.status_code, r.text[:300], dep.counters(task_hex))
        time.sleep(0.3)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_dashboard_in_headless_chromium(tmp_path) -> None:
    binary = chromium()
    rng = np.random.default_rng(3)
    with Deployment(tmp_path, tick_seconds=3600) as dep:
        hist = dep.create_task({"name": "hist-kr", "protocol": {"name": "hist_kr", "epsilon": 1.0, "delta": 1e-4,
                                                              "n": 1000, "params": {"d": 8}},
                                "time_precision": 1, "batch_window": 2, "min_batch_size_floor": 1})
        grr = dep.create_task({"name": "grr-oracle", "mechanism": {"kind": "frequency", "name": "grr",
                                                                  "epsilon": 2.0, "params": {"d": 8}},
                               "target_central": {"eps": 1.0, "delta": 1e-6}, "time_precision": 3600,
                               "batch_window": 3600})
        h_hex, g_hex = hist["task_id"], grr["task_id"]
        http = httpx.Client(timeout=60.0)
        cfg, key = fetch_task(http, dep.analyzer.url, bytes.fromhex(h_hex))
        # GRR: 1500 reports (its minimum batch size is 366), one window
        _, _, _, envs = sealed(dep, g_hex, rng.integers(0, 8, size=1500))
        assert send(dep, g_hex, envs) == 1500
        # hist_kr: two releases in two 2-second windows
        for _round in range(2):
            upload_protocol_users(http, cfg, key, dep.shuffler_urls, rng.integers(0, 8, size=1000), time.time())
            dep.tick(close_current=True)
            w0 = int(time.time() // 2)   # the next round's reports land in a later window
            while int(time.time() // 2) == w0:
                time.sleep(0.05)
        http.close()
        deadline = time.monotonic() + 60
        est_h = _wait_estimates(dep, h_hex, 2, deadline)
        est_g = _wait_estimates(dep, g_hex, 1, deadline)
        base = dep.analyzer.url
        per_window = {w: dep.estimates(h_hex, from_window=w, to_window=w).json() for w in est_h["windows"]}
        stats = {t: dep.analyzer_stats(t) for t in (h_hex, g_hex)}
        ledger_h = dep.http.get(f"{base}/v1/tasks/{h_hex}/privacy", headers=dep.collector()).json()["ledger"]
        summary = dep.http.get(f"{base}/v1/dashboard/summary", headers=dep.collector()).json()

        # the data endpoints refuse a request without the (right) token; the shell holds no data
        for path in ("/v1/dashboard/summary", f"/v1/dashboard/tasks/{h_hex}/export?format=csv",
                     f"/v1/dashboard/tasks/{g_hex}/export?format=json"):
            assert dep.http.get(base + path).status_code == 401
            assert dep.http.get(base + path, headers={"authorization": "Bearer wrong"}).status_code == 401
            assert dep.http.get(base + path, headers=dep.admin()).status_code == 401
        shell = dep.http.get(f"{base}/dashboard/")
        assert shell.status_code == 200 and "hist-kr" not in shell.text and "default-src 'none'" in \
            shell.headers["content-security-policy"]
        for asset in ("app.js", "style.css"):
            a = dep.http.get(f"{base}/dashboard/{asset}")
            assert a.status_code == 200 and "http://" not in a.text.replace("http://www.w3.org/2000/svg", "")
        csv = dep.http.get(f"{base}/v1/dashboard/tasks/{h_hex}/export?format=csv", headers=dep.collector())
        assert csv.status_code == 200 and csv.text.splitlines()[0].startswith("task,window,item,estimate")
        assert len(csv.text.splitlines()) == 1 + 8 * 3   # overall + 2 windows, 8 items each

        url = f"{base}/dashboard/#token={dep.collector_token}"
        dom = Dom(dump_dom(binary, url, tmp_path / "profile"))
        shots = os.environ.get("SHUFFLEDP_DASHBOARD_SCREENSHOTS")
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            screenshot(binary, url, tmp_path / "p2", Path(shots) / "dashboard-wide.png", 1600, 1900)
            screenshot(binary, url, tmp_path / "p3", Path(shots) / "dashboard-narrow.png", 640, 2600)

    assert dom.find("body", data_loaded="1"), "the page never loaded its data"
    # tasks table: both tasks with name, kind, target
    rows = {e["attrs"]["data-task"]: e for e in dom.find("tr") if "data-task" in e["attrs"]}
    assert set(rows) == {h_hex, g_hex}
    assert "hist-kr" in rows[h_hex]["text"] and "protocol hist_kr" in rows[h_hex]["text"]
    assert "grr-oracle" in rows[g_hex]["text"] and "grr" in rows[g_hex]["text"]
    assert dom.find("td", cls="windows", task=h_hex)[0]["attrs"]["data-count"] == "2"

    for t, est in ((h_hex, est_h), (g_hex, est_g)):
        # estimate chart: one bar and one interval per item, the analyzer's numbers exactly
        bars = dom.find("rect", cls="bar", task=t)
        cis = [e for e in dom.find("line", cls="ci", task=t) if "data-item" in e["attrs"]]
        assert len(bars) == len(cis) == 8
        for b, c in zip(bars, cis):
            i = int(b["attrs"]["data-item"])
            assert f(b, "data-value") == est["estimate"][i]
            assert f(c, "data-low") == est["ci_low"][i] and f(c, "data-high") == est["ci_high"][i]
            assert est["ci_low"][i] < est["estimate"][i] < est["ci_high"][i]
        # the privacy statement beside the numbers
        box = dom.find("div", cls="privacy", task=t)[0]
        assert f(box, "data-eps") == est["privacy_statement"]["eps"]
        assert est["privacy_statement"]["text"] in box["text"]
        # top items table: the largest estimates, in order
        top = [int(e["attrs"]["data-item"]) for e in dom.find("tr", task=t) if "data-item" in e["attrs"]]
        assert top == list(np.argsort(-np.asarray(est["estimate"]), kind="stable")[:8])
        # health: the analyzer's own counts
        hp = dom.find("div", cls="health", task=t)[0]
        assert (int(hp["attrs"]["data-batches"]), int(hp["attrs"]["data-received"]),
                int(hp["attrs"]["data-valid"])) == (stats[t]["batches"], stats[t]["received"], stats[t]["valid"])
        assert {e["attrs"]["data-reason"] for e in dom.find("td", task=t) if "data-reason" in e["attrs"]} >= \
            {"decrypt_error", "replayed", "invalid_value", "expired"}

    # hist_kr: the time series holds each window's own release
    pts = dom.find("circle", cls="point", task=h_hex)
    assert [int(p["attrs"]["data-window"]) for p in pts] == est_h["windows"]
    item = int(np.argmax(est_h["estimate"]))
    for p in pts:
        e_w = per_window[int(p["attrs"]["data-window"])]
        assert f(p, "data-value") == e_w["estimate"][item]
        assert (f(p, "data-low"), f(p, "data-high")) == (e_w["ci_low"][item], e_w["ci_high"][item])
    # ledger: one row per window, each window's guarantee, cumulative up to the last = the estimate's
    led = [e for e in dom.find("tr", task=h_hex) if "data-cum-eps" in e["attrs"]]
    assert [int(e["attrs"]["data-window"]) for e in led] == sorted({r["window"] for r in ledger_h})
    for e in led:
        assert f(e, "data-eps") == per_window[int(e["attrs"]["data-window"])]["privacy_statement"]["eps"]
    assert f(led[-1], "data-cum-eps") == est_h["privacy_statement"]["eps"]
    assert f(led[-1], "data-cum-delta") == est_h["privacy_statement"]["delta"]
    assert f(led[0], "data-cum-eps") == per_window[est_h["windows"][0]]["privacy_statement"]["eps"]
    # per shuffler: every user the analyzer counted, last window the latest
    sh = dom.find("tr", task=h_hex, data_shuffler="0")[0]
    assert int(sh["attrs"]["data-users"]) == est_h["n"] == 2000
    assert int(sh["attrs"]["data-batches"]) == len(ledger_h) == 2
    assert summary["tasks"][[t["task_id"] for t in summary["tasks"]].index(h_hex)]["health"]["per_shuffler"][0][
        "last_window"] == est_h["windows"][-1]
    # per shuffler, as the shuffler reports itself (pushed on each batching round): both batches
    # delivered, nothing pending or retrying, a recent contact
    st = dom.find("tr", task=h_hex, data_status_shuffler="0")[0]["attrs"]
    assert (st["data-reported"], st["data-delivered"], st["data-retrying"], st["data-rejected"],
            st["data-pending-envelopes"], st["data-pending-users"]) == ("1", "2", "0", "0", "0", "0")
    assert 0 <= int(st["data-last-contact"]) < 120
    g_st = dom.find("tr", task=g_hex, data_status_shuffler="0")[0]["attrs"]
    assert (g_st["data-reported"], g_st["data-delivered"]) == ("1", "1")
    # nothing finer than a window on the page: no report ids, batch ids, or client times
    text = " ".join(e["text"] for e in dom.elements[:1])
    for r in ledger_h:
        assert r["batch_id"] not in text


# ---------------------------------------------------------------- shuffledp demo --serve: the options

@pytest.fixture
def no_services(monkeypatch):
    """Starting a service fails the test: the refusals below come before any start."""
    from shuffledp.service import harness

    def started(*a, **k):
        raise AssertionError("a service was started")

    monkeypatch.setattr(harness.Deployment, "__init__", started)


def _demo(args: list[str]):
    from typer.testing import CliRunner

    from shuffledp.cli import _register_commands, app
    _register_commands()
    return CliRunner().invoke(app, ["demo", *args])


def _one_line_error(res, *names: str) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output, res.output
    assert all(n in lines[0] for n in names), res.output
    return lines[0]


@pytest.mark.parametrize("args,names", [
    (["--port", "8080"], ("--port", "--serve")),                    # a port only means something when serving
    (["--serve", "--port", "0"], ("--port",)),
    (["--serve", "--port", "70000"], ("--port",)),
    (["--serve", "--port", "http"], ("--port",)),
    (["--serve", "--n", "0"], ("--n",)),                            # --serve parses; the demo's checks still run
    (["--serve", "--protocol", "foo"], ("--protocol foo",)),
])
def test_demo_serve_refusals(args, names, no_services) -> None:
    _one_line_error(_demo(args), *names)


def test_demo_serve_refuses_a_busy_port(no_services) -> None:
    import socket
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        line = _one_line_error(_demo(["--serve", "--port", str(port)]), f"--port {port}")
    assert "cannot listen" in line


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_demo_serve_leaves_the_dashboard_up_until_interrupted(sig, tmp_path) -> None:
    """``shuffledp demo --serve``: the demo runs, prints the dashboard's address, the page's data
    answers with the task, and SIGINT (Ctrl-C) or SIGTERM stops the services and exits 0."""
    import re
    import signal
    import sys

    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-c", "from shuffledp.cli import main; main()", "demo", "--protocol",
                             "hist_kr", "--n", "2000", "--d", "8", "--serve", "--out", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("dashboard: "):
                break
        m = re.match(r"dashboard: (http://127\.0\.0\.1:\d+)/dashboard/#token=([0-9a-f]+)$", lines[-1].strip())
        assert m, "".join(lines)
        base, token = m.groups()
        r = httpx.get(f"{base}/v1/dashboard/summary", headers={"authorization": f"Bearer {token}"}, timeout=30)
        assert r.status_code == 200
        (task,) = r.json()["tasks"]
        assert task["name"] == "demo-hist_kr" and task["estimate"]["n"] == 2000
        assert httpx.get(f"{base}/v1/dashboard/summary", timeout=30).status_code == 401
        assert httpx.get(f"{base}/dashboard/", timeout=30).status_code == 200
        time.sleep(1.5)
        assert proc.poll() is None, "the services must stay up until interrupted"
        proc.send_signal(getattr(signal, sig))
        rest = proc.communicate(timeout=60)[0]
        assert proc.returncode == 0, "".join(lines) + rest
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{base}/healthz", timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- the data endpoints, without a browser

def test_dashboard_endpoints_in_process(tmp_path) -> None:
    """A task without data: no estimate (and why), an empty ledger; the token is required; the
    shell and its assets are served without it and name no task."""
    from starlette.testclient import TestClient

    from shuffledp.service.analyzer import AnalyzerState, create_analyzer_app
    an = AnalyzerState(f"sqlite:///{tmp_path / 'a.db'}", admin_token="a", collector_token="c", peer_secret=b"p",
                       retention_every=0)
    with TestClient(create_analyzer_app(an)) as client:
        r = client.post("/v1/tasks", headers={"authorization": "Bearer a"}, json={
            "name": "central", "mechanism": {"kind": "central", "name": "histogram", "params": {"d": 5}},
            "target_central": {"eps": 1, "delta": 1e-6}, "min_batch_size_floor": 50,
            "central_mode": {"eps_per_query": 1.0, "query_budget_eps": 2.5}})
        assert r.status_code == 200, r.text
        t = r.json()["task_id"]
        for path in ("/v1/dashboard/summary", f"/v1/dashboard/tasks/{t}/export"):
            assert client.get(path).status_code == 401
            assert client.get(path, headers={"authorization": "Bearer a"}).status_code == 401
        (task,) = client.get("/v1/dashboard/summary", headers={"authorization": "Bearer c"}).json()["tasks"]
        assert task["name"] == "central" and task["estimate"] is None and "budget" in task["estimate_error"]
        assert task["ledger"] == [] and task["windows"] == []
        assert task["budget"] == {"spent": 0.0, "total": 2.5, "eps_per_query": 1.0, "queries": 0}
        assert task["health"]["batches"] == 0 and task["health"]["per_shuffler"][0]["last_window"] is None
        assert client.get(f"/v1/dashboard/tasks/{t}/export?format=xml",
                          headers={"authorization": "Bearer c"}).status_code == 400
        csv = client.get(f"/v1/dashboard/tasks/{t}/export?format=csv", headers={"authorization": "Bearer c"})
        assert csv.status_code == 200 and csv.text.strip() == "task,window,item,estimate,std_error,ci_low,ci_high,n," \
                                                              "eps,delta,privacy"
        assert client.get("/dashboard", follow_redirects=False).status_code == 307
        page = client.get("/dashboard/")
        assert page.status_code == 200 and "central" not in page.text and page.headers["content-type"].startswith(
            "text/html")
        for asset, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
            a = client.get(f"/dashboard/{asset}")
            assert a.status_code == 200 and a.headers["content-type"].startswith(kind)
            assert "cdn" not in a.text.lower() and "https://" not in a.text


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_dashboard_never_spends_a_central_query_budget(tmp_path) -> None:
    """A central-mode task: the dashboard shows its batches' shuffle guarantee per window and the
    budget spent, and never queries (the budget stays untouched however often the page refreshes)."""
    with Deployment(tmp_path, tick_seconds=3600) as dep:
        t = dep.create_task({"name": "central", "mechanism": {"kind": "central", "name": "histogram",
                                                              "params": {"d": 5}},
                             "target_central": {"eps": 1, "delta": 1e-6}, "min_batch_size_floor": 50,
                             "central_mode": {"eps_per_query": 1.0, "query_budget_eps": 2.5}})["task_id"]
        _, _, _, envs = sealed(dep, t, np.repeat(np.arange(5), [100, 50, 30, 20, 0]))
        send(dep, t, envs)
        dep.tick()
        deadline = time.monotonic() + 60
        while dep.analyzer_stats(t)["received"] < 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        url = f"{dep.analyzer.url}/v1/dashboard/summary"
        for _ in range(3):
            (task,) = dep.http.get(url, headers=dep.collector()).json()["tasks"]
        assert task["budget"]["spent"] == 0.0 and task["budget"]["queries"] == 0 and task["estimate"] is None
        assert task["health"]["valid"] == 200 and len(task["ledger"]) == 1
        est = dep.estimates(t).json()                        # one query, from the collector
        (task,) = dep.http.get(url, headers=dep.collector()).json()["tasks"]
        assert task["budget"]["spent"] == 1.0 and task["budget"]["queries"] == 1
        assert task["ledger"][0]["cumulative_statement"] == est["privacy_statement_shuffle"]


# ---------------------------------------------------------------- shuffler health pushes

def test_shuffler_health_push_is_signed_validated_and_bounded(tmp_path) -> None:
    """``PUT /v1/shuffler-health``: refused unsigned (401) or malformed (400, nothing kept); an
    unknown task or an index outside the deployment is dropped; a good push reaches the summary."""
    import json

    from starlette.testclient import TestClient

    from shuffledp.service.analyzer import AnalyzerState, create_analyzer_app
    from shuffledp.service.http_common import sign_request
    now = [1000.0]
    an = AnalyzerState(f"sqlite:///{tmp_path / 'a.db'}", admin_token="a", collector_token="c", peer_secret=b"p",
                       retention_every=1e9, clock=lambda: now[0])
    with TestClient(create_analyzer_app(an)) as client:
        t = client.post("/v1/tasks", headers={"authorization": "Bearer a"}, json={
            "name": "murs", "protocol": {"name": "murs", "epsilon": 1.0, "delta": 1e-6, "n": 10000,
                                         "params": {"d": 4, "mode": "parallel", "shufflers": 2}}}).json()["task_id"]

        def push(doc, secret=b"p"):
            body = json.dumps(doc).encode()
            return client.put("/v1/shuffler-health", content=body, headers={
                "authorization": sign_request(secret, "PUT", "/v1/shuffler-health", body)})

        entry = {"task_id": t, "shuffler": 1, "pending_envelopes": 7, "pending_users": 3,
                 "batches": {"ready": 1, "retrying": 2, "rejected": 0, "delivered": 5}}
        assert push({"tasks": [entry]}, secret=b"wrong").status_code == 401
        assert client.put("/v1/shuffler-health", content=b"{}").status_code == 401
        for bad in ({"tasks": "x"}, {"tasks": [{**entry, "pending_users": -1}]},
                    {"tasks": [{**entry, "shuffler": True}]}, {"tasks": [{**entry, "batches": []}]},
                    {"tasks": [{**entry, "task_id": "zz"}]}, {"nope": 1}):
            r = push(bad)
            assert r.status_code == 400 and "health report" in r.json()["detail"], bad
        assert an.shuffler_health == {}
        r = push({"tasks": [entry, {**entry, "shuffler": 2}, {**entry, "task_id": "00" * 32}]})
        assert r.status_code == 200 and r.json() == {"kept": 1, "dropped": 2}
        assert len(an.shuffler_health) == 1
        now[0] += 42.7
        (task,) = client.get("/v1/dashboard/summary", headers={"authorization": "Bearer c"}).json()["tasks"]
        s0, s1 = task["health"]["per_shuffler"]
        assert s0["reported"] is False and s0["last_contact_s"] is None
        assert (s1["reported"], s1["pending_envelopes"], s1["pending_users"], s1["last_contact_s"]) == (True, 7, 3, 42)
        assert s1["shuffler_batches"] == {"forming": 0, "ready": 1, "retrying": 2, "rejected": 0, "delivered": 5}


def test_shuffler_reports_its_pending_counts_per_analyzer(tmp_path) -> None:
    """The shuffler's own report: pending envelopes/users and batches by state, per analyzer URL."""
    from shuffledp.service.config import create_task_config
    from shuffledp.service.shuffler import ShufflerState
    sh = ShufflerState(f"sqlite:///{tmp_path / 's.db'}", admin_token="a", peer_secret=b"p", auto=False)
    cfg = create_task_config(name="g", mechanism={"kind": "frequency", "name": "grr", "epsilon": 2.0,
                                                  "params": {"d": 4}}, target_central={"eps": 1.0, "delta": 1e-6})
    sh.register(cfg, "http://127.0.0.1:9/", [1], None)
    (url, entries), = sh.health_report().items()
    assert url == "http://127.0.0.1:9" and entries == [{
        "task_id": cfg.task_id.hex(), "shuffler": 0, "pending_envelopes": 0, "pending_users": 0,
        "batches": {"forming": 0, "ready": 0, "retrying": 0, "rejected": 0, "delivered": 0}}]
    assert sh._push_health() == 0   # nothing listens there: logged, batching goes on
