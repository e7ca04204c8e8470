"""The shuffle-model survey's (Wang and Meng) qualitative claims about its Figs. 7-15 (§5) and their evaluation.

Each claim is a function of the measured rows (one figure's table) that returns a
:class:`Verdict`: a list of named checks, each true or false on our numbers, and the verdict
``agree`` (all checks hold), ``disagree`` (none holds), ``partly`` (some hold) or ``n/a`` (the
methods the claim is about were not measured). Nothing is hard-coded: change the data and the
verdicts change (``tests/experiments/test_survey.py`` checks both directions on synthetic tables).

Thresholds (the survey gives none; ours, stated in docs/survey.md):

* "falls with eps": RMSE at the largest eps_c < ``FALL`` x RMSE at the smallest.
* "flat" / "no clear change": max/min over the sweep <= ``FLAT_ERR`` (errors and
  per-user communication) or <= ``FLAT_TIME`` (analyzer times, which carry timer noise).
* "rises": last/first >= ``RISE``; "rises steeply with n": last/first >= sqrt(n_max/n_min).
* "close to CDP" (log-scale plot): |log(x/CDP)| < |log(x/LDP)|.
* "markedly different": ratio to the median of the other shuffle protocols >= ``MARKED`` (or
  <= 1/MARKED).
* "near-lowest": within a factor ``NEAR`` of the smallest.
* "lowest compute": analyzer times within ``TIME_TIE`` of each other count as a tie.
* RMSE orderings ("between LDP and CDP", "smallest error") hold up to ``Z_TIE`` Monte Carlo
  standard errors (column ``rmse_se``); without an ``rmse_se`` they are strict.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Verdict", "Claim", "CLAIMS", "evaluate_claims", "write_claims_csv", "claims_markdown",
           "verdict_from_checks", "TIME_TIE", "Z_TIE",
           "FALL", "FLAT_ERR", "FLAT_TIME", "RISE", "MARKED", "NEAR"]

FALL = 0.8
FLAT_ERR = 1.5
FLAT_TIME = 3.0
RISE = 1.5
MARKED = 10.0
NEAR = 2.0
#: analyzer times within this factor count as a tie for "lowest compute" (timer noise between
#: protocols doing the same pass, e.g. Cnt_2M and Cnt_BN)
TIME_TIE = 1.2
#: RMSE orderings ("between LDP and CDP", "smallest") allow a statistical tie of Z_TIE Monte Carlo
#: standard errors (e.g. Cnt_SGM and central Laplace have the same noise scale)
Z_TIE = 2.0


def _tie(key: str) -> float:
    return TIME_TIE if key == "analyzer_s" else 1.0

SHUFFLE = {
    "counting": ["cnt_rr", "cnt_2m", "cnt_sgm", "cnt_bn"],
    "histogram": ["hist_kr", "hist_mm", "slh", "murs"],
    "sum": ["rsum_rr", "rsum_kr", "rsum_rm", "rsum_dsg"],
}
LDP = {"counting": "ldp_rr", "histogram": "ldp_krr", "sum": "ldp_harmony"}
CDP = {"counting": "cdp_laplace_count", "histogram": "cdp_laplace_hist", "sum": "cdp_laplace_sum"}


@dataclass
class Verdict:
    figure: str
    claim_id: str
    claim: str
    quote: str
    status: str  # agree | partly | disagree | n/a
    evidence: str
    checks: list[tuple[str, bool]] = field(default_factory=list)


@dataclass
class Claim:
    claim_id: str
    figure: str
    problem: str
    text: str
    quote: str  # the survey's sentence (Chinese original)
    check: Callable[[list[dict], str], list[tuple[str, bool]]]


def verdict_from_checks(checks: list[tuple[str, bool]]) -> str:
    """agree if every check holds, disagree if none, partly otherwise, n/a without checks."""
    if not checks:
        return "n/a"
    ok = sum(bool(c) for _, c in checks)
    if ok == len(checks):
        return "agree"
    return "disagree" if ok == 0 else "partly"


def checks_evidence(checks: list[tuple[str, bool]]) -> str:
    """``"k/m checks hold: OK ...; NO ..."``: each check's description marked with its outcome."""
    ok = sum(bool(v) for _, v in checks)
    return f"{ok}/{len(checks)} checks hold: " + "; ".join(f"{'OK' if v else 'NO'} {d}" for d, v in checks)


