"""One HTML style for every experiment report (survey, key-value, amplification tables).

A report is a single static ``index.html`` next to its CSVs and PNGs: HTML5 doctype, UTF-8, a
readable text column (``max-width`` in characters) while figures keep their native pixel width
(a figure wider than the column scrolls horizontally instead of being shrunk). Every figure
carries a "how to read this" paragraph and, where it shows series from different mechanisms, the
privacy statement of each series.

Monte Carlo curves show the standard error of the plotted estimate. For ``R`` independent
repetitions with squared errors ``s_1..s_R``: ``MSE = mean(s)``, ``se(MSE) = sd(s) / sqrt(R)``
and, by the delta method, ``se(RMSE) = se(MSE) / (2 RMSE)``; :func:`mse_and_se` computes them.
Plots draw a band of +-2 standard errors (:func:`band`).

The page embeds a tiny script that, once the page has loaded, writes on ``<body>`` how many
images decoded (``data-images-ok``) and the sources of those that did not
(``data-images-broken``); a headless browser's ``--dump-dom`` output then shows broken images
without any other tooling (``tests/experiments/test_report_browser.py``).
"""

from __future__ import annotations

import html
import math
import struct
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

__all__ = ["SOURCES", "page", "figure", "table", "privacy_table", "write_page", "mse_and_se", "band",
           "save_figure", "LegendOverlapWarning", "legend_overlaps", "png_size", "esc"]

esc = html.escape

#: the documents the experiments reproduce, named for readers (the reports never use internal ids)
SOURCES = {
    "survey": "the survey of differential privacy in the shuffle model by Wang Leixia and Meng Xiaofeng "
              "(Renmin University of China), §5 (experiments, Figs. 7-15)",
    "hiskv": "the HISKV paper on key-value data collection under local differential privacy by Zhang "
             "Xiaojian, Xu Yaxin, Fu Nan and Meng Xiaofeng",
    "dp_variants": "the chapter \u201cVariants of differential privacy\u201d (Rényi DP and zCDP) of Near and "
                   "Abuah's textbook Programming Differential Privacy, in its Chinese translation",
}

CSS = """
:root { --text: 46rem; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Helvetica Neue", Arial,
       sans-serif; font-size: 17px; line-height: 1.55; color: #1b1b1b; background: #fff; margin: 0;
       padding: 1.5rem 1rem 4rem; }
main { max-width: var(--text); margin: 0 auto; }
h1 { font-size: 1.75rem; line-height: 1.25; margin: 0 0 1rem; }
h2 { font-size: 1.35rem; margin: 2.5rem 0 .6rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
h3 { font-size: 1.1rem; margin: 1.6rem 0 .4rem; }
p, li { max-width: var(--text); }
code { font-size: .92em; background: #f3f3f3; padding: 0 .2em; border-radius: 3px; }
small { color: #555; }
/* wide content (figures, tables) may leave the text column: centred on it, at most the viewport's
   width, scrolling horizontally rather than shrinking an image */
.wide, figure .img, .panels { width: max-content; max-width: min(calc(100vw - 2rem), 90rem); overflow-x: auto;
       position: relative; left: 50%; transform: translateX(-50%); }
figure { margin: 1.2rem 0 1.6rem; }
figure img { display: block; max-width: none; height: auto; }
.panels { display: flex; flex-wrap: wrap; gap: .5rem 1rem; justify-content: center; }
figcaption { max-width: var(--text); font-size: .95rem; margin-top: .4rem; }
.howto { background: #f4f7fb; border-left: 4px solid #6b8fc2; padding: .5rem .8rem; margin: .6rem 0;
         max-width: var(--text); font-size: .95rem; }
.howto b:first-child { display: block; }
.note { background: #fff8e5; border-left: 4px solid #e0b000; padding: .5rem .8rem; max-width: var(--text); }
table { border-collapse: collapse; font-size: .9rem; margin: .6rem 0; }
td, th { border: 1px solid #c8c8c8; padding: .25rem .5rem; vertical-align: top; text-align: left; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
details { margin: .6rem 0; }
summary { cursor: pointer; }
"""

#: marks decoded / broken images on <body> once the page (and so every image) has loaded
CHECK_SCRIPT = """<script>
window.addEventListener('load', function () {
  var ok = 0, bad = [];
  Array.prototype.forEach.call(document.images, function (im) {
    if (im.complete && im.naturalWidth > 0) { ok += 1; } else { bad.push(im.getAttribute('src')); }
  });
  document.body.setAttribute('data-images-ok', String(ok));
  document.body.setAttribute('data-images-broken', bad.join(' '));
  document.body.setAttribute('data-images-checked', '1');
});
</script>"""


def page(title: str, parts: Iterable[str]) -> str:
    """A complete HTML5 document: ``title`` as <title> and <h1>, then ``parts`` (HTML fragments)."""
    return "\n".join(["<!doctype html>", "<html lang='en'>", "<head>", "<meta charset='utf-8'>",
                      "<meta name='viewport' content='width=device-width, initial-scale=1'>",
                      f"<title>{esc(title)}</title>", f"<style>{CSS}</style>", CHECK_SCRIPT, "</head>",
                      "<body>", "<main>", f"<h1>{esc(title)}</h1>", *parts, "</main>", "</body>", "</html>", ""])


def write_page(path: Path, title: str, parts: Iterable[str]) -> Path:
    path.write_text(page(title, parts), encoding="utf-8")
    return path


