"""The analyzer's operator dashboard: one HTML page and the JSON it draws.

Routes added by :func:`install_dashboard`:

- ``GET /dashboard/`` (and ``/dashboard/app.js``, ``/dashboard/style.css``) — the page shell, static
  files shipped in the package (``dashboard_static/``); it holds no data. The page asks for the
  collector token (or takes it from the URL fragment ``#token=...``, which never reaches the
  server), keeps it in ``sessionStorage`` and sends it as ``Authorization: Bearer``.
- ``GET /v1/dashboard/summary`` (collector bearer) — every task: configuration, target and stated
  guarantee, the current estimate with its 95% intervals and privacy statement, the estimate of
  each window (time series), the privacy ledger per window and cumulative, and analyzer-side
  health (batches, reports received/valid, rejections by reason, per shuffler index) and each
  shuffler's own last health push (pending envelopes and users, batches ready / retrying /
  rejected / delivered, seconds since the push; ``PUT /v1/shuffler-health``, signed).
- ``GET /v1/dashboard/tasks/{t}/export?format=json|csv`` (collector bearer) — the same estimates
  as a download.

Everything shown is a post-processing of released batches and of the analyzer's own answers:
nothing finer than a window (batch window, crowd) reaches the page, no report, no report id, no
client time. A central-mode task's estimate is not queried here (every query spends its budget);
its ledger shows the shuffle guarantee of its batches and the query budget spent.
"""

from __future__ import annotations

import csv
import io
import json
import math
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import RedirectResponse
from sqlalchemy import func, select

from .http_common import Problem, check_bearer, task_id_from_hex

__all__ = ["install_dashboard", "dashboard_summary", "task_summary", "export_rows", "MAX_SERIES_WINDOWS"]

#: windows shown in a task's time series and ledger (the latest ones)
MAX_SERIES_WINDOWS = 48

_STATIC = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
           "style.css": "text/css; charset=utf-8"}
#: the page loads nothing but its own files and talks only to its own origin
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def _static(name: str) -> bytes:
    return resources.files("shuffledp.service").joinpath("dashboard_static", name).read_bytes()


def _statement(st: Any) -> dict:
    from .analyzer import _statement_json
    return _statement_json(st)


def _try_estimates(state: Any, task_id: bytes, **kw: Any) -> tuple[dict | None, str | None]:
    from .analyzer import estimates
    try:
        return estimates(state, task_id, **kw), None
    except Problem as e:
        return None, e.detail


def _estimate_view(e: dict) -> dict:
    """The fields of an estimates answer the page draws (no per-release internals)."""
    keys = ("n", "kind", "estimate", "std_error", "ci_level", "ci_low", "ci_high", "privacy_statement",
            "meets_target", "windows", "client_windows", "batches", "labels")
    return {k: e[k] for k in keys if k in e}


def _guarantees(cfg: Any) -> tuple[dict, dict | None]:
    """(target, stated guarantee) of a task: a release of its configured n users (protocol tasks, as
    :func:`~shuffledp.service.analyzer.protocol_statement` states it), or a local-oracle task's
    per-report guarantee of a batch of ``min_batch_size`` valid reports."""
    try:
        if cfg.protocol is not None:
            p = cfg.protocol_object()
            from .analyzer import protocol_statement
            target = {"eps": cfg.protocol["epsilon"], "delta": cfg.protocol["delta"], "n": cfg.protocol["n"]}
            return target, _statement(protocol_statement(cfg, p, int(cfg.protocol["n"]), 0))
        st, _ = cfg.batch_privacy(cfg.min_batch_size)
        return dict(cfg.target_central), _statement(st)
    except Exception:  # noqa: BLE001 - a statement the accountant cannot give is shown as absent
        return dict(cfg.target_central or {}), None


def _health(batch_rows: list) -> dict:
    """Analyzer-side counts from the stored batch results: totals, rejections by reason, per shuffler."""
    rejected: dict[str, int] = {}
    received = valid = 0
    for (result,) in batch_rows:
        r = json.loads(result)
        received += int(r.get("received", 0))
        valid += int(r.get("valid", 0))
        for k, v in (r.get("rejected") or {}).items():
            rejected[k] = rejected.get(k, 0) + int(v)
    return {"batches": len(batch_rows), "received": received, "valid": valid, "rejected": rejected}