# ---------------------------------------------------------------------------------- accessors
def _ok(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _val(rows: list[dict], method: str, key: str, x: Any = None) -> float:
    for r in rows:
        if r["method"] == method and (x is None or r["x"] == x) and _ok(r.get(key)):
            return float(r[key])
    return math.nan


def _series(rows: list[dict], method: str, key: str) -> list[tuple[float, float]]:
    pts = [(float(r["x"]), float(r[key])) for r in rows if r["method"] == method and _ok(r.get(key))]
    return sorted(pts)


def _present(rows: list[dict], methods: list[str], key: str) -> list[str]:
    return [m for m in methods if any(r["method"] == m and _ok(r.get(key)) for r in rows)]


def _xs(rows: list[dict]) -> list[Any]:
    """The sweep's settings; ``[None]`` (one setting) for Fig. 7, whose x is the method name."""
    xs = {r["x"] for r in rows}
    if any(isinstance(x, str) for x in xs):
        return [None]
    return sorted(xs)


def _le(rows: list[dict], a: str, b: str, x: Any = None) -> bool:
    """RMSE of ``a`` <= RMSE of ``b`` up to Monte Carlo error: a <= b + Z_TIE * sqrt(se_a^2 + se_b^2)."""
    va, vb = _val(rows, a, "rmse", x), _val(rows, b, "rmse", x)
    sa, sb = _val(rows, a, "rmse_se", x), _val(rows, b, "rmse_se", x)
    se = math.sqrt((sa if _ok(sa) else 0.0) ** 2 + (sb if _ok(sb) else 0.0) ** 2)
    return va <= vb + Z_TIE * se


def _at(x: Any) -> str:
    return "" if x is None else f"@{x:g}"


def _g(v: float) -> str:
    return f"{v:.3g}"


# --------------------------------------------------------------------------------- predicates
def between_ldp_cdp(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
    ldp, cdp = LDP[problem], CDP[problem]
    out = []
    for x in _xs(rows):
        lo, hi = _val(rows, cdp, "rmse", x), _val(rows, ldp, "rmse", x)
        if not (_ok(lo) and _ok(hi)):
            continue
        for m in _present(rows, SHUFFLE[problem], "rmse"):
            v = _val(rows, m, "rmse", x)
            if _ok(v):
                ok = _le(rows, cdp, m, x) and _le(rows, m, ldp, x)
                out.append((f"{m}{_at(x)}: CDP {_g(lo)} <= {_g(v)} <= LDP {_g(hi)}", ok))
    return out


def cost_above_baselines(key: str) -> Callable[[list[dict], str], list[tuple[str, bool]]]:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        ldp, cdp = LDP[problem], CDP[problem]
        # the larger of the measured baselines (a plain max(nan, x) would depend on the order)
        measured = [v for v in (_val(rows, ldp, key), _val(rows, cdp, key)) if _ok(v)]
        if not measured:
            return []
        base = max(measured)
        return [(f"{m}: {key} {_g(_val(rows, m, key))} > max(LDP, CDP) {_g(base)}", _val(rows, m, key) > base)
                for m in _present(rows, SHUFFLE[problem], key)]
    return check


def smallest(target: str, key: str = "rmse", every_x: bool = False) -> Callable[[list[dict], str], list]:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        present = _present(rows, SHUFFLE[problem], key)
        if target not in present or len(present) < 2:
            return []
        out = []
        for x in (_xs(rows) if every_x else [None]):
            vals = {m: _val(rows, m, key, x) for m in present}
            vals = {m: v for m, v in vals.items() if _ok(v)}
            if target not in vals or len(vals) < 2:
                continue
            best = min(vals, key=vals.get)  # type: ignore[arg-type]
            tie = "" if _tie(key) == 1.0 else f" (ties within x{_tie(key):g})"
            ok = (_le(rows, target, best, x) if key == "rmse"
                  else vals[target] <= _tie(key) * min(vals.values()))
            out.append((f"{target}{_at(x)} {key} {_g(vals[target])}; smallest is {best} {_g(vals[best])}{tie}", ok))
        return out
    return check


def largest_vs_others(target: str, key: str, want: str) -> Callable[[list[dict], str], list]:
    """``want`` = "higher": target above every other shuffle protocol; "lower": below every one."""
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        present = _present(rows, SHUFFLE[problem], key)
        t = _val(rows, target, key)
        if target not in present or len(present) < 2:
            return []
        others = {m: _val(rows, m, key) for m in present if m != target}
        if want == "higher":
            return [(f"{target} {key} {_g(t)} > every other (max {_g(max(others.values()))})",
                     t > max(others.values()))]
        tie = "" if _tie(key) == 1.0 else f" (ties within x{_tie(key):g})"
        return [(f"{target} {key} {_g(t)} < every other (min {_g(min(others.values()))}){tie}",
                 t < _tie(key) * min(others.values()))]
    return check


def falls(key: str, methods: str = "all") -> Callable[[list[dict], str], list]:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        ms = SHUFFLE[problem] + ([LDP[problem], CDP[problem]] if methods == "all" else [])
        out = []
        for m in _present(rows, ms, key):
            s = _series(rows, m, key)
            if len(s) < 2:
                continue
            r = s[-1][1] / s[0][1] if s[0][1] > 0 else math.nan
            out.append((f"{m}: {key} {_g(s[0][1])} -> {_g(s[-1][1])} (x{_g(r)})", _ok(r) and r < FALL))
        return out
    return check


def flat(key: str, limit: float, methods: list[str] | None = None, exclude: tuple[str, ...] = ()) -> Callable:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        ms = [m for m in (methods or SHUFFLE[problem]) if m not in exclude]
        out = []
        for m in _present(rows, ms, key):
            v = [y for _, y in _series(rows, m, key)]
            if len(v) < 2 or min(v) <= 0:
                continue
            r = max(v) / min(v)
            out.append((f"{m}: {key} max/min {_g(r)} (<= {limit:g})", r <= limit))
        return out
    return check


def rises(key: str, methods: list[str], limit: float | str = RISE) -> Callable:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        out = []
        for m in _present(rows, methods, key):
            s = _series(rows, m, key)
            if len(s) < 2 or s[0][1] <= 0:
                continue
            lim = math.sqrt(s[-1][0] / s[0][0]) if limit == "sqrt_span" else float(limit)
            r = s[-1][1] / s[0][1]
            out.append((f"{m}: {key} {_g(s[0][1])} -> {_g(s[-1][1])} (x{_g(r)}, need >= {_g(lim)})", r >= lim))
        return out
    return check


def all_shuffle(fn: Callable[..., Callable], key: str, *args: Any, **kw: Any) -> Callable:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        return fn(key, SHUFFLE[problem], *args, **kw)(rows, problem)
    return check


def close_to_cdp(target: str) -> Callable:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        t, c, ldp = (_val(rows, m, "rmse") for m in (target, CDP[problem], LDP[problem]))
        if not all(_ok(v) and v > 0 for v in (t, c, ldp)):
            return []
        a, b = abs(math.log(t / c)), abs(math.log(t / ldp))
        return [(f"{target} {_g(t)}: x{_g(t / c)} of CDP {_g(c)}, x{_g(t / ldp)} of LDP {_g(ldp)}", a < b)]
    return check


def markedly_different(target: str, keys: tuple[str, ...]) -> Callable:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        out = []
        for key in keys:
            present = _present(rows, SHUFFLE[problem], key)
            if target not in present or len(present) < 2:
                continue
            others = sorted(_val(rows, m, key) for m in present if m != target)
            med = others[len(others) // 2] if len(others) % 2 else 0.5 * (others[len(others) // 2 - 1]
                                                                          + others[len(others) // 2])
            t = _val(rows, target, key)
            r = t / med if med > 0 else math.inf
            out.append((f"{target} {key} {_g(t)} = x{_g(r)} the others' median {_g(med)}",
                        r >= MARKED or r <= 1.0 / MARKED))
        return out
    return check


def near_lowest(target: str, key: str = "rmse") -> Callable:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        present = _present(rows, SHUFFLE[problem], key)
        if target not in present or len(present) < 2:
            return []
        t, best = _val(rows, target, key), min(_val(rows, m, key) for m in present)
        return [(f"{target} {key} {_g(t)} within x{NEAR:g} of the smallest {_g(best)}", t <= NEAR * best)]
    return check


def above_median(target: str, keys: tuple[str, ...]) -> Callable:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        out = []
        for key in keys:
            present = _present(rows, SHUFFLE[problem], key)
            if target not in present or len(present) < 2:
                continue
            vals = sorted(_val(rows, m, key) for m in present)
            med = vals[len(vals) // 2] if len(vals) % 2 else 0.5 * (vals[len(vals) // 2 - 1] + vals[len(vals) // 2])
            t = _val(rows, target, key)
            out.append((f"{target} {key} {_g(t)} > median of shuffle protocols {_g(med)}", t > med))
        return out
    return check


def lowest_and_slowest_growth(target: str, key: str = "analyzer_s") -> Callable:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        present = _present(rows, SHUFFLE[problem], key)
        if target not in present or len(present) < 2:
            return []
        out = smallest(target, key, every_x=True)(rows, problem)
        growth = {}
        for m in present:
            s = _series(rows, m, key)
            if len(s) >= 2 and s[0][1] > 0:
                growth[m] = s[-1][1] / s[0][1]
        if target in growth and len(growth) > 1:
            others = {m: g for m, g in growth.items() if m != target}
            out.append((f"{target} {key} growth x{_g(growth[target])} vs others' min x{_g(min(others.values()))}",
                        growth[target] <= min(others.values())))
        return out
    return check


def combine(*fns: Callable) -> Callable:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        out = []
        for f in fns:
            out.extend(f(rows, problem))
        return out
    return check


def rises_more_than_others(target: str, key: str) -> Callable:
    def check(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
        present = _present(rows, SHUFFLE[problem], key)
        growth = {}
        for m in present:
            s = _series(rows, m, key)
            if len(s) >= 2 and s[0][1] > 0:
                growth[m] = s[-1][1] / s[0][1]
        if target not in growth or len(growth) < 2:
            return []
        others = sorted(g for m, g in growth.items() if m != target)
        med = others[len(others) // 2]
        return [(f"{target} {key} x{_g(growth[target])} >= {RISE:g}", growth[target] >= RISE),
                (f"{target} {key} growth x{_g(growth[target])} > others' median x{_g(med)}", growth[target] > med)]
    return check


def below_ldp(rows: list[dict], problem: str) -> list[tuple[str, bool]]:
    out = []
    for x in _xs(rows):
        ldp = _val(rows, LDP[problem], "rmse", x)
        if not _ok(ldp):
            continue
        for m in _present(rows, SHUFFLE[problem], "rmse"):
            v = _val(rows, m, "rmse", x)
            if _ok(v):
                out.append((f"{m}{_at(x)}: {_g(v)} < LDP {_g(ldp)}", v < ldp))
    return out


# ------------------------------------------------------------------------------------- claims
Q7A = ("结果显示,所有混洗差分隐私方法的RMSE都介于LDP与CDP方法之间,且计算代价和通信代价均高于这2种方法.")
CLAIMS: list[Claim] = [
    Claim("7a-between", "fig07a", "counting", "Every shuffle counting protocol's RMSE lies between LDP (RR) and CDP "
          "(Laplace)", Q7A, between_ldp_cdp),
    Claim("7a-time", "fig07a", "counting", "Shuffle counting protocols' analyzer time exceeds both LDP's and CDP's",
          Q7A, cost_above_baselines("analyzer_s")),
    Claim("7a-comm", "fig07a", "counting", "Shuffle counting protocols' communication (bits/user) exceeds both "
          "LDP's and CDP's", Q7A, cost_above_baselines("bits_per_user")),
    Claim("7a-sgm", "fig07a", "counting", "Cnt_SGM has the smallest RMSE among shuffle counting protocols",
          "不同混洗差分隐私方法中,Cnt_SGM有着最小的估计误差", smallest("cnt_sgm")),
    Claim("7a-2m", "fig07a", "counting", "Cnt_2M has clearly higher RMSE and communication than the other shuffle "
          "counters, and lower compute", "Cnt_2M...有着比其他方法明显较高的估计误差和通信代价,以及较低的计算代价",
          combine(largest_vs_others("cnt_2m", "rmse", "higher"), largest_vs_others("cnt_2m", "messages_per_user",
                                                                                   "higher"),
                  largest_vs_others("cnt_2m", "analyzer_s", "lower"))),
    Claim("8-err", "fig08", "counting", "Every counting method's error falls as eps_c grows",
          "随着εc的增大...这些计数估计方法的误差都有明显减低", falls("rmse")),
    Claim("8-cost", "fig08", "counting", "Compute and communication do not change noticeably with eps_c",
          "但计算代价和通信代价并无明显变化",
          combine(flat("messages_per_user", FLAT_ERR), flat("analyzer_s", FLAT_TIME))),
    Claim("9-ldp", "fig09", "counting", "LDP error grows with n", "随着n的增大,LDP方法误差增大",
          rises("rmse", ["ldp_rr"], RISE)),
    Claim("9-flat", "fig09", "counting", "Shuffle counting errors stay about flat in n",
          "但混洗差分隐私方法的误差却几乎维持不动", flat("rmse", FLAT_TIME)),
    Claim("9-cost", "fig09", "counting", "Compute and (total) communication rise steeply with n",
          "在计算代价和通信代价上,这些方法都随着n的增大而指数级上升",
          combine(all_shuffle(rises, "analyzer_s", "sqrt_span"), all_shuffle(rises, "total_messages", "sqrt_span"))),
    Claim("9-sgm", "fig09", "counting", "Cnt_SGM keeps the smallest RMSE at every n",
          "Cnt_SGM方法一直维持着最小的估计误差", smallest("cnt_sgm", every_x=True)),
    Claim("9-2m", "fig09", "counting", "Cnt_2M has the lowest compute cost, which also grows slowest with n",
          "Cnt_2M方法不仅计算代价小,其计算代价增长的速度也比其他混洗差分隐私方法缓慢",
          lowest_and_slowest_growth("cnt_2m")),
    Claim("10-flat", "fig10", "counting", "Most shuffle counters' RMSE, compute and communication do not change "
          "with q", "大多数混洗差分隐私方法的RMSE、计算代价和通信代价并无明显变化",
          combine(flat("rmse", FLAT_ERR, exclude=("cnt_2m",)), flat("messages_per_user", FLAT_ERR,
                                                                    exclude=("cnt_2m",)),
                  flat("analyzer_s", FLAT_TIME, exclude=("cnt_2m",)))),
    Claim("10-2m", "fig10", "counting", "Cnt_2M's communication rises with q",
          "Cnt_2M方法由于在用户端输出了更多扰动结果{1,1},因此有着明显增加的通信代价",
          rises("messages_per_user", ["cnt_2m"], 1.1)),
    Claim("7b-between", "fig07b", "histogram", "Every shuffle histogram protocol's RMSE lies between LDP (k-RR) "
          "and CDP (Laplace)", Q7A, between_ldp_cdp),
    Claim("7b-kr", "fig07b", "histogram", "Hist_KR has the smallest error among shuffle histogram protocols",
          "Hist_KR方法有着最小的估计误差", smallest("hist_kr")),
    Claim("7b-cdp", "fig07b", "histogram", "Hist_KR's error is close to CDP's (on the log-scale plot)",
          "与CDP方法近似", close_to_cdp("hist_kr")),
    Claim("7b-mm", "fig07b", "histogram", "Hist_MM's compute and communication differ markedly from the others "
          "(like Cnt_2M)", "基于Cnt_2M方法实现的Hist_MM方法在这2方面均与其他方法有明显不同",
          markedly_different("hist_mm", ("analyzer_s", "messages_per_user"))),
    Claim("11-err", "fig11", "histogram", "Histogram errors fall as eps_c grows", "随着εc的增大,频数估计的误差...明显降低",
          falls("rmse")),
    Claim("11-time", "fig11", "histogram", "Histogram analyzer time falls as eps_c grows",
          "计算代价都有明显降低", falls("analyzer_s", methods="shuffle")),
    Claim("11-comm", "fig11", "histogram", "Histogram communication hardly changes with eps_c",
          "通信代价几乎无变化", flat("messages_per_user", FLAT_ERR)),
    Claim("12-kr", "fig12", "histogram", "Hist_KR's error rises with d, like LDP k-RR's",
          "随着值域[d]的增大,Hist_KR方法的估计误差随之增大,与LDP方法变化的趋势一致",
          rises("rmse", ["hist_kr", "ldp_krr"], RISE)),
    Claim("12-murs", "fig12", "histogram", "MURS's compute rises with d", "MURS方法的计算代价逐步增大",
          rises("analyzer_s", ["murs"], RISE)),
    Claim("12-others", "fig12", "histogram", "The other shuffle histogram protocols' compute does not change with d",
          "但其他混洗差分隐私方法并无明显变化", flat("analyzer_s", FLAT_TIME, exclude=("murs",))),
    Claim("13-flat", "fig13", "histogram", "Most methods show no clear change with n (error, compute, "
          "communication per user)", "随着用户数量n的增大,大多数方法在各个方面并没有显现出明显的变化",
          combine(flat("rmse", FLAT_TIME, exclude=("murs",)), flat("messages_per_user", FLAT_ERR, exclude=("murs",)),
                  flat("analyzer_s", FLAT_TIME, exclude=("murs",)))),
    Claim("13-murs", "fig13", "histogram", "MURS's compute rises clearly with n (its fake reports)",
          "仅MURS方法的计算代价增加明显,这主要是混洗器添加假数据所造成的", rises_more_than_others("murs", "analyzer_s")),
    Claim("7c-between", "fig07c", "sum", "Every shuffle sum protocol's RMSE lies between LDP (Harmony) and CDP "
          "(Laplace)", Q7A, between_ldp_cdp),
    Claim("7c-dsg", "fig07c", "sum", "RSum_DSG has the lowest error among shuffle sum protocols",
          "RSum_DSG...估计误差在所有混洗差分隐私方法中最低", smallest("rsum_dsg")),
    Claim("7c-dsg-cost", "fig07c", "sum", "RSum_DSG's compute and communication are large",
          "RSum_DSG虽计算代价和通信代价较大", above_median("rsum_dsg", ("analyzer_s", "bits_per_user"))),
    Claim("7c-rm", "fig07c", "sum", "RSum_RM has near-lowest error and clearly the lowest compute",
          "RSum_RM方法有着接近小的估计误差和明显较小的计算代价",
          combine(near_lowest("rsum_rm"), smallest("rsum_rm", "analyzer_s"))),
    Claim("14-err", "fig14", "sum", "Sum errors fall as eps_c grows", "随着εc的增大,求和估计的误差有明显降低",
          falls("rmse")),
    Claim("14-cost", "fig14", "sum", "Sum compute and communication do not change noticeably with eps_c",
          "但计算代价和通信代价并无明显变化",
          combine(flat("messages_per_user", FLAT_ERR), flat("analyzer_s", FLAT_TIME))),
    Claim("15-flat", "fig15", "sum", "Shuffle sum errors change little with n (conclusion of §5)",
          "其他大多数混洗差分隐私方法在计算误差上没有明显变化", flat("rmse", FLAT_TIME)),
    Claim("all-ldp-09", "fig09", "counting", "Shuffle error is below LDP's at every n (counting)",
          "混洗差分隐私方法在各统计问题的结果可用性上都有着相比本地化差分隐私方法明显更优的结果", below_ldp),
    Claim("all-ldp-13", "fig13", "histogram", "Shuffle error is below LDP's at every n (histograms)",
          "混洗差分隐私方法在各统计问题的结果可用性上都有着相比本地化差分隐私方法明显更优的结果", below_ldp),
    Claim("all-ldp-15", "fig15", "sum", "Shuffle error is below LDP's at every n (sums)",
          "混洗差分隐私方法在各统计问题的结果可用性上都有着相比本地化差分隐私方法明显更优的结果", below_ldp),
]


def evaluate_claims(rows_by_figure: dict[str, list[dict]], claims: list[Claim] | None = None) -> list[Verdict]:
    """One verdict per claim whose figure was run (``n/a`` when its methods are missing)."""
    out = []
    for c in claims or CLAIMS:
        if c.figure not in rows_by_figure:
            continue
        rows = [r for r in rows_by_figure[c.figure] if r.get("status") in ("ok", "partial")]
        checks = c.check(rows, c.problem)
        status = verdict_from_checks(checks)
        if checks:
            evidence = checks_evidence(checks)
        else:
            evidence = "not evaluated: the protocols this claim is about were not measured (see skipped points)"
        out.append(Verdict(c.figure, c.claim_id, c.text, c.quote, status, evidence, checks))
    return out


def write_claims_csv(path: Path, verdicts: list[Verdict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["figure", "claim_id", "claim", "verdict", "checks_holding", "checks", "evidence"])
        for v in verdicts:
            w.writerow([v.figure, v.claim_id, v.claim, v.status, sum(bool(c) for _, c in v.checks), len(v.checks),
                        v.evidence])


def claims_markdown(verdicts: list[Verdict]) -> str:
    """A Markdown table of the verdicts (for docs/survey.md)."""
    lines = ["| figure | survey claim | our run | checks | evidence |", "|---|---|---|---|---|"]
    for v in verdicts:
        ok = sum(bool(c) for _, c in v.checks)
        ev = v.evidence.split(": ", 1)[-1] if v.checks else v.evidence
        lines.append(f"| {v.figure} | {v.claim} | **{v.status}** | {ok}/{len(v.checks)} | "
                     f"{ev.replace('|', '/')} |")
    return "\n".join(lines) + "\n"
