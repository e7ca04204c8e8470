"""Published claims about SFP, PEM and TreeHist, and their evaluation on the heavy-hitter experiment's rows.

Sources (what could be read is stated per claim; nothing is taken from a text that could not be read):

* Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning Journal
  (2017): only the opening could be read; the algorithm (fragments of a new word plus a hash
  "puzzle piece" of the word, reassembled by the server) is stated in Apple's patent US 9594741
  (claims 1, 3-5). The paper's accuracy figures (discovery vs eps and number of users) could not be
  read: that claim is recorded as ``not checkable``.
* Wang, Li, Jha, "Locally Differentially Private Heavy Hitter Identification", IEEE TDSC 2019
  (arXiv 1708.06674): abstract ("Experiments on both synthetic and real-world datasets demonstrate
  the advantage of our proposed protocol"); its utility analysis (each prefix level's frequency
  oracle has a variance that falls with eps and with the number of users of the level). Which
  baselines its figures use and their numbers could not be read.
* Bassily, Nissim, Stemmer, Thakurta, "Practical Locally Private Heavy Hitters", NeurIPS 2017 /
  JMLR 21 (2020), abstract: server time O(n), user time O(1); compared with RAPPOR (not measured
  here: ``not checkable``).

Each claim is a function of the rows of ``results.csv`` returning named checks (true or false on our
numbers); the verdict is ``agree`` (all hold), ``disagree`` (none), ``partly`` (some) or
``not checkable`` (no checks: the paper's statement could not be read, or what it is about was
not measured).

Thresholds (the papers give none; ours): "beats" means PEM's metric >= the best other method's minus
``TIE`` (one item of the top 10 is 0.1 of F1); "grows with eps / n" means the metric at the largest
eps (n) >= the metric at the smallest minus ``TIE``, and strictly greater unless the smallest is
already 1; "O(n) server time" means time(n_max)/time(n_min) <= ``LINEAR_SLACK`` x n_max/n_min (the
wall time of randomize + aggregate + estimate, on a shared machine).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .survey_claims import checks_evidence, verdict_from_checks

__all__ = ["Claim", "ClaimVerdict", "CLAIMS", "TIE", "LINEAR_SLACK", "evaluate_claims", "read_rows",
           "write_claims_csv", "claims_markdown", "claims_html"]

TIE = 0.05
LINEAR_SLACK = 1.5
_NUMERIC = ("epsilon", "delta", "local_epsilon", "n", "rep", "k", "precision", "recall", "f1", "ncr",
            "count_error", "found", "seconds")

Checks = list[tuple[str, bool]]


@dataclass(frozen=True)
class Claim:
    """One published statement: its id, paper, where in it, its text, and its check on the rows."""

    claim_id: str
    paper: str
    source: str
    text: str
    check: Callable[[list[dict]], Checks] | None


@dataclass
class ClaimVerdict:
    claim_id: str
    paper: str
    source: str
    claim: str
    status: str
    evidence: str
    checks: Checks = field(default_factory=list)


def _num(v: Any) -> Any:
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def _normalize(rows: list[dict]) -> list[dict]:
    return [{k: (_num(v) if k in _NUMERIC else v) for k, v in r.items()} for r in rows]


def read_rows(path: Path) -> list[dict]:
    """The rows of a ``results.csv`` with numeric columns as floats."""
    with open(path, newline="", encoding="utf-8") as fh:
        return _normalize(list(csv.DictReader(fh)))


def _mean(rows: list[dict], key: str) -> float:
    vals = [r[key] for r in rows if isinstance(r[key], float) and math.isfinite(r[key])]
    return sum(vals) / len(vals) if vals else math.nan


def _groups(rows: list[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(str(x) if isinstance(x, str) else x for x in kv[0])))


def _label(key: tuple) -> str:
    return " ".join(f"{x:g}" if isinstance(x, float) else str(x) for x in key)


def pem_beats(metric: str) -> Callable[[list[dict]], Checks]:
    """At every (data set, model, eps, n): PEM's mean metric >= the best other method's minus TIE."""

    def check(rows: list[dict]) -> Checks:
        out = []
        for key, sel in _groups(rows, ("dataset", "model", "epsilon", "n")).items():
            by = {m: _mean([r for r in sel if r["method"] == m], metric) for m in {r["method"] for r in sel}}
            if "pem" not in by or len(by) < 2:
                continue
            best, other = max(((v, m) for m, v in by.items() if m != "pem"), key=lambda t: (t[0], t[1]))
            out.append((f"{_label(key)}: pem {by['pem']:.2f} vs {other} {best:.2f}", by["pem"] >= best - TIE))
        return out

    return check


def _grows(rows: list[dict], along: str, fixed: tuple[str, ...], metric: str, methods: tuple[str, ...]) -> Checks:
    out = []
    for key, sel in _groups([r for r in rows if r["method"] in methods], fixed).items():
        xs = sorted({r[along] for r in sel})
        if len(xs) < 2:
            continue
        lo = _mean([r for r in sel if r[along] == xs[0]], metric)
        hi = _mean([r for r in sel if r[along] == xs[-1]], metric)
        ok = hi >= lo - TIE if lo >= 1.0 else hi > lo
        out.append((f"{_label(key)}: {metric} {lo:.2f} at {along} {xs[0]:g} -> {hi:.2f} at {xs[-1]:g}", ok))
    return out


def grows_with(along: str, metric: str, methods: tuple[str, ...]) -> Callable[[list[dict]], Checks]:
    """The metric at the largest ``along`` exceeds the one at the smallest (ties allowed at 1)."""
    fixed = ("dataset", "model", "method", "n") if along == "epsilon" else ("dataset", "model", "method", "epsilon")
    return lambda rows: _grows(rows, along, fixed, metric, methods)


def sfp_discovers(rows: list[dict]) -> Checks:
    """SFP recovers the whole true top-k (F1 = 1) at some point of each data set's local grid."""
    out = []
    for key, sel in _groups([r for r in rows if r["method"] == "sfp" and r["model"] == "local"],
                            ("dataset",)).items():
        best = max(sel, key=lambda r: (r["f1"], -r["epsilon"], -r["n"]))
        out.append((f"{_label(key)}: best SFP F1 {best['f1']:.2f} (eps {best['epsilon']:g}, n {best['n']:g})",
                    best["f1"] >= 1.0))
    return out