def _per_shuffler(cfg: Any, ledger: list, health: dict | None = None, task_id: bytes = b"",
                  now: float = 0.0) -> list[dict]:
    """Per shuffler index: what the analyzer received from it (ledger) and its last health push.

    ``reported`` is False until the shuffler has pushed its counts (pending envelopes and users not
    yet batched, batches by state); ``last_contact_s`` is the whole seconds since that push.
    """
    per: dict[int, dict] = {}
    n_sh = cfg.n_shufflers if cfg.protocol is not None else 1

    def blank(j: int) -> dict:
        return {"shuffler": j, "batches": 0, "envelopes": 0, "users": 0, "last_window": None, "reported": False,
                "pending_envelopes": None, "pending_users": None, "shuffler_batches": None, "last_contact_s": None}

    for j in range(n_sh):
        per[j] = blank(j)
    for r in ledger:
        j = int(r.shuffler or 0)
        s = per.setdefault(j, blank(j))
        s["batches"] += 1
        s["envelopes"] += int(r.n_released)
        s["users"] += int(r.n_users) if r.n_users is not None else int(r.n_released)
        s["last_window"] = int(r.window) if s["last_window"] is None else max(s["last_window"], int(r.window))
    for (t, j), h in (health or {}).items():
        if t == task_id and j in per:
            per[j].update(reported=True, pending_envelopes=h["pending_envelopes"], pending_users=h["pending_users"],
                          shuffler_batches=dict(h["batches"]),
                          last_contact_s=max(0, int(now - h["received_at"])))
    return [per[j] for j in sorted(per)]


def _central_ledger(cfg: Any, ledger: list, windows: list[int]) -> list[dict]:
    """Shuffle guarantee of a central-mode task's batches per window and cumulative (no query spent)."""
    from .analyzer import _ledger_windows, compose_over_client_windows

    def items(rows: list) -> list:
        return [(_ledger_windows(cfg, r), math.inf if r.eps_central < 0 else r.eps_central, r.delta) for r in rows]

    out = []
    for w in windows:
        st_w, _ = compose_over_client_windows(cfg, items([r for r in ledger if int(r.window) == w]), "batch")
        st_c, _ = compose_over_client_windows(cfg, items([r for r in ledger if int(r.window) <= w]), "batch")
        out.append({"window": w, "batches": sum(int(r.window) == w for r in ledger),
                    "window_statement": _statement(st_w), "cumulative_statement": _statement(st_c)})
    return out


def task_summary(state: Any, task_id: bytes) -> dict:
    """Everything the dashboard shows of one task (see the module docstring)."""
    from .storage import analyzer_batches, analyzer_ledger, analyzer_queries
    cfg = state.task(task_id)
    with state.engine.connect() as c:
        ledger = c.execute(select(analyzer_ledger).where(analyzer_ledger.c.task_id == task_id)).all()
        batch_rows = c.execute(select(analyzer_batches.c.result).where(analyzer_batches.c.task_id == task_id)).all()
        spent = float(c.execute(select(func.coalesce(func.sum(analyzer_queries.c.eps), 0.0)).where(
            analyzer_queries.c.task_id == task_id)).scalar_one())
        n_queries = int(c.execute(select(func.count()).select_from(analyzer_queries).where(
            analyzer_queries.c.task_id == task_id)).scalar_one())
    target, stated = _guarantees(cfg)
    windows = sorted({int(r.window) for r in ledger})
    shown = windows[-MAX_SERIES_WINDOWS:]
    out: dict[str, Any] = {
        "task_id": task_id.hex(), "name": cfg.name,
        "protocol": cfg.protocol, "mechanism": None if cfg.protocol is not None else cfg.mechanism,
        "target": target, "stated_guarantee": stated, "min_batch_size": cfg.min_batch_size,
        "batch_window": cfg.batch_window, "time_precision": cfg.time_precision,
        "crowds": [c.hex() for c in cfg.crowds], "windows": windows,
        "client_policy": {"max_reports_per_window": cfg.client_policy.max_reports_per_window,
                          "max_reports_per_day": cfg.client_policy.max_reports_per_day},
        "central_mode": cfg.central_mode,
        "health": {**_health(batch_rows), "per_shuffler": _per_shuffler(
            cfg, ledger, getattr(state, "shuffler_health", None), task_id, state.clock())},
    }
    if cfg.central_mode:
        out["estimate"], out["estimate_error"] = None, ("central mode: every query spends the query budget; "
                                                        "query /v1/tasks/{t}/estimates to release one")
        out["series"] = []
        out["ledger"] = _central_ledger(cfg, ledger, shown)
        out["budget"] = {"spent": spent, "total": float(cfg.central_mode["query_budget_eps"]),
                         "eps_per_query": float(cfg.central_mode["eps_per_query"]), "queries": n_queries}
        return out
    est, err = _try_estimates(state, task_id)
    out["estimate"] = _estimate_view(est) if est is not None else None
    out["estimate_error"] = err
    series, led = [], []
    for w in shown:
        e_w, err_w = _try_estimates(state, task_id, from_window=w, to_window=w)
        e_c, _ = _try_estimates(state, task_id, to_window=w)
        if e_w is not None:
            series.append({"window": w, **_estimate_view(e_w)})
        led.append({"window": w, "batches": sum(int(r.window) == w for r in ledger),
                    "users": e_w["n"] if e_w is not None else None,
                    "window_statement": e_w["privacy_statement"] if e_w is not None else None,
                    "cumulative_statement": e_c["privacy_statement"] if e_c is not None else None,
                    "waiting": err_w})
    out["series"] = series if len(series) > 1 else []
    out["ledger"] = led
    out["budget"] = None
    return out


