"""Matplotlib chart helpers that return PNG bytes for :class:`~carebench.report.Figure`.

Why no pyplot: ``matplotlib.use("Agg")`` or pyplot's figure registry would change
the caller's global state (backend, open figures).  Figures here are built as bare
``matplotlib.figure.Figure`` objects on an Agg canvas, styled inside an
``rc_context`` that is undone on exit, and never registered with pyplot.  PNGs are
written without the ``Software`` metadata chunk so identical data gives identical
bytes (reports can be diffed and cached). Each chart helper is wrapped by
:func:`~carebench.report.figure_reuse.reusable`: its PNG carries a key of its inputs,
so re-rendering a report redraws only the charts whose inputs changed.
"""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np

from carebench.report.document import Block, Figure, Paragraph
from carebench.report.figure_reuse import KEY_CHUNK, current_key, reusable

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure

__all__ = [
    "PALETTE",
    "NothingToShow",
    "bar_chart",
    "box_chart",
    "confusion_heatmap",
    "dot_interval_chart",
    "fig_to_png",
    "figure_or_sentence",
    "heatmap",
    "line_chart",
    "row_normalise",
    "stacked_bar_chart",
]

#: Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
           "#000000")

_STYLE: dict[str, Any] = {
    "font.family": "DejaVu Sans",  # ships with matplotlib: same glyphs on every machine
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.axisbelow": True,
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "text.usetex": False,
    "svg.hashsalt": "carebench",
    "path.simplify": True,
}


class NothingToShow(ValueError):
    """A chart helper was given nothing it could draw (no value, or a single point where
    a line or a distribution is drawn): the report says so in one sentence instead of
    showing an empty or degenerate image (see :func:`figure_or_sentence`)."""

    def __init__(self, title: object, reason: str) -> None:
        self.title = str(title)
        self.reason = reason
        super().__init__(f"{self.title}: {reason}")

    def sentence(self) -> str:
        """What the report shows in the chart's place."""
        return f"No chart for \u201c{self.title}\u201d: {self.reason}."


def figure_or_sentence(name: str, caption: str, draw: Callable[[], bytes]) -> Block:
    """``Figure(name, draw(), caption)``, or one :class:`Paragraph` saying why there is no
    chart when ``draw`` has nothing to show (:class:`NothingToShow`)."""
    try:
        png = draw()
    except NothingToShow as empty:
        return Paragraph(empty.sentence())
    return Figure(name, png, caption)


def _finite(values: Sequence[Any]) -> int:
    """How many finite numbers ``values`` holds (None counts as missing)."""
    return int(np.isfinite(np.asarray([np.nan if v is None else v for v in values], dtype=float)).sum())


def _tx(text: object) -> str:
    """Make labels literal: a ``$`` in a model name must not start mathtext."""
    return str(text).replace("$", r"\$")


@contextmanager
def _styled():
    with matplotlib.rc_context(_STYLE):
        yield


def _new_figure(width: float, height: float) -> MplFigure:
    # imported here: a re-render whose charts are all reused never loads matplotlib's
    # drawing modules (0.2 s)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # attaches itself to fig; no pyplot, no global backend switch
    return fig


def fig_to_png(fig: MplFigure, dpi: int = 120, *, close: bool = True) -> bytes:
    """Render a figure to PNG bytes with no timestamp or version metadata (only the
    chart's key, when a chart helper is drawing it).

    A figure that pyplot manages is closed afterwards (``close=True``) so report
    generation does not accumulate open figures.
    """
    buf = io.BytesIO()
    with _styled():
        key = current_key()
        _lay_out_once(fig, dpi)
        fig.savefig(buf, format="png", dpi=dpi,
                    metadata={"Software": None, **({KEY_CHUNK: key} if key else {})})
    if close and getattr(fig.canvas, "manager", None) is not None and "matplotlib.pyplot" in (
        sys.modules
    ):
        sys.modules["matplotlib.pyplot"].close(fig)
    return buf.getvalue()