def treehist_linear_time(rows: list[dict]) -> Checks:
    """TreeHist's time grows at most linearly in n (within LINEAR_SLACK)."""
    out = []
    for key, sel in _groups([r for r in rows if r["method"] == "treehist"], ("dataset", "model", "epsilon")).items():
        ns = sorted({r["n"] for r in sel})
        if len(ns) < 2:
            continue
        lo = _mean([r for r in sel if r["n"] == ns[0]], "seconds")
        hi = _mean([r for r in sel if r["n"] == ns[-1]], "seconds")
        bound = LINEAR_SLACK * ns[-1] / ns[0]
        out.append((f"{_label(key)}: time x{hi / lo:.1f} for n x{ns[-1] / ns[0]:g} (bound x{bound:g})", hi / lo <= bound))
    return out


_APPLE = "Apple DP Team 2017, Learning with Privacy at Scale"
_PEM = "Wang, Li, Jha, TDSC 2019 (PEM)"
_TH = "Bassily et al., NeurIPS 2017 (TreeHist)"
ALL = ("sfp", "pem", "treehist")

CLAIMS: list[Claim] = [
    Claim("sfp-discovers", _APPLE, "opening; patent US 9594741 claims 1, 3-5",
          "New words are discovered without a dictionary from fragments and a hash puzzle piece", sfp_discovers),
    Claim("sfp-accuracy", _APPLE, "evaluation section (could not be read)",
          "Apple's discovery accuracy vs eps and number of donations", None),
    Claim("pem-beats-f1", _PEM, "abstract (the figures could not be read)",
          "PEM has the advantage over the other heavy-hitter protocols (F1 of the top k)", pem_beats("f1")),
    Claim("pem-beats-ncr", _PEM, "abstract (the figures could not be read)",
          "PEM has the advantage over the other heavy-hitter protocols (NCR)", pem_beats("ncr")),
    Claim("pem-eps", _PEM, "utility analysis (oracle variance falls with eps)",
          "Identification accuracy grows with eps", grows_with("epsilon", "f1", ("pem",))),
    Claim("pem-n", _PEM, "utility analysis (oracle variance falls with users per level)",
          "Identification accuracy grows with n", grows_with("n", "f1", ("pem",))),
    Claim("all-eps", _PEM, "utility analysis, applied to all three prefix/fragment protocols",
          "F1 grows with eps for SFP, PEM and TreeHist", grows_with("epsilon", "f1", ALL)),
    Claim("treehist-time", _TH, "abstract", "Server running time O(n)", treehist_linear_time),
    Claim("treehist-rappor", _TH, "abstract (the comparison itself could not be read)",
          "TreeHist compares favourably with Google's RAPPOR (RAPPOR is not measured here)", None),
]