def png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) in pixels from a PNG's IHDR chunk; None if ``path`` is not a readable PNG."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def _img(outdir: Path | None, src: str, alt: str) -> str:
    size = png_size(outdir / src) if outdir is not None else None
    dims = f" width='{size[0]}' height='{size[1]}'" if size else ""
    return f"<img src='{esc(src)}' alt='{esc(alt)}'{dims}>"


def figure(outdir: Path | None, srcs: str | Sequence[str], alt: str, how_to_read: str, caption: str = "",
           privacy: Sequence[tuple[str, str]] = ()) -> str:
    """A figure (one PNG, or several panels side by side that wrap) at native pixel width, its
    "how to read this" paragraph (HTML allowed), an optional caption and the privacy statement of
    each series (``(series, statement)`` pairs, plain text)."""
    srcs = [srcs] if isinstance(srcs, str) else list(srcs)
    imgs = "".join(_img(outdir, s, alt) for s in srcs)
    body = f"<div class='img'>{imgs}</div>" if len(srcs) == 1 else f"<div class='panels'>{imgs}</div>"
    out = [f"<figure>{body}<figcaption>"]
    if caption:
        out.append(f"<p>{caption}</p>")
    out.append(f"<div class='howto'><b>How to read this</b>{how_to_read}</div>")
    if privacy:
        out.append("<details open><summary>Privacy statement of each series</summary>"
                   + privacy_table(privacy) + "</details>")
    out.append("</figcaption></figure>")
    return "".join(out)


def table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric_from: int = 1) -> str:
    """An HTML table of plain-text cells (escaped); columns from ``numeric_from`` are right-aligned."""
    out = ["<div class='wide'><table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td class='num'>{esc(str(c))}</td>" if i >= numeric_from
                                    else f"<td>{esc(str(c))}</td>" for i, c in enumerate(r)) + "</tr>")
    out.append("</table></div>")
    return "".join(out)


def privacy_table(rows: Sequence[tuple[str, str]]) -> str:
    return table(["series", "privacy statement"], rows, numeric_from=99)


# ------------------------------------------------------------------------------- Monte Carlo
def mse_and_se(squared_errors: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """MSE over repetitions (``axis``) and its standard error ``sd(s, ddof=1) / sqrt(R)`` (nan for R < 2)."""
    s = np.asarray(squared_errors, dtype=np.float64)
    r = s.shape[axis]
    mse = s.mean(axis=axis)
    se = s.std(axis=axis, ddof=1) / math.sqrt(r) if r > 1 else np.full_like(mse, np.nan)
    return mse, se


def band(ax, x: Sequence[float], y: Sequence[float], se: Sequence[float] | None, *, k: float = 2.0,
         log: bool = False, **kw):
    """Plot ``y`` against ``x`` with a shaded band ``y +- k se`` (``se`` nan or None: line only).
    On a log axis the lower edge is kept positive (``max(y - k se, y / 10)``). Returns the line."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    (line,) = ax.plot(x, y, **kw)
    if se is not None:
        s = np.asarray(se, float)
        ok = np.isfinite(s) & np.isfinite(y)
        if ok.any():
            lo = y - k * s
            if log:
                lo = np.maximum(lo, y / 10)
            ax.fill_between(x[ok], lo[ok], (y + k * s)[ok], color=line.get_color(), alpha=0.18, linewidth=0)
    return line


class LegendOverlapWarning(UserWarning):
    """A legend drawn over an axes' plotting area (it may hide data)."""


def legend_overlaps(fig, *, draw: bool = True) -> list[str]:
    """Legends of ``fig`` (figure- or axes-level) whose box intersects any axes' plotting area.

    ``draw=False`` skips the full draw that fixes the layout first: for a figure just saved
    (:func:`save_figure`), whose last draw already laid it out; the legends' and axes' extents
    are computed from the renderer either way."""
    if draw:
        fig.canvas.draw()
    r = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    bad = []
    for lg in legends:
        lb = lg.get_window_extent(r)
        for ax in fig.axes:
            if ax.get_visible() and ax.axison and lb.overlaps(ax.get_window_extent(r)):
                bad.append(f"legend over axes {ax.get_title() or ax.get_ylabel()!r}")
    return bad


def save_figure(fig, path: Path, dpi: int = 100) -> None:
    """Save with a tight bounding box (legends placed outside the axes stay in the image); warn
    (:class:`LegendOverlapWarning`) if a legend covers an axes.

    The overlap check runs after saving, on the layout of the save's own draw: one full draw
    per figure instead of two (a quarter to a half of the time of a small figure)."""
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    for msg in legend_overlaps(fig, draw=False):
        warnings.warn(f"{path.name}: {msg}", LegendOverlapWarning, stacklevel=2)


def report_only_dir(command: str, folder: str, quick: bool, full: bool, out: Path | None, needed: str) -> Path:
    """The folder ``--report-only`` re-renders: ``--out``, else ``results/<folder>`` (``results/<folder>-quick``
    with ``--quick``). Refuses (one line, exit 2) with ``--full`` (which re-runs), without matplotlib,
    or when the folder lacks ``needed`` (the run's data)."""
    from ..cli import fail, require_extras

    if full:
        fail("--report-only re-renders an earlier run's CSVs; it cannot be combined with --full")
    require_extras(f"experiment {command}", "plots")
    out = Path(out) if out is not None else Path("results") / (f"{folder}-quick" if quick else folder)
    if not (out / needed).is_file():
        fail(f"--report-only: {out / needed} not found (run the experiment into {out} first)")
    return out