def dashboard_summary(state: Any) -> dict:
    from .storage import analyzer_tasks
    with state.engine.connect() as c:
        tids = [bytes(r[0]) for r in c.execute(select(analyzer_tasks.c.task_id))]
    tasks = sorted((task_summary(state, t) for t in tids), key=lambda t: (t["name"], t["task_id"]))
    return {"tasks": tasks}


def export_rows(summary: dict) -> list[dict]:
    """One row per (scope, item): the overall estimate and each window's, with the statement's text."""
    rows = []
    scopes = ([("all", summary["estimate"])] if summary.get("estimate") else []) + \
        [(str(s["window"]), s) for s in summary.get("series", [])]
    for scope, e in scopes:
        st = e["privacy_statement"]
        names = e.get("labels") or range(len(e["estimate"]))   # a discovery names its items
        for i, (v, item) in enumerate(zip(e["estimate"], names)):
            rows.append({"task": summary["name"], "window": scope, "item": item, "estimate": v,
                         "std_error": e["std_error"][i], "ci_low": e["ci_low"][i], "ci_high": e["ci_high"][i],
                         "n": e["n"], "eps": st["eps"], "delta": st["delta"], "privacy": st["text"]})
    return rows


def install_dashboard(app: FastAPI, state: Any) -> None:
    """Add the dashboard's page and its data endpoints to the analyzer app."""

    def static(name: str) -> Response:
        return Response(_static(name), media_type=_STATIC[name],
                        headers={"Content-Security-Policy": _CSP, "Cache-Control": "no-cache",
                                 "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"})

    @app.get("/dashboard", include_in_schema=False)
    def dashboard_redirect() -> Response:
        return RedirectResponse("/dashboard/", status_code=307)

    @app.get("/dashboard/", include_in_schema=False)
    def dashboard_page() -> Response:
        return static("index.html")

    @app.get("/dashboard/app.js", include_in_schema=False)
    def dashboard_js() -> Response:
        return static("app.js")

    @app.get("/dashboard/style.css", include_in_schema=False)
    def dashboard_css() -> Response:
        return static("style.css")

    @app.get("/v1/dashboard/summary")
    def summary(request: Request) -> Response:
        check_bearer(state.collector_token, request.headers.get("authorization"))
        body = json.dumps(dashboard_summary(state), allow_nan=False)
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    @app.get("/v1/dashboard/tasks/{task_hex}/export")
    def export(task_hex: str, request: Request, format: str = "json") -> Response:
        check_bearer(state.collector_token, request.headers.get("authorization"))
        if format not in ("json", "csv"):
            raise Problem(400, "invalidRequest", "format must be json or csv")
        s = task_summary(state, task_id_from_hex(task_hex))
        rows = export_rows(s)
        # the header is Latin-1 and the filename a quoted-string: keep a safe ASCII subset of the task's
        # name (any string up to 200 characters; e.g. non-Latin-1 characters made the export fail with 500)
        safe = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "_" for ch in s["name"])
        name = f"{safe}-{s['task_id'][:12]}"
        headers = {"Cache-Control": "no-store", "Content-Disposition": f'attachment; filename="{name}.{format}"'}
        if format == "json":
            return Response(json.dumps({"task_id": s["task_id"], "name": s["name"], "estimate": s["estimate"],
                                        "series": s["series"], "ledger": s["ledger"], "rows": rows},
                                       allow_nan=False), media_type="application/json", headers=headers)
        buf = io.StringIO()
        cols = ["task", "window", "item", "estimate", "std_error", "ci_low", "ci_high", "n", "eps", "delta", "privacy"]
        w = csv.DictWriter(buf, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
        return Response(buf.getvalue(), media_type="text/csv; charset=utf-8", headers=headers)