def _lay_out_once(fig: MplFigure, dpi: int) -> None:
    """Run the constrained layout once, at the output's dpi, and then fix it.

    Why: with a layout engine set, ``savefig`` draws the whole figure twice (a draw with
    rendering disabled so the layout sees the text extents, then the real one) and runs
    the layout in both; the layout alone was about a third of a chart's drawing time.
    Laid out once and fixed, the figure is drawn once, with the same positions."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    engine = fig.get_layout_engine()
    if not isinstance(engine, ConstrainedLayoutEngine):
        return
    fig.set_dpi(dpi)
    engine.execute(fig)
    with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)  # no engine at all: "none" keeps a placeholder, and savefig pre-draws for any


def _as_float(values: Sequence[Any], n: int, what: str) -> np.ndarray:
    arr = np.asarray([np.nan if v is None else v for v in values], dtype=float)
    if arr.shape != (n,):
        raise ValueError(f"{what}: expected {n} values, got shape {arr.shape}")
    return arr


def _rotate_if_long(ax: Any, labels: Sequence[str]) -> None:
    if len(labels) > 6 or max((len(str(s)) for s in labels), default=0) > 12:
        for t in ax.get_xticklabels():
            t.set_rotation(30)
            t.set_horizontalalignment("right")


def _label_bar_axes(ax: Any, x: np.ndarray, cats: Sequence[str], title: str, ylabel: str,
                    xlabel: str | None, ylim: tuple[float, float] | None) -> None:
    """Category ticks (rotated when long), title, axis labels and limits of a bar chart."""
    ax.set_xticks(x, cats)
    _rotate_if_long(ax, cats)
    ax.grid(axis="x", visible=False)
    ax.set_title(_tx(title))
    ax.set_ylabel(_tx(ylabel))
    if xlabel:
        ax.set_xlabel(_tx(xlabel))
    if ylim is not None:
        ax.set_ylim(*ylim)


@reusable
def bar_chart(
    categories: Sequence[str],
    series: Mapping[str, Sequence[float]],
    title: str,
    ylabel: str,
    errors: Mapping[str, Any] | None = None,
    *,
    xlabel: str | None = None,
    ylim: tuple[float, float] | None = None,
    dpi: int = 120,
) -> bytes:
    """Grouped bars: one group per category, one bar per series (e.g. per-class F1 by method).

    ``errors[name]`` is what matplotlib's ``yerr`` takes: n symmetric half-widths or a
    ``(2, n)`` array of distances below/above the bar.  Missing values (None/NaN) draw no bar.
    """
    cats = [_tx(c) for c in categories]
    n, k = len(cats), len(series)
    if k == 0:
        raise ValueError("bar_chart: no series")
    if not any(_finite(v) for v in series.values()):
        raise NothingToShow(title, "no value to show")
    with _styled():
        fig = _new_figure(max(5.0, min(12.0, 1.0 + n * (0.35 + 0.18 * k))), 4.0)
        ax = fig.add_subplot()
        width = 0.8 / k
        x = np.arange(n, dtype=float)
        for s, (name, values) in enumerate(series.items()):
            y = _as_float(values, n, f"bar_chart series {name!r}")
            yerr = None
            if errors is not None and name in errors and errors[name] is not None:
                yerr = np.asarray(errors[name], dtype=float)
                if yerr.shape not in ((n,), (2, n)):
                    raise ValueError(f"bar_chart errors {name!r}: shape must be ({n},) or (2, {n})")
                yerr = np.where(np.isnan(yerr), 0.0, yerr)
            keep = ~np.isnan(y)
            ax.bar(
                x[keep] + (s - (k - 1) / 2) * width, y[keep], width * 0.95,
                yerr=None if yerr is None else yerr[..., keep],
                capsize=3 if yerr is not None else 0,
                color=PALETTE[s % len(PALETTE)], label=_tx(name),
                error_kw={"elinewidth": 1, "ecolor": "#333333"},
            )
        _label_bar_axes(ax, x, cats, title, ylabel, xlabel, ylim)
        if k > 1 and n > 6:  # many (rotated) labels below: the legend goes beside the bars
            ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        elif k > 1:
            ax.legend(frameon=False, fontsize=8, ncols=min(k, 4), loc="upper left")
        return fig_to_png(fig, dpi)


@reusable
def heatmap(
    matrix: Any,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    title: str,
    annotations: Any = None,
    fmt: str = ".2f",
    *,
    xlabel: str | None = None,
    ylabel: str | None = None,
    cmap: str = "Blues",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
    dpi: int = 120,
) -> bytes:
    """A labelled matrix with each cell's value printed (e.g. a row-normalised confusion matrix).

    ``annotations`` (same shape, numbers or strings) is shown in parentheses under the
    value, e.g. raw counts.  NaN cells are left blank and marked with an en dash.
    """
    m = np.asarray(matrix, dtype=float)
    if m.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"heatmap: matrix shape {m.shape} does not match the labels "
                         f"({len(row_labels)}, {len(col_labels)})")
    ann = None
    if annotations is not None:
        ann = np.asarray(annotations, dtype=object)
        if ann.shape != m.shape:
            raise ValueError(f"heatmap: annotations shape {ann.shape} != matrix {m.shape}")
    finite = m[np.isfinite(m)]
    if not finite.size:
        raise NothingToShow(title, "no value to show")
    lo = vmin if vmin is not None else (float(finite.min()) if finite.size else 0.0)
    hi = vmax if vmax is not None else (float(finite.max()) if finite.size else 1.0)
    r, c = m.shape
    with _styled():
        # room for the row labels and the title, not only the cells
        label_w = 0.075 * max((len(str(x)) for x in row_labels), default=0)
        width = max(3.5, label_w + 0.6 + 0.9 * c + (1.0 if colorbar else 0), 0.09 * len(str(title)))
        fig = _new_figure(width, max(3.0, 1.4 + 0.7 * r))
        ax = fig.add_subplot()
        ax.grid(False)
        im = ax.imshow(np.ma.masked_invalid(m), cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
        ax.set_xticks(np.arange(c), [_tx(s) for s in col_labels])
        ax.set_yticks(np.arange(r), [_tx(s) for s in row_labels])
        _rotate_if_long(ax, [str(s) for s in col_labels])
        for side in ("top", "right", "bottom", "left"):
            ax.spines[side].set_visible(False)
        span = (hi - lo) or 1.0
        for i in range(r):
            for j in range(c):
                v = m[i, j]
                text = "\u2013" if not math.isfinite(v) else format(v, fmt)
                if ann is not None and ann[i, j] is not None:
                    text += f"\n({_fmt_annotation(ann[i, j])})"
                dark = math.isfinite(v) and (v - lo) / span > 0.6
                ax.text(j, i, _tx(text), ha="center", va="center", fontsize=8.5,
                        color="white" if dark else "#1b1f24", in_layout=False)
        ax.set_title(_tx(title))
        if xlabel:
            ax.set_xlabel(_tx(xlabel))
        if ylabel:
            ax.set_ylabel(_tx(ylabel))
        if colorbar:
            fig.colorbar(im, ax=ax, shrink=0.85)
        return fig_to_png(fig, dpi)


def row_normalise(counts: Any) -> np.ndarray:
    """Divide each row by its total; an empty row (no items of that true class) becomes NaN."""
    c = np.asarray(counts, dtype=float)
    totals = c.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, c / np.where(totals > 0, totals, 1.0), np.nan)


@reusable
def confusion_heatmap(
    counts: Any,
    labels: Sequence[str],
    title: str,
    *,
    xlabel: str = "Predicted",
    ylabel: str = "True",
    dpi: int = 120,
) -> bytes:
    """Row-normalised confusion matrix on a fixed 0-1 scale with raw counts in parentheses."""
    c = np.asarray(counts)
    return heatmap(row_normalise(c), labels, labels, title, annotations=c.astype(int), fmt=".2f",
                   xlabel=xlabel, ylabel=ylabel, vmin=0.0, vmax=1.0, dpi=dpi)


def _fmt_annotation(a: Any) -> str:
    if isinstance(a, (float, np.floating)) and float(a).is_integer():
        return str(int(a))
    if isinstance(a, (float, np.floating)):
        return format(float(a), ".3g")
    return str(a)


@reusable
def line_chart(
    x: Sequence[Any],
    series: Mapping[str, Sequence[float]],
    title: str,
    xlabel: str,
    ylabel: str,
    reference_lines: Mapping[str, float] | None = None,
    *,
    intervals: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    reference_label: str = "reference",
    ylim: tuple[float, float] | None = None,
    dpi: int = 120,
) -> bytes:
    """Lines with markers (e.g. a few-shot k sweep), optional shaded intervals per series.

    ``reference_lines`` draws dotted horizontal lines (e.g. zero-shot scores); a
    reference named like a series takes that series' colour.
    """
    n = len(x)
    drawn = {i for values in series.values()
             for i, v in enumerate(_as_float(values, n, "line_chart series")) if not math.isnan(v)}
    if len(drawn) < 2:
        raise NothingToShow(title, "a line needs values at two points or more, and "
                            + ("there are none" if not drawn else f"only one point ({x[min(drawn)]}) has a value"))
    colors: dict[str, str] = {}
    with _styled():
        fig = _new_figure(6.5, 4.0)
        ax = fig.add_subplot()
        xs = list(x)
        for s, (name, values) in enumerate(series.items()):
            color = PALETTE[s % len(PALETTE)]
            colors[name] = color
            y = _as_float(values, n, f"line_chart series {name!r}")
            ax.plot(xs, y, marker="o", color=color, label=_tx(name), linewidth=1.8, markersize=5)
            if intervals and name in intervals:
                lows, highs = intervals[name]
                ax.fill_between(xs, _as_float(lows, n, "interval lows"),
                                _as_float(highs, n, "interval highs"), color=color, alpha=0.15,
                                linewidth=0)
        extra = len(colors)
        for name, value in (reference_lines or {}).items():
            color = colors.get(name)
            if color is None:
                color, extra = PALETTE[extra % len(PALETTE)], extra + 1
            ax.axhline(float(value), linestyle=":", linewidth=1.5, color=color,
                       label=_tx(f"{name} ({reference_label})"))
        ax.set_title(_tx(title))
        ax.set_xlabel(_tx(xlabel))
        ax.set_ylabel(_tx(ylabel))
        if all(isinstance(v, (int, np.integer)) for v in xs):
            ax.set_xticks(xs)
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.legend(frameon=False, fontsize=8)
        return fig_to_png(fig, dpi)


@reusable
def line_panels(
    x: Sequence[float],
    panels: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]],
    title: str,
    xlabel: str,
    dpi: int = 120,
) -> bytes:
    """One panel per key of ``panels`` (e.g. a prior); in each, one colour per system and
    one line style per quantity (``panels[panel][system][quantity]`` values over ``x``)."""
    if not panels or not any(panels.values()):
        raise NothingToShow(title, "there is nothing to draw")
    n = len(x)
    styles = ["-", "--", ":", "-."]
    with _styled():
        fig = _new_figure(4.0 * len(panels) + 0.5, 4.0)
        axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        for ax, (panel, systems) in zip(axes, panels.items(), strict=True):
            for s, (system, quantities) in enumerate(systems.items()):
                for q, (quantity, values) in enumerate(quantities.items()):
                    ax.plot(list(x), _as_float(values, n, f"line_panels {system!r} {quantity!r}"),
                            color=PALETTE[s % len(PALETTE)], linestyle=styles[q % len(styles)],
                            linewidth=1.6, label=_tx(f"{system}: {quantity}"))
            ax.set_title(_tx(panel))
            ax.set_xlabel(_tx(xlabel))
            ax.set_ylim(0, 1.02)
        axes[0].legend(frameon=False, fontsize=7)
        fig.suptitle(_tx(title))
        return fig_to_png(fig, dpi)


@reusable
def dot_interval_chart(
    labels: Sequence[str],
    values: Sequence[float],
    lows: Sequence[float],
    highs: Sequence[float],
    title: str,
    *,
    xlabel: str | None = None,
    bands: Sequence[Any] | None = None,
    sort: bool = True,
    reference: float | None = None,
    sides: tuple[str, str] | None = None,
    dpi: int = 120,
) -> bytes:
    """A leaderboard: one dot per entry with its interval as a horizontal line.

    Entries are sorted best-first unless ``sort=False``.  ``bands`` (one label per
    entry, e.g. the tier of statistically inseparable models) shades alternate bands
    and names each band at the right edge.  ``reference`` draws a dotted vertical line.
    ``sides`` names what the left and the right of the x axis mean (e.g. "worse" and
    "better"), written under the axis with arrows pointing outwards.
    """
    n = len(labels)
    v = _as_float(values, n, "dot_interval_chart values")
    lo = _as_float(lows, n, "dot_interval_chart lows")
    hi = _as_float(highs, n, "dot_interval_chart highs")
    if not np.isfinite(v).any():
        raise NothingToShow(title, "no value to show")
    if bands is not None and len(bands) != n:
        raise ValueError(f"dot_interval_chart: bands needs {n} entries, got {len(bands)}")
    order = list(range(n))
    if sort:  # stable: ties keep input order; NaN last
        order.sort(key=lambda i: (math.isnan(v[i]), -v[i] if not math.isnan(v[i]) else 0.0))
    with _styled():
        # wide enough for the longest label beside the plot and for the title above it
        longest = max((len(str(x)) for x in labels), default=0)
        fig = _new_figure(min(14.0, max(6.5, 3.5 + 0.075 * longest, 0.1 * len(str(title)))),
                          max(2.2, 0.38 * n + 1.2))
        ax = fig.add_subplot()
        ax.grid(axis="y", visible=False)
        ys = np.arange(n)[::-1].astype(float)  # first entry at the top
        if bands is not None:
            band_ids: list[Any] = []
            for i in order:
                if bands[i] not in band_ids:
                    band_ids.append(bands[i])
            for pos, i in enumerate(order):
                k = band_ids.index(bands[i])
                if k % 2 == 1:
                    ax.axhspan(ys[pos] - 0.5, ys[pos] + 0.5, color="#000000", alpha=0.06,
                               linewidth=0)
                first = pos == 0 or bands[order[pos - 1]] != bands[i]
                if first:
                    ax.annotate(_tx(bands[i]), xy=(1.0, ys[pos]), xycoords=("axes fraction", "data"),
                                xytext=(4, 0), textcoords="offset points", va="center",
                                fontsize=8, color="#57606a")
        for pos, i in enumerate(order):
            if not (math.isnan(lo[i]) or math.isnan(hi[i])):
                ax.plot([lo[i], hi[i]], [ys[pos]] * 2, color=PALETTE[0], linewidth=2,
                        solid_capstyle="butt")
            if not math.isnan(v[i]):
                ax.plot([v[i]], [ys[pos]], marker="o", color=PALETTE[0], markersize=6,
                        markeredgecolor="white", zorder=3)
        if reference is not None:
            ax.axvline(float(reference), linestyle=":", color="#57606a", linewidth=1.2)
        ax.set_yticks(ys, [_tx(labels[i]) for i in order])
        ax.set_ylim(-0.5, n - 0.5)
        # flush right: a title longer than the plot runs left over the labels, never off the image
        ax.set_title(_tx(title), loc="right")
        if xlabel:
            ax.set_xlabel(_tx(xlabel))
        if sides is not None:
            # the cue sits above the plot, flush with its left and right edges (inside its width,
            # so a long label never pushes it off the image)
            left, right = sides
            for x, text, ha in ((0.0, f"\u2190 {left}", "left"), (1.0, f"{right} \u2192", "right")):
                ax.annotate(_tx(text), xy=(x, 1.0), xycoords="axes fraction", xytext=(0, 3),
                            textcoords="offset points", ha=ha, va="bottom", fontsize=8.5, color="#57606a")
            ax.set_title(_tx(title), loc="right", pad=16)
            if reference is not None:  # both sides of the reference stay in view
                lo_x, hi_x = ax.get_xlim()
                span = max(abs(lo_x - reference), abs(hi_x - reference))
                ax.set_xlim(reference - span, reference + span)
        return fig_to_png(fig, dpi)


@reusable
def box_chart(
    groups: Mapping[str, Sequence[float]],
    title: str,
    ylabel: str,
    *,
    xlabel: str | None = None,
    dpi: int = 120,
) -> bytes:
    """Distributions per group as box plots (e.g. moderation scores per severity level)."""
    names = list(groups)
    data = [np.asarray([x for x in groups[g] if x is not None], dtype=float) for g in names]
    data = [d[~np.isnan(d)] for d in data]
    if not any(d.size > 1 for d in data):
        raise NothingToShow(title, "a distribution needs two values or more in a group, and "
                            + ("there are none" if not any(d.size for d in data)
                               else "each group has at most one"))
    with _styled():
        fig = _new_figure(max(4.5, 1.2 + 0.9 * len(names)), 4.0)
        ax = fig.add_subplot()
        bp = ax.boxplot(data, patch_artist=True, widths=0.6,
                        medianprops={"color": "#1b1f24"}, flierprops={"markersize": 3})
        for s, patch in enumerate(bp["boxes"]):
            patch.set_facecolor(PALETTE[s % len(PALETTE)])
            patch.set_alpha(0.75)
        ax.set_xticks(np.arange(1, len(names) + 1), [_tx(g) for g in names])
        _rotate_if_long(ax, names)
        ax.grid(axis="x", visible=False)
        ax.set_title(_tx(title))
        ax.set_ylabel(_tx(ylabel))
        if xlabel:
            ax.set_xlabel(_tx(xlabel))
        return fig_to_png(fig, dpi)


@reusable
def scatter_chart(
    labels: Sequence[str],
    x: Sequence[float],
    y: Sequence[float],
    title: str,
    xlabel: str,
    ylabel: str,
    *,
    diagonal: bool = True,
    lims: tuple[float, float] | None = None,
    dpi: int = 120,
) -> bytes:
    """One labelled point per entry (e.g. a model's single- against multi-turn score);
    ``diagonal`` draws y = x, so points below it lose on the y measure."""
    n = len(labels)
    xv = _as_float(x, n, "scatter_chart x")
    yv = _as_float(y, n, "scatter_chart y")
    keep = ~(np.isnan(xv) | np.isnan(yv))
    if not keep.any():
        raise NothingToShow(title, "no entry has both values")
    with _styled():
        fig = _new_figure(5.5, 5.0)
        ax = fig.add_subplot()
        ax.scatter(xv[keep], yv[keep], color=PALETTE[0], s=30, zorder=3)
        for i in np.flatnonzero(keep):
            ax.annotate(_tx(labels[i]), (xv[i], yv[i]), xytext=(4, 3), textcoords="offset points", fontsize=7.5)
        if lims is None:
            both = np.concatenate([xv[keep], yv[keep]]) if keep.any() else np.array([0.0, 1.0])
            pad = 0.05 * (float(both.max() - both.min()) or 1.0)
            lims = (float(both.min()) - pad, float(both.max()) + pad)
        if diagonal:
            ax.plot(lims, lims, linestyle=":", color="#57606a", linewidth=1.2)
        ax.set_xlim(*lims)
        ax.set_ylim(*lims)
        ax.set_title(_tx(title))
        ax.set_xlabel(_tx(xlabel))
        ax.set_ylabel(_tx(ylabel))
        return fig_to_png(fig, dpi)


@reusable
def stacked_bar_chart(
    categories: Sequence[str],
    stacks: Mapping[str, Sequence[float]],
    title: str,
    ylabel: str,
    *,
    colors: Sequence[str] | None = None,
    xlabel: str | None = None,
    ylim: tuple[float, float] | None = (0.0, 1.0),
    dpi: int = 120,
) -> bytes:
    """One bar per category split into stacked parts (e.g. full / partial / failed shares).

    ``stacks`` maps each part's name to one value per category, bottom part first.
    A missing value (None/NaN) draws nothing for that part.
    """
    cats = [_tx(c) for c in categories]
    n = len(cats)
    if not stacks:
        raise ValueError("stacked_bar_chart: no stacks")
    if not any(_finite(v) for v in stacks.values()):
        raise NothingToShow(title, "no value to show")
    with _styled():
        fig = _new_figure(max(5.0, min(14.0, 1.5 + 0.45 * n)), 4.2)
        ax = fig.add_subplot()
        x = np.arange(n, dtype=float)
        bottom = np.zeros(n)
        for s, (name, values) in enumerate(stacks.items()):
            y = _as_float(values, n, f"stacked_bar_chart part {name!r}")
            keep = ~np.isnan(y)
            color = (colors[s] if colors is not None and s < len(colors) else PALETTE[s % len(PALETTE)])
            ax.bar(x[keep], y[keep], 0.8, bottom=bottom[keep], color=color, label=_tx(name))
            bottom = bottom + np.nan_to_num(y)
        _label_bar_axes(ax, x, cats, title, ylabel, xlabel, ylim)
        ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars
        return fig_to_png(fig, dpi)
