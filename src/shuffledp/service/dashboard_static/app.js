// shuffledp analyzer dashboard: fetches /v1/dashboard/summary with the collector token and draws it.
// No third-party code; charts are inline SVG. The token comes from the form or from the URL
// fragment (#token=...; fragments are never sent to the server) and is kept in sessionStorage.
"use strict";

const KEY = "shuffledp-collector-token";
const REFRESH_MS = 5000;
const MAX_BARS = 128;
const TOP_ITEMS = 10;
const SVGNS = "http://www.w3.org/2000/svg";

let timer = null;

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") el.className = v; else el.setAttribute(k, v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined) continue;
    el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return el;
}

function s(tag, attrs, ...kids) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, v);
  for (const k of kids.flat()) if (k !== null && k !== undefined) el.append(k instanceof Node ? k : String(k));
  return el;
}

function fmt(x, p = 4) {
  if (x === null || x === undefined) return "–";
  if (typeof x !== "number") return String(x);
  if (Number.isInteger(x) && Math.abs(x) < 1e15) return x.toLocaleString("en-US");
  if (x !== 0 && (Math.abs(x) < 1e-3 || Math.abs(x) >= 1e6)) return x.toExponential(2);
  return x.toPrecision(p);
}

function epsText(st) {
  if (!st) return "no statement";
  return st.eps === null ? "no guarantee" : `(ε=${fmt(st.eps)}, δ=${fmt(st.delta, 3)})`;
}

function privacy(st, label) {
  const box = h("div", {class: "privacy", "data-eps": st ? String(st.eps) : null,
                        "data-delta": st ? String(st.delta) : null});
  box.append(h("b", {}, (label || "privacy") + ": "), st ? st.text : "no statement");
  return box;
}

function token() { return sessionStorage.getItem(KEY) || ""; }

function setStatus(text, error) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = error ? "error" : "";
}

async function api(path) {
  const r = await fetch(path, {headers: {Authorization: "Bearer " + token()}, cache: "no-store"});
  if (r.status === 401) throw new Error("the analyzer refused the token (401)");
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r;
}

