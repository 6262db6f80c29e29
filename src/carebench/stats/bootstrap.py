"""Seeded percentile bootstraps: item, cluster and paired.

Resampling is expressed as a weight matrix ``w[b, i]`` = how many times row
``i`` appears in resample ``b``. Any statistic that is a sum over rows then
becomes one matrix product for all resamples at once: resampled confusion
matrices are ``w @ onehot(t*k + p)`` (exact integer counts held in floats), and
resampled means are ``w @ x / w.sum()``. There is no Python loop over B for
built-in metrics; resamples are drawn in chunks only to bound memory.

Seeds follow the papers: 42 for item bootstraps (Beyond the Flag, Appendix F),
12345 for cluster and paired bootstraps. The draws are
``default_rng(seed).integers(0, n_units, size=(B, n_units))`` (units are rows,
or groups when ``groups`` is given), so the generic loop-based
:func:`bootstrap_ci` and the vectorized functions see identical resamples.
Intervals are percentile intervals ``[alpha/2, 1-alpha/2]`` (numpy's default
linear interpolation); resamples where a statistic is undefined (NaN, e.g.
kappa of a constant resample) are left out of the percentiles.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from carebench.stats._validation import StatsError, check_alpha, check_B, check_k, label_pair
from carebench.stats.metrics import CM_METRICS, LOWER_IS_BETTER, resolve_names

DEFAULT_B = 2000
ITEM_SEED = 42
CLUSTER_SEED = 12345
PAIRED_SEED = 12345

#: Upper bound on cells of one weight chunk (B_chunk x units); ~32 MB of float64.
_CHUNK_CELLS = 4_000_000


def _default_seed(seed: int | None, groups: object) -> int:
    if seed is not None:
        return int(seed)
    return CLUSTER_SEED if groups is not None else ITEM_SEED


class Resampler:
    """Draws B bootstrap resamples of n rows, optionally resampling whole groups.

    ``groups[i]`` labels the cluster of row ``i`` (source case, conversation...);
    a resampled group brings all of its rows along, so rows of one group (and all
    judges' verdicts stored on them) stay together.
    """

    def __init__(self, n: int, B: int = DEFAULT_B, seed: int = ITEM_SEED, groups: object = None):
        if n < 1:
            raise StatsError("cannot bootstrap an empty sample")
        self.n = int(n)
        self.B = check_B(B)
        self.seed = int(seed)
        if groups is None:
            self.inverse = None
            self.n_units = self.n
        else:
            g = np.asarray(groups)
            if g.ndim != 1 or g.size != n:
                raise StatsError(f"groups must have one entry per row ({n}), got shape {g.shape}")
            _, self.inverse = np.unique(g, return_inverse=True)
            self.n_units = int(self.inverse.max()) + 1
        self.chunk = max(1, min(self.B, _CHUNK_CELLS // max(self.n_units, self.n)))

    def unit_draws(self) -> Iterator[np.ndarray]:
        """Chunks ``(b, n_units)`` of drawn unit indices, in resample order."""
        rng = np.random.default_rng(self.seed)
        done = 0
        while done < self.B:
            b = min(self.chunk, self.B - done)
            yield rng.integers(0, self.n_units, size=(b, self.n_units))
            done += b

    def weight_chunks(self) -> Iterator[np.ndarray]:
        """Chunks ``(b, n)`` of row multiplicities (float64, exact small integers)."""
        for draws in self.unit_draws():
            b, u = draws.shape
            flat = (np.arange(b)[:, None] * u + draws).ravel()
            w_units = np.bincount(flat, minlength=b * u).reshape(b, u).astype(float)
            yield w_units if self.inverse is None else w_units[:, self.inverse]

    def weights(self) -> np.ndarray:
        """All ``(B, n)`` row multiplicities at once."""
        return np.concatenate(list(self.weight_chunks()), axis=0)

    def row_indices(self) -> Iterator[np.ndarray]:
        """Row-index array of each resample, one at a time (for arbitrary statistics)."""
        if self.inverse is None:
            for draws in self.unit_draws():
                yield from draws
            return
        order = np.argsort(self.inverse, kind="stable")
        sizes = np.bincount(self.inverse, minlength=self.n_units)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        members = [order[s : s + c] for s, c in zip(starts, sizes, strict=True)]
        for draws in self.unit_draws():
            for row in draws:
                yield np.concatenate([members[g] for g in row])


def percentile_interval(samples: np.ndarray, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval along the last axis, ignoring NaN resamples.

    Many rows at once (one per model, slice...): the rows without NaN go through one
    ``np.percentile`` call, whose partition and interpolation act on each row exactly as
    on that row alone, so the values are those of ``np.nanpercentile`` row by row, which
    calls per row from Python (the cost of thousands of small intervals); rows with NaN
    resamples still take that route."""
    check_alpha(alpha)
    q = [100 * alpha / 2, 100 * (1 - alpha / 2)]
    x = np.asarray(samples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if x.ndim < 2 or x.shape[-1] == 0 or x.dtype.kind != "f":
            lo, hi = np.nanpercentile(x, q, axis=-1)
            return lo, hi
        rows = x.reshape(-1, x.shape[-1])
        lo, hi = np.empty(rows.shape[0]), np.empty(rows.shape[0])
        has_nan = np.isnan(rows).any(axis=1)
        clean = ~has_nan
        if clean.all():
            lo[:], hi[:] = np.percentile(rows, q, axis=-1)
        elif clean.any():
            lo[clean], hi[clean] = np.percentile(rows[clean], q, axis=-1)
        for i in np.flatnonzero(has_nan).tolist():
            lo[i], hi[i] = np.nanpercentile(rows[i], q)
    return lo.reshape(x.shape[:-1]), hi.reshape(x.shape[:-1])


# ----------------------------------------------------------------------------- metrics


def _prediction_matrix(
    y_true: object, preds: object, k: int
) -> tuple[np.ndarray, np.ndarray, bool]:
    P = np.asarray(preds)
    single = P.ndim == 1
    if P.ndim not in (1, 2):
        raise StatsError(f"preds must have shape (n,) or (S, n), got {P.shape}")
    P2 = P[None, :] if single else P
    if P2.shape[0] == 0:
        raise StatsError("preds holds no systems")
    t = None
    rows = []
    for s in range(P2.shape[0]):
        t, p = label_pair(y_true, P2[s], k)
        rows.append(p)
    return t, np.stack(rows), single


def _onehot_cells(t: np.ndarray, P: np.ndarray, k: int) -> np.ndarray:
    """``(n, S*k*k)`` indicator of each row's confusion cell, per system."""
    S, n = P.shape
    E = np.zeros((n, S, k * k))
    E[np.arange(n)[None, :], np.arange(S)[:, None], t[None, :] * k + P] = 1.0
    return E.reshape(n, S * k * k)


def bootstrap_confusion(
    y_true: object,
    preds: object,
    k: int,
    B: int = DEFAULT_B,
    seed: int | None = None,
    groups: object = None,
) -> np.ndarray:
    """Resampled confusion matrices ``(S, B, k, k)`` (``(B, k, k)`` for one system)."""
    k = check_k(k)
    t, P, single = _prediction_matrix(y_true, preds, k)
    S, n = P.shape
    rs = Resampler(n, B, _default_seed(seed, groups), groups)
    E = _onehot_cells(t, P, k)
    cms = np.concatenate([w @ E for w in rs.weight_chunks()], axis=0)  # (B, S*k*k)
    cms = cms.reshape(rs.B, S, k, k).transpose(1, 0, 2, 3)
    return cms[0] if single else cms


def bootstrap_metric_samples(
    y_true: object,
    preds: object,
    k: int,
    names: Iterable[str] | str | None = None,
    B: int = DEFAULT_B,
    seed: int | None = None,
    groups: object = None,
) -> dict[str, np.ndarray]:
    """Per-resample metric values: ``name -> (S, B)`` (``(B,)`` for one system)."""
    names = resolve_names(names)
    cms = bootstrap_confusion(y_true, preds, k, B, seed, groups)
    return {name: CM_METRICS[name](cms) for name in names}


def bootstrap_metrics(
    y_true: object,
    preds: object,
    k: int,
    names: Iterable[str] | str | None = None,
    B: int = DEFAULT_B,
    seed: int | None = None,
    alpha: float = 0.05,
    groups: object = None,
) -> dict[str, dict] | list[dict[str, dict]]:
    """Point value and percentile interval of each metric, vectorized over resamples.

    ``preds`` of shape ``(n,)`` returns ``{name: {"value", "ci"}}``; shape ``(S, n)``
    returns one such dict per system, all systems evaluated on the same resamples
    (so their intervals are comparable). ``groups`` switches to cluster
    resampling. ``seed`` defaults to 42 (item) or 12345 (cluster).
    """
    check_alpha(alpha)
    names = resolve_names(names)
    k = check_k(k)
    t, P, single = _prediction_matrix(y_true, preds, k)
    full = np.stack([np.bincount(t * k + p, minlength=k * k).reshape(k, k) for p in P])
    samples = bootstrap_metric_samples(t, P, k, names, B, seed, groups)
    out: list[dict[str, dict]] = [{} for _ in range(P.shape[0])]
    for name in names:
        values = CM_METRICS[name](full)
        lo, hi = percentile_interval(samples[name], alpha)
        for s in range(P.shape[0]):
            out[s][name] = {"value": float(values[s]), "ci": (float(lo[s]), float(hi[s]))}
    return out[0] if single else out


# ----------------------------------------------------------------------------- generic


def bootstrap_ci(
    stat_fn: Callable[..., float],
    *arrays: object,
    B: int = DEFAULT_B,
    seed: int | None = None,
    alpha: float = 0.05,
    groups: object = None,
) -> tuple[float, float, float]:
    """``(value, lo, hi)`` for any statistic ``stat_fn(*arrays_resampled) -> float``.

    Arrays are resampled together along their first axis (same rows for all).
    This calls ``stat_fn`` B times; prefer the vectorized functions when they apply.
    """
    check_alpha(alpha)
    arrs = [np.asarray(a) for a in arrays]
    if not arrs:
        raise StatsError("bootstrap_ci needs at least one array")
    n = len(arrs[0])
    if any(len(a) != n for a in arrs):
        raise StatsError(f"arrays must share their first dimension, got {[len(a) for a in arrs]}")
    rs = Resampler(n, B, _default_seed(seed, groups), groups)
    value = float(stat_fn(*arrs))
    samples = np.array([stat_fn(*(a[idx] for a in arrs)) for idx in rs.row_indices()], dtype=float)
    lo, hi = percentile_interval(samples, alpha)
    return value, float(lo), float(hi)


def _weighted_means(x: np.ndarray, rs: Resampler) -> np.ndarray:
    """Resampled means of each column of ``x`` (n, m) -> (m, B)."""
    parts = [(w @ x) / w.sum(axis=1, keepdims=True) for w in rs.weight_chunks()]
    return np.concatenate(parts, axis=0).T


def _values(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise StatsError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise StatsError(f"{name} is empty: a statistic needs at least one item")
    if not np.all(np.isfinite(arr)):
        raise StatsError(f"{name} contains NaN or infinite values")
    return arr


def masked_mean_samples(
    values: object,
    mask: object,
    B: int = DEFAULT_B,
    seed: int | None = None,
    groups: object = None,
) -> np.ndarray:
    """Resampled means of every column of ``values`` (n, m) over the rows where
    ``mask`` (n, m) is true: ``(B, m)``, NaN where a resample holds no such row.

    Why: several statistics measured on the same items (e.g. every system x
    judge cell scored on one prompt) must share each resample so their intervals
    stay matched, while each column may miss some rows (a failed call). With
    ``groups`` whole clusters are resampled (seed defaults to 12345), else rows (42).
    """
    x = np.asarray(values, dtype=float)
    m = np.asarray(mask, dtype=bool)
    if x.ndim != 2 or m.shape != x.shape:
        raise StatsError(f"values and mask must be matching (n, m) arrays, got {x.shape} and {m.shape}")
    if x.shape[0] == 0:
        raise StatsError("cannot bootstrap an empty sample")
    xm = np.where(m, x, 0.0)
    if not np.all(np.isfinite(xm)):
        raise StatsError("values contain NaN or infinite entries where mask is true")
    mf = m.astype(float)
    rs = Resampler(x.shape[0], B, _default_seed(seed, groups), groups)
    parts = []
    with np.errstate(invalid="ignore", divide="ignore"):
        for w in rs.weight_chunks():
            parts.append((w @ xm) / (w @ mf))
    return np.concatenate(parts, axis=0)


def bootstrap_mean_ci(
    values: object,
    B: int = DEFAULT_B,
    seed: int | None = None,
    alpha: float = 0.05,
    groups: object = None,
) -> tuple[float, float, float]:
    """Vectorized ``(mean, lo, hi)``; with ``groups``, whole groups are resampled."""
    x = _values(values, "values")
    rs = Resampler(x.size, B, _default_seed(seed, groups), groups)
    lo, hi = percentile_interval(_weighted_means(x[:, None], rs)[0], alpha)
    return float(x.mean()), float(lo), float(hi)


def cluster_bootstrap_mean(
    values: object,
    groups: object,
    B: int = DEFAULT_B,
    seed: int = CLUSTER_SEED,
    alpha: float = 0.05,
) -> tuple[float, float, float]:
    """Mean over rows with an interval from resampling whole groups (e.g. conversations)."""
    if groups is None:
        raise StatsError("cluster_bootstrap_mean needs groups (one label per row)")
    return bootstrap_mean_ci(values, B, seed, alpha, groups)


# ----------------------------------------------------------------------------- paired


@dataclass(frozen=True)
class PairedResult:
    """Paired comparison of system A against system B on the same items.

    ``diff`` is stat(A) - stat(B) on the full data with its percentile interval;
    ``p_improve`` is the share of resamples where A is better than B (higher, or
    lower for lower-is-better metrics), ties counting half.
    """

    diff: float
    ci: tuple[float, float]
    p_improve: float
    value_a: float = float("nan")
    value_b: float = float("nan")
    B: int = DEFAULT_B
    seed: int = PAIRED_SEED

    @property
    def separated(self) -> bool:
        """True when the interval of the difference excludes 0."""
        return bool(self.ci[0] > 0 or self.ci[1] < 0)


def _p_improve(sa: np.ndarray, sb: np.ndarray, lower_is_better: bool = False) -> float:
    ok = ~(np.isnan(sa) | np.isnan(sb))
    if not ok.any():
        return float("nan")
    a, b = sa[ok], sb[ok]
    better = (a < b) if lower_is_better else (a > b)
    return float(better.mean() + 0.5 * (a == b).mean())


def _paired_from_samples(
    value_a: float,
    value_b: float,
    sa: np.ndarray,
    sb: np.ndarray,
    alpha: float,
    B: int,
    seed: int,
    lower_is_better: bool = False,
) -> PairedResult:
    lo, hi = percentile_interval(sa - sb, alpha)
    return PairedResult(
        diff=float(value_a - value_b),
        ci=(float(lo), float(hi)),
        p_improve=_p_improve(sa, sb, lower_is_better),
        value_a=float(value_a),
        value_b=float(value_b),
        B=B,
        seed=seed,
    )


def paired_bootstrap(
    a: object,
    b: object,
    B: int = DEFAULT_B,
    seed: int = PAIRED_SEED,
    alpha: float = 0.05,
    groups: object = None,
    stat: Callable[[np.ndarray, np.ndarray], float] | None = None,
) -> PairedResult:
    """Paired bootstrap of stat(a) - stat(b) over the same resampled items.

    By default ``a`` and ``b`` are per-item scores and the statistic is the mean
    (vectorized). ``stat(x, idx) -> float`` computes any statistic of ``x``
    (``a`` or ``b``) restricted to the row indices ``idx``; use it for
    metric-level differences, e.g. ``stat=lambda pred, idx: macro_f1(y[idx],
    pred[idx], 4)`` with prediction vectors as ``a`` and ``b``.
    """
    check_alpha(alpha)
    if stat is None:
        xa, xb = _values(a, "a"), _values(b, "b")
        if xa.size != xb.size:
            raise StatsError(f"a has {xa.size} items but b has {xb.size}: pairs must align")
        rs = Resampler(xa.size, B, seed, groups)
        means = _weighted_means(np.stack([xa, xb], axis=1), rs)
        return _paired_from_samples(xa.mean(), xb.mean(), means[0], means[1], alpha, rs.B, rs.seed)
    xa, xb = np.asarray(a), np.asarray(b)
    if len(xa) == 0 or len(xa) != len(xb):
        raise StatsError(
            f"a and b must be non-empty and aligned, got {len(xa)} and {len(xb)} items"
        )
    rs = Resampler(len(xa), B, seed, groups)
    full = np.arange(len(xa))
    sa, sb = [], []
    for idx in rs.row_indices():
        sa.append(stat(xa, idx))
        sb.append(stat(xb, idx))
    return _paired_from_samples(
        stat(xa, full),
        stat(xb, full),
        np.array(sa, float),
        np.array(sb, float),
        alpha,
        rs.B,
        rs.seed,
    )


def paired_metric_bootstrap(
    y_true: object,
    pred_a: object,
    pred_b: object,
    k: int,
    name: str,
    B: int = DEFAULT_B,
    seed: int = PAIRED_SEED,
    alpha: float = 0.05,
    groups: object = None,
) -> PairedResult:
    """Paired bootstrap of metric(A) - metric(B), vectorized (one product for all resamples).

    ``p_improve`` is oriented by the metric: for MAE and triage rates, A improves
    when its value is lower.
    """
    check_alpha(alpha)
    (name,) = resolve_names([name])
    k = check_k(k)
    t, P, _ = _prediction_matrix(y_true, np.stack([np.asarray(pred_a), np.asarray(pred_b)]), k)
    full = np.stack([np.bincount(t * k + p, minlength=k * k).reshape(k, k) for p in P])
    values = CM_METRICS[name](full)
    samples = CM_METRICS[name](bootstrap_confusion(t, P, k, B, seed, groups))
    return _paired_from_samples(
        values[0], values[1], samples[0], samples[1], alpha, B, seed, name in LOWER_IS_BETTER
    )