def _status(checks: Checks) -> str:
    verdict = verdict_from_checks(checks)
    return "not checkable" if verdict == "n/a" else verdict


def evaluate_claims(rows: list[dict], claims: list[Claim] | None = None) -> list[ClaimVerdict]:
    """One verdict per claim on the experiment's rows (dicts as in ``results.csv``)."""
    rows = _normalize(rows)
    out = []
    for c in claims or CLAIMS:
        checks = c.check(rows) if c.check is not None else []
        status = _status(checks)
        if checks:
            evidence = checks_evidence(checks)
        elif c.check is None:
            evidence = "not checkable: the statement could not be read or its subject was not measured"
        else:
            evidence = "not checkable: the rows hold no point this claim is about"
        out.append(ClaimVerdict(c.claim_id, c.paper, c.source, c.text, status, evidence, checks))
    return out


def write_claims_csv(path: Path, verdicts: list[ClaimVerdict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["claim_id", "paper", "source", "claim", "verdict", "checks_holding", "checks", "evidence"])
        for v in verdicts:
            w.writerow([v.claim_id, v.paper, v.source, v.claim, v.status, sum(bool(c) for _, c in v.checks),
                        len(v.checks), v.evidence])


def claims_markdown(verdicts: list[ClaimVerdict]) -> str:
    """A Markdown table of the verdicts (for docs/heavy-hitters.md)."""
    lines = ["| claim | paper (where) | our run | checks | evidence |", "|---|---|---|---|---|"]
    for v in verdicts:
        ok = sum(bool(c) for _, c in v.checks)
        ev = v.evidence.split(": ", 1)[-1] if v.checks else v.evidence
        lines.append(f"| {v.claim} | {v.paper} ({v.source}) | **{v.status}** | {ok}/{len(v.checks)} | "
                     f"{ev.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def claims_html(verdicts: list[ClaimVerdict]) -> str:
    """The claims table of the HTML report."""
    from .report_html import table

    body = [[v.claim, f"{v.paper} ({v.source})", v.status, f"{sum(bool(c) for _, c in v.checks)}/{len(v.checks)}",
             v.evidence] for v in verdicts]
    return ("<h2>Claims of the papers</h2><p>Each claim is checked on results.csv by "
            "<code>shuffledp.experiments.heavy_hitters_claims</code> (thresholds there and in "
            "docs/heavy-hitters.md); also in claims.csv and claims.md.</p>"
            + table(["claim", "paper (where)", "verdict", "checks", "evidence"], body, numeric_from=5))