function describe(t) {
  if (t.protocol) {
    const p = t.protocol;
    const params = Object.entries(p.params || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ");
    return `protocol ${p.name}(${params})`;
  }
  const m = t.mechanism || {};
  const params = Object.entries(m.params || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ");
  return `${m.kind || ""} ${m.name || ""}(${params})${m.epsilon !== undefined ? ", ε₀=" + fmt(m.epsilon) : ""}` +
         (t.central_mode ? " + central noise" : "");
}

function target(t) {
  const g = t.target || {};
  return `(ε=${fmt(g.eps)}, δ=${fmt(g.delta, 3)})` + (g.n !== undefined ? ` for n=${fmt(g.n)}` : "");
}

function windowsText(t) {
  if (!t.windows.length) return "none yet";
  const a = t.windows[0], b = t.windows[t.windows.length - 1];
  return `${t.windows.length} (${a === b ? a : a + "…" + b}) × ${fmt(t.batch_window)} s`;
}

function renderTasks(tasks) {
  const tb = document.querySelector("#tasks tbody");
  tb.replaceChildren(...tasks.map(t => h("tr", {"data-task": t.task_id},
    h("td", {class: "name"}, h("a", {href: "#task-" + t.task_id}, t.name),
      h("div", {class: "muted"}, t.task_id.slice(0, 16) + "…")),
    h("td", {class: "kind"}, describe(t)),
    h("td", {class: "target"}, target(t)),
    h("td", {class: "stated", "data-eps": t.stated_guarantee ? String(t.stated_guarantee.eps) : null},
      t.stated_guarantee ? epsText(t.stated_guarantee) + " " + t.stated_guarantee.model : "–"),
    h("td", {class: "num"}, fmt(t.min_batch_size)),
    h("td", {class: "windows", "data-count": String(t.windows.length)}, windowsText(t)),
    h("td", {class: "crowds"}, t.crowds.length ? t.crowds.map(c => c || "(default)").join(", ") : "(default)"))));
  if (!tasks.length) tb.append(h("tr", {}, h("td", {colspan: 7, class: "muted"}, "no tasks")));
}

// an item's name: its label where the estimate names its items (a discovery), else its index
function itemName(e, i) { return e.labels ? String(e.labels[i]) : String(i); }

function barChart(e) {
  const d = Math.min(e.estimate.length, MAX_BARS);
  const W = 640, H = 240, L = 48, R = 8, T = 10, B = 26;
  let lo = 0, hi = 0;
  for (let i = 0; i < d; i++) { lo = Math.min(lo, e.ci_low[i]); hi = Math.max(hi, e.ci_high[i]); }
  if (hi === lo) hi = lo + 1;
  const y = v => T + (H - T - B) * (hi - v) / (hi - lo);
  const bw = (W - L - R) / d;
  const svg = s("svg", {class: "chart histogram", viewBox: `0 0 ${W} ${H}`, role: "img",
                        "aria-label": "estimate per item with 95% intervals", "data-items": String(d)});
  for (const v of [hi, (hi + lo) / 2, lo, 0]) {
    svg.append(s("line", {class: "axis", x1: L - 4, x2: L, y1: y(v), y2: y(v)}),
               s("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, fmt(v, 3)));
  }
  svg.append(s("line", {class: "axis", x1: L, x2: W - R, y1: y(0), y2: y(0)}),
             s("line", {class: "axis", x1: L, x2: L, y1: T, y2: H - B}));
  const step = Math.ceil(d / 16);
  for (let i = 0; i < d; i++) {
    const v = e.estimate[i], x = L + i * bw;
    const data = {"data-item": itemName(e, i), "data-value": String(v), "data-low": String(e.ci_low[i]),
                  "data-high": String(e.ci_high[i])};
    svg.append(s("rect", {class: "bar", x: x + bw * 0.15, width: bw * 0.7, y: Math.min(y(v), y(0)),
                          height: Math.abs(y(v) - y(0)), ...data},
                 s("title", {}, `item ${itemName(e, i)}: ${fmt(v)} [${fmt(e.ci_low[i])}, ${fmt(e.ci_high[i])}]`)));
    const cx = x + bw / 2, cap = Math.min(6, bw * 0.3);
    svg.append(s("line", {class: "ci", x1: cx, x2: cx, y1: y(e.ci_low[i]), y2: y(e.ci_high[i]), ...data}),
               s("line", {class: "ci cap", x1: cx - cap, x2: cx + cap, y1: y(e.ci_low[i]), y2: y(e.ci_low[i])}),
               s("line", {class: "ci cap", x1: cx - cap, x2: cx + cap, y1: y(e.ci_high[i]), y2: y(e.ci_high[i])}));
    if (i % step === 0) svg.append(s("text", {x: cx, y: H - B + 14, "text-anchor": "middle"}, itemName(e, i)));
  }
  return svg;
}

function topTable(e) {
  const order = e.estimate.map((v, i) => i).sort((a, b) => e.estimate[b] - e.estimate[a]).slice(0, TOP_ITEMS);
  const many = e.estimate.length > 1;
  return h("div", {class: "scroll"}, h("table", {class: "top-items"},
    h("thead", {}, h("tr", {}, many ? h("th", {}, "item") : null, h("th", {class: "num"}, "estimate"),
      h("th", {class: "num"}, "std err"), h("th", {class: "num"}, `${Math.round(100 * e.ci_level)}% interval`),
      h("th", {}, "privacy"))),
    h("tbody", {}, order.map(i => h("tr", {"data-item": itemName(e, i), "data-value": String(e.estimate[i])},
      many ? h("td", {}, "item " + itemName(e, i)) : null, h("td", {class: "num"}, fmt(e.estimate[i])),
      h("td", {class: "num"}, fmt(e.std_error[i])),
      h("td", {class: "num"}, `[${fmt(e.ci_low[i])}, ${fmt(e.ci_high[i])}]`),
      h("td", {class: "muted"}, epsText(e.privacy_statement)))))));
}

function seriesChart(series, item) {
  const W = 640, H = 200, L = 48, R = 8, T = 10, B = 26, k = series.length;
  let lo = Infinity, hi = -Infinity;
  for (const p of series) { lo = Math.min(lo, p.ci_low[item]); hi = Math.max(hi, p.ci_high[item]); }
  if (hi === lo) { hi += 1; lo -= 1; }
  const x = i => L + (W - L - R) * (k === 1 ? 0.5 : i / (k - 1));
  const y = v => T + (H - T - B) * (hi - v) / (hi - lo);
  const svg = s("svg", {class: "chart series-chart", viewBox: `0 0 ${W} ${H}`, role: "img",
                        "aria-label": `item ${item} per window with 95% intervals`, "data-points": String(k)});
  const up = series.map((p, i) => `${x(i)},${y(p.ci_high[item])}`);
  const down = series.map((p, i) => `${x(i)},${y(p.ci_low[item])}`).reverse();
  svg.append(s("polygon", {class: "band", points: up.concat(down).join(" ")}),
             s("polyline", {class: "series", points: series.map((p, i) => `${x(i)},${y(p.estimate[item])}`).join(" ")}),
             s("line", {class: "axis", x1: L, x2: L, y1: T, y2: H - B}),
             s("line", {class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B}));
  for (const v of [hi, lo]) svg.append(s("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, fmt(v, 3)));
  const step = Math.ceil(k / 10);
  series.forEach((p, i) => {
    svg.append(s("circle", {class: "point", cx: x(i), cy: y(p.estimate[item]), r: 3, fill: "currentColor",
                            "data-window": String(p.window), "data-value": String(p.estimate[item]),
                            "data-low": String(p.ci_low[item]), "data-high": String(p.ci_high[item])},
                 s("title", {}, `window ${p.window}: ${fmt(p.estimate[item])} ${epsText(p.privacy_statement)}`)));
    const anchor = k === 1 ? "middle" : i === 0 ? "start" : i === k - 1 ? "end" : "middle";
    if (i % step === 0 || i === k - 1) svg.append(s("text", {x: x(i), y: H - B + 14, "text-anchor": anchor}, String(p.window)));
  });
  return svg;
}

function ledgerTable(t) {
  return h("div", {class: "scroll"}, h("table", {class: "ledger"},
    h("thead", {}, h("tr", {}, h("th", {class: "num"}, "window"), h("th", {class: "num"}, "batches"),
      h("th", {class: "num"}, "users"), h("th", {class: "num"}, "ε window"), h("th", {class: "num"}, "δ window"),
      h("th", {class: "num"}, "ε cumulative"), h("th", {class: "num"}, "δ cumulative"), h("th", {}, "model"))),
    h("tbody", {}, t.ledger.map(r => {
      const w = r.window_statement, c = r.cumulative_statement;
      return h("tr", {"data-window": String(r.window), "data-eps": w ? String(w.eps) : null,
                      "data-cum-eps": c ? String(c.eps) : null, "data-cum-delta": c ? String(c.delta) : null},
        h("td", {class: "num"}, String(r.window)), h("td", {class: "num"}, fmt(r.batches)),
        h("td", {class: "num"}, r.users === null || r.users === undefined ? "–" : fmt(r.users)),
        h("td", {class: "num"}, w ? (w.eps === null ? "∞" : fmt(w.eps)) : (r.waiting ? "waiting" : "–")),
        h("td", {class: "num"}, w ? fmt(w.delta, 3) : "–"),
        h("td", {class: "num"}, c ? (c.eps === null ? "∞" : fmt(c.eps)) : "–"),
        h("td", {class: "num"}, c ? fmt(c.delta, 3) : "–"),
        h("td", {class: "muted"}, c ? c.model : ""));
    }))));
}

function healthPanel(t) {
  const hl = t.health;
  const rej = Object.entries(hl.rejected).sort();
  return h("div", {class: "health", "data-batches": String(hl.batches), "data-received": String(hl.received),
                   "data-valid": String(hl.valid)},
    h("div", {class: "scroll"}, h("table", {class: "health-totals"},
      h("thead", {}, h("tr", {}, h("th", {class: "num"}, "batches"), h("th", {class: "num"}, "received"),
        h("th", {class: "num"}, "valid"), h("th", {class: "num"}, "rejected"))),
      h("tbody", {}, h("tr", {}, h("td", {class: "num"}, fmt(hl.batches)), h("td", {class: "num"}, fmt(hl.received)),
        h("td", {class: "num"}, fmt(hl.valid)), h("td", {class: "num"}, fmt(hl.received - hl.valid)))))),
    h("h3", {}, "rejected, by reason"),
    h("div", {class: "scroll"}, h("table", {class: "rejections"},
      h("tbody", {}, rej.length ? rej.map(([k, v]) => h("tr", {},
        h("td", {}, k.replace(/_/g, " ")),
        h("td", {class: "num " + (v ? "warn" : ""), "data-reason": k, "data-count": String(v)}, fmt(v)))) :
        h("tr", {}, h("td", {class: "muted"}, "no batch yet"))))),
    h("h3", {}, "per shuffler (as received by the analyzer)"),
    h("div", {class: "scroll"}, h("table", {class: "shufflers"},
      h("thead", {}, h("tr", {}, h("th", {class: "num"}, "shuffler"), h("th", {class: "num"}, "batches"),
        h("th", {class: "num"}, "envelopes"), h("th", {class: "num"}, "users"), h("th", {class: "num"}, "last window"))),
      h("tbody", {}, hl.per_shuffler.map(p => h("tr", {"data-shuffler": String(p.shuffler),
                                                       "data-batches": String(p.batches), "data-users": String(p.users)},
        h("td", {class: "num"}, String(p.shuffler)), h("td", {class: "num"}, fmt(p.batches)),
        h("td", {class: "num"}, fmt(p.envelopes)), h("td", {class: "num"}, fmt(p.users)),
        h("td", {class: "num " + (p.batches ? "" : "warn")}, p.last_window === null ? "nothing yet" :
          String(p.last_window))))))),
    h("h3", {}, "per shuffler (as each shuffler reports itself)"),
    h("div", {class: "scroll"}, h("table", {class: "shuffler-status"},
      h("thead", {}, h("tr", {}, h("th", {class: "num"}, "shuffler"), h("th", {class: "num", title: "envelopes not yet batched"}, "pending"),
        h("th", {class: "num", title: "users (markers) not yet batched"}, "users"), h("th", {class: "num"}, "ready"), h("th", {class: "num"}, "retrying"),
        h("th", {class: "num"}, "rejected"), h("th", {class: "num"}, "delivered"), h("th", {class: "num", title: "since the shuffler's last health report"}, "contact"))),
      h("tbody", {}, hl.per_shuffler.map(p => {
        const b = p.shuffler_batches || {};
        const n = v => p.reported ? fmt(v) : "–";
        const stale = !p.reported || p.last_contact_s > 60;
        return h("tr", {"data-status-shuffler": String(p.shuffler), "data-reported": p.reported ? "1" : "0",
                        "data-pending-envelopes": String(p.pending_envelopes), "data-pending-users": String(p.pending_users),
                        "data-retrying": String(b.retrying), "data-rejected": String(b.rejected),
                        "data-delivered": String(b.delivered), "data-last-contact": String(p.last_contact_s)},
          h("td", {class: "num"}, String(p.shuffler)), h("td", {class: "num"}, n(p.pending_envelopes)),
          h("td", {class: "num"}, n(p.pending_users)), h("td", {class: "num"}, n(b.ready)),
          h("td", {class: "num " + (b.retrying ? "warn" : "")}, n(b.retrying)),
          h("td", {class: "num " + (b.rejected ? "warn" : "")}, n(b.rejected)), h("td", {class: "num"}, n(b.delivered)),
          h("td", {class: "num " + (stale ? "warn" : "")}, p.reported ? `${p.last_contact_s} s` : "never"));
      })))));
}

async function download(t, format) {
  try {
    const r = await api(`/v1/dashboard/tasks/${t.task_id}/export?format=${format}`);
    const url = URL.createObjectURL(await r.blob());
    const a = h("a", {href: url, download: `${t.name}-${t.task_id.slice(0, 12)}.${format}`});
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    setStatus(err.message, true);
  }
}

function renderTask(t) {
  const e = t.estimate;
  const est = h("section", {class: "panel estimate"}, h("h3", {}, "Estimate"));
  if (e) {
    est.append(h("p", {class: "muted"}, `${e.kind}, n=${fmt(e.n)} over ${e.windows.length} window(s), ` +
                 `${e.batches} batch(es); ${Math.round(100 * e.ci_level)}% intervals` +
                 (e.meets_target === undefined ? "" : e.meets_target ? "; meets its target" :
                  "; does not meet its single-release target")),
               privacy(e.privacy_statement, "privacy of these numbers"));
    if (e.estimate.length > 1) {
      est.append(barChart(e));
      if (e.estimate.length > MAX_BARS) est.append(h("p", {class: "muted"}, `first ${MAX_BARS} items drawn`));
      est.append(h("h3", {}, `top ${Math.min(TOP_ITEMS, e.estimate.length)} items`));
    }
    est.append(topTable(e));
    const dl = h("div", {class: "downloads"}, h("span", {class: "muted"}, "download:"));
    for (const f of ["csv", "json"]) {
      const b = h("button", {type: "button", "data-format": f}, f.toUpperCase());
      b.addEventListener("click", () => download(t, f));
      dl.append(b);
    }
    est.append(dl);
  } else {
    est.append(h("p", {class: "muted no-estimate"}, t.estimate_error || "no estimate yet"));
  }
  if (e && e.labels && t.series && t.series.length > 1) {
    est.append(h("p", {class: "muted series-note"}, "no series across windows: each window's release finds " +
                 "its own items (the estimate above finds them on all windows' reports); per-window rows are in the CSV"));
  } else if (t.series && t.series.length > 1) {
    const item = e ? e.estimate.indexOf(Math.max(...e.estimate)) : 0;
    est.append(h("h3", {}, e && e.estimate.length > 1 ? `item ${item} across windows` : "across windows"),
               seriesChart(t.series, item),
               h("p", {class: "muted"}, "each point: that window's release alone; its privacy is in the ledger"));
  }
  const led = h("section", {class: "panel ledger-panel"}, h("h3", {}, "Privacy ledger"), ledgerTable(t));
  if (t.budget) {
    led.append(h("p", {class: "budget", "data-spent": String(t.budget.spent), "data-total": String(t.budget.total)},
      `central query budget: ε ${fmt(t.budget.spent)} of ${fmt(t.budget.total)} spent ` +
      `(${t.budget.queries} quer${t.budget.queries === 1 ? "y" : "ies"} at ε=${fmt(t.budget.eps_per_query)})`));
  }
  led.append(h("p", {class: "muted"}, `stated per release: ${t.stated_guarantee ? t.stated_guarantee.text : "–"}`));
  const health = h("section", {class: "panel health-panel"}, h("h3", {}, "Health"), healthPanel(t));
  return h("section", {class: "panel task", id: "task-" + t.task_id, "data-task": t.task_id},
    h("h2", {}, `${t.name} `, h("span", {class: "muted"}, describe(t))),
    h("div", {class: "task-grid"}, est, h("div", {}, led, health)));
}

function render(data) {
  renderTasks(data.tasks);
  document.getElementById("task-details").replaceChildren(...data.tasks.map(renderTask));
}

async function refresh() {
  if (!token()) { setStatus("enter the collector token to load data"); return; }
  try {
    const r = await api("/v1/dashboard/summary");
    render(await r.json());
    document.body.setAttribute("data-loaded", "1");
    setStatus(`updated ${new Date().toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} s`);
  } catch (err) {
    setStatus(err.message, true);
  }
}

function start() {
  if (timer) clearInterval(timer);
  refresh();
  timer = setInterval(refresh, REFRESH_MS);
}

function init() {
  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (m) {
    sessionStorage.setItem(KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  document.getElementById("auth").addEventListener("submit", ev => {
    ev.preventDefault();
    const v = document.getElementById("token").value.trim();
    if (v) sessionStorage.setItem(KEY, v);
    document.getElementById("token").value = "";
    start();
  });
  document.getElementById("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    if (timer) clearInterval(timer);
    timer = null;
    document.querySelector("#tasks tbody").replaceChildren();
    document.getElementById("task-details").replaceChildren();
    setStatus("token forgotten");
  });
  start();
}

init();
