"""The risk report: Beyond the Flag's tables and figures from a run directory.

Table 2 (seven metrics with the analytic chance row), Table 4 (bootstrap intervals),
Figure 1 (per-class F1), Figure 3 (row-normalised confusion matrices with counts),
Table 3 (tokens, $ per 1,000 items, median latency), failures per method, under- and
over-triage, paired comparisons against the best method, Figure 2 (moderation score
distributions, when scores exist), Figure 6 (method comparison) and a per-item table
with schema profiles when present.

:func:`build_risk_report` builds the report from metrics, records and the manifest
(pure; the run skeleton writes it), so ``carebench report DIR`` needs no model
call. A few-shot sweep run (manifest key ``sweep``) gets the sweep table and
Figure 4 (Appendix G) on top, computed from the same metrics.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from carebench.models.pricing import unpriced_note
from carebench.report import (
    Callout,
    Details,
    Figure,
    Headline,
    Interval,
    KeyValue,
    Paragraph,
    Report,
    Section,
    Table,
    bar_chart,
    box_chart,
    figure_name,
)
from carebench.report.figures import (
    NothingToShow,
    confusion_heatmap,
    figure_or_sentence,
    line_chart,
)
from carebench.report.headline import SMALL_N, Candidate, best_headline
from carebench.risk.deployment_report import deployment_rows, deployment_sections, weighting_text
from carebench.risk.engagement import RISK_CLASSES
from carebench.risk.scale import LEVEL_NAMES
from carebench.risk.scoring import (
    DEFAULT_MAX_FAILURE_SHARE,
    EXCLUDED,
    TABLE2_METRICS,
    method_order,
    system_identities,
)
from carebench.system_names import display_names, system_identity
from carebench.wording import count, label, name_with_code

HEADERS = {
    "accuracy": "Acc ↑", "macro_f1": "F1-Mac ↑", "weighted_f1": "F1-Wt ↑", "qwk": "QWK ↑",
    "mae": "MAE ↓", "adjacent_accuracy": "Adj. Acc ↑", "high_risk_f1": "HR F1 ↑",
    "under_triage": "Under-triage ↓", "over_triage": "Over-triage ↓",
}
LOWER_BETTER = {"mae", "under_triage", "over_triage"}
MAX_ITEMS_SHOWN = 1000
EXCERPT = 160


# ----------------------------------------------------------------------------- building


def _iv(cell: dict[str, Any]) -> Interval | None:
    if cell is None or cell.get("value") is None:
        return None
    lo, hi = cell.get("ci") or (None, None)
    return Interval(cell["value"], lo, hi)


def _val(cell: dict[str, Any]) -> float | None:
    return None if cell is None else cell.get("value")


def shown_names(records: list[dict[str, Any]], manifest: dict[str, Any]) -> dict[str, str]:
    """Each record name's name in this run's report: the method and its options when no
    other system of the run has them, else the full name with the model (never two alike),
    without the model's server address unless only the address tells two systems apart.
    A name the user gave (``label``) is kept."""
    entries = {m.get("name"): m for m in manifest.get("methods") or [] if isinstance(m, dict)}
    full = system_identities(records, manifest)
    short = {}
    for name in full:
        e = entries.get(name) or {}
        method = e.get("method") or name
        if name != method and not name.startswith((f"{method}[", f"{method}@")):
            short[name] = full[name] = name  # the user's own label
        else:
            short[name] = system_identity(method, e.get("options"))
    local = {k: re.sub(r"@https?://\S+", "", v) for k, v in full.items()}
    return display_names(local if len(set(local.values())) == len(local) else full, short)


def _renamed(metrics: dict[str, Any], records: list[dict[str, Any]], manifest: dict[str, Any],
             shown: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """The run's metrics, records and manifest with every record name replaced by its shown name,
    so tables, legends and figure titles all say the same."""
    def n(x: Any) -> Any:
        return shown.get(x, x)

    m = dict(metrics)
    m["methods"] = {n(k): v for k, v in (metrics.get("methods") or {}).items()}
    m["incomplete"] = [n(x) for x in metrics.get("incomplete") or []]
    st = dict(metrics.get("settings") or {})
    if "best_by_macro_f1" in st:
        st["best_by_macro_f1"] = n(st["best_by_macro_f1"])
    if isinstance(st.get("flagged"), list):
        st["flagged"] = [n(x) for x in st["flagged"]]
    elif isinstance(st.get("flagged"), dict):
        st["flagged"] = {n(k): v for k, v in st["flagged"].items()}
    m["settings"] = st
    pv = dict(metrics.get("paired_vs_best") or {})
    if pv:
        pv["reference"] = n(pv.get("reference"))
        pv["comparisons"] = {n(k): v for k, v in (pv.get("comparisons") or {}).items()}
        m["paired_vs_best"] = pv
    recs = [dict(r, method=n(r["method"])) for r in records]
    man = dict(manifest)
    man["methods"] = [dict(e, name=n(e.get("name"))) for e in manifest.get("methods") or [] if isinstance(e, dict)]
    man["harness_failures"] = {n(k): v for k, v in (manifest.get("harness_failures") or {}).items()}
    return m, recs, man


def build_risk_report(metrics: dict[str, Any], records: list[dict[str, Any]],
                 manifest: dict[str, Any]) -> Report:
    shown = {} if manifest.get("sweep") else shown_names(records, manifest)
    deployment = deployment_sections(metrics, shown)
    weighted = weighting_text(metrics)
    records = [r for r in records if r.get("gold") is not None]  # severity: suicide-related items
    if not manifest.get("sweep"):  # a sweep's arms are named by k, not by system
        metrics, records, manifest = _renamed(metrics, records, manifest, shown)
    ds = manifest.get("dataset") or {}
    st = metrics.get("settings") or {}
    incomplete = list(metrics.get("incomplete") or [])
    names = [n for n in method_order(records) if n not in incomplete]
    resampling = ("cluster resampling by group" if str(st.get("resampling", "")).startswith("cluster")
                  else "item resampling")
    notes = [
        f"{count(int(metrics['n']), 'item')}; "
        + ", ".join(f"{k} {v}" for k, v in metrics["label_counts"].items()),
        (f"Bootstrap: B={st.get('bootstrap')}, seed {st.get('seed')}, {resampling}, "
        "95% percentile intervals."),
        f"Failure policy: {st.get('failures')} ("
        + ("failed predictions scored as wrong, at the level farthest from gold"
           if st.get("failures") == "wrong" else "failed predictions excluded per method")
        + ").",
    ]
    if metrics.get("n_negative"):
        notes.append(f"Severity is scored on the {metrics['n']} suicide-related items; the "
                     f"{metrics['n_negative']} negative items are scored for detection only.")
    if weighted:
        notes.append(weighted)
    overview = _overview(ds, manifest, st, _folds_text(metrics, manifest))
    overview.blocks.extend(_method_notes(records, manifest))
    overview.blocks.extend(panel_notes(metrics, names))
    # the headline table comes first, with what must be read beside it (illustrative data,
    # methods cut short, failing methods); the run's long metadata goes last
    headline = _table2(metrics, names)
    headline.blocks[:0] = _flag_callouts(metrics, names)
    if ds.get("illustrative"):
        headline.blocks.insert(0, Callout(
            "Illustrative data: this data set is marked illustrative (written to demonstrate the pipeline, "
            "not real user text, not clinically annotated); these numbers say nothing about any method's "
            "real performance.", "warning"))
    failed_calls = manifest.get("harness_failures") or {}
    failed = [n for n in incomplete if n in failed_calls]
    stopped = [n for n in incomplete if n not in failed_calls]
    if failed:
        headline.blocks.append(Callout(
            "Incomplete (calls failed after every retry: the server or the connection failed, "
            "not the model; a harness failure is not scored and never counted as the method's "
            "failures; re-run the same command to retry exactly those calls): "
            + ", ".join(f"{n} ({failed_calls[n]} failed call{'s' * (failed_calls[n] != 1)})"
                        for n in failed) + ".", "warning"))
    if stopped:
        headline.blocks.append(Callout(
            "Incomplete (the run's budget stopped it before these finished; not scored, never "
            "counted as failures; re-run without the budget to finish from the cache): "
            + ", ".join(f"{n} ({metrics['methods'][n]['n_finished']} items finished)" for n in stopped)
            + ".", "warning"))
    warnings = _warnings(metrics, names, manifest)
    sections = [headline, *warnings, _table4(metrics, names),
                _per_class(metrics, names), _confusions(metrics, names), _triage(metrics, names),
                _failures(metrics, names, st),
                _cost(metrics, names, manifest.get("unpriced_models") or []),
                _paired(metrics), _comparison(metrics, names), *deployment]
    mod = _moderation_figure(records)
    if mod is not None:
        sections.append(mod)
    sections.append(_items(records, names))
    sections.append(overview)
    title = "carebench risk: graded suicide-risk measurement"
    sweep = manifest.get("sweep")
    if sweep:
        title = "carebench risk: few-shot k sweep"
        sections.insert(0, sweep_section(sweep_rows(metrics, sweep["ks"], st.get("failures", "wrong")),
                                         int(sweep["pool_size"]), int(metrics["n"])))
    subtitle = f"{ds.get('name', '?')} ({ds.get('source', '?')})"
    return Report(title=title, subtitle=subtitle, notes=notes, sections=sections)


def policy_text(metrics: dict[str, Any]) -> str:
    """The failure policy in force, for every table whose numbers it changes."""
    policy = (metrics.get("settings") or {}).get("failures")
    if policy == "drop":
        return "Failure policy: drop (failed predictions left out of that method's numbers)."
    return "Failure policy: wrong (failed predictions scored at the level farthest from gold)."


def _flag(metrics: dict[str, Any], name: str) -> bool:
    return bool(metrics["methods"][name].get("flagged"))


def _shown(metrics: dict[str, Any], name: str) -> str:
    """A method's row label: a constrained decoding is named beside it, and a flagged
    method is marked wherever it is listed."""
    e = metrics["methods"].get(name) or {}
    label = name
    if e.get("decoding") and e["decoding"] != "plain" and f"decoding={e['decoding']}" not in name:
        label = f"{name} (decoding: {e['decoding']})"
    return f"⚠ {label} (flagged: not ranked)" if _flag(metrics, name) else label


def panel_notes(metrics: dict[str, Any], names: list[str]) -> list[Paragraph]:
    """Which voters each ensemble used (§4.3's panel is three models, one prompt)."""
    out = []
    for n in names:
        panel = (metrics["methods"].get(n) or {}).get("panel")
        if not panel:
            continue
        if panel.get("kind") == "variants":
            out.append(Paragraph(
                f"{n}: voters are the prompt variants {', '.join(panel['members'])} on one model "
                f"({panel.get('model')}), as asked for with voters=variants; this is not the "
                "paper's panel of three models under one clinical prompt (§4.3)."))
        else:
            out.append(Paragraph(
                f"{n}: voters are {len(panel['members'])} models under the clinical prompt: "
                f"{', '.join(panel['members'])} (Beyond the Flag, §4.3)."))
    return out


def _flag_callouts(metrics: dict[str, Any], names: list[str]) -> list[Callout]:
    """What a reader must see before any number: methods that mostly failed (shown just
    above the headline table)."""
    st = metrics.get("settings") or {}
    limit = float(st.get("max_failure_share", DEFAULT_MAX_FAILURE_SHARE))
    blocks: list[Callout] = []
    for n in names:
        e = metrics["methods"][n]
        if not e.get("flagged"):
            continue
        reasons = "; ".join(f"{name_with_code(r)}: {c}" for r, c in e.get("top_failure_reasons") or [])
        blocks.append(Callout(
            f"{n} failed on {e['failures']} of {e.get('n_attempted')} items ({e['failure_share']:.0%}), above "
            f"the {limit:.0%} limit. Its numbers are shown but marked, and it is left out of "
            f"'best by macro-F1' and the paired comparisons. Commonest failures: {reasons}.",
            "warning"))
    return blocks


def _warnings(metrics: dict[str, Any], names: list[str], manifest: dict[str, Any]) -> list[Section]:
    """The other warnings (per-method notes, folds), right after the headline table."""
    blocks: list[Any] = []
    for n in names:
        e = metrics["methods"][n]
        attempted = e.get("n_attempted")
        for text, k in (e.get("warnings") or {}).items():
            blocks.append(Callout(f"{n}: {text} (on {k} of {count(int(attempted or 0), 'item')}).", "warning"))
    folds = _folds_text(metrics, manifest)
    if folds and "requested" in folds:
        blocks.append(Callout(f"Cross-validation: {folds}.", "warning"))
    return [Section("Warnings", blocks, anchor="warnings")] if blocks else []


def _folds_text(metrics: dict[str, Any], manifest: dict[str, Any]) -> str | None:
    """The number of folds actually used (scikit-learn needs K items of every level)."""
    requested = int((manifest.get("config") or {}).get("n_folds") or 5)
    used = sorted({e["n_folds"] for e in metrics["methods"].values() if e.get("n_folds")})
    if not used:
        return None
    k = "/".join(str(u) for u in used)
    if used == [requested]:
        return f"stratified {k}-fold out-of-fold predictions"
    return (f"stratified {k}-fold out-of-fold predictions ({requested} requested: a level has "
            f"fewer than {requested} items)")


def _overview(ds: dict[str, Any], manifest: dict[str, Any], st: dict[str, Any],
              folds: str | None = None) -> Section:
    blocks: list[Any] = []
    for note in ds.get("notes") or []:
        blocks.append(Paragraph(note))
    for note in (manifest.get("config") or {}).get("notes") or []:
        blocks.append(Callout(note))
    train = manifest.get("train_dataset")
    pairs: list[tuple[str, Any]] = [
        ("data", ds.get("source")), ("format", ds.get("format")), ("sha256", ds.get("sha256")),
        ("items", ds.get("n")),
        ("evaluation", "transfer: fitted methods trained on " + str(train.get("source"))
         if train else "fitted methods: " + (folds or "none")),
        ("models", ", ".join(manifest.get("models") or []) or "none (no chat model)"),
        ("prompt set", _prompt_text(manifest.get("prompts"))),
        ("best by macro-F1", st.get("best_by_macro_f1")),
    ]
    if ds.get("recovered_rows") is not None:
        pairs.append(("rows recovered from truncation", ds.get("recovered_rows")))
    blocks.append(KeyValue(pairs))
    blocks.append(Paragraph(
        "Scale: Indicator (a) < Ideation (b) < Behavior (c) < Attempt (d). High-risk F1 is "
        "the F1 of the Behavior+Attempt side of the low/high severity split, not a "
        "self-harm detection score."))
    return Section("Run details", blocks, anchor="run")


def _prompt_text(prompts: dict[str, Any] | None) -> str | None:
    if not prompts:
        return None
    sha = str(prompts.get("sha256", ""))[:16]
    replaced = prompts.get("replaced") or []
    if not replaced:
        return f"sha256 {sha}… (the package's prompts)"
    return f"sha256 {sha}… ({', '.join(replaced)} replaced from {prompts.get('source')})"


def _method_notes(records: list[dict[str, Any]], manifest: dict[str, Any]) -> list[Any]:
    """How each moderation mapping cut its score (the seed prints only the fixed cuts)."""
    kinds = {m["name"]: m["method"] for m in manifest.get("methods") or []}
    out: list[Any] = []
    done: set[str] = set()
    for r in records:
        name = r["method"]
        kind = kinds.get(name, name)
        th = (r.get("detail") or {}).get("thresholds")
        if name in done or not th or not str(kind).startswith("moderation"):
            continue
        done.add(name)
        cuts = " / ".join(f"{t:.3f}" for t in th)
        if kind == "moderation-weighted":
            how = ("recalibrated without labels: each cut is the quantile of the weighted score "
                   "that sends the same share of items above it as the fixed cut sends above "
                   "max(self_harm, self_harm_intent); the seed does not print its recalibrated "
                   "values (explicit thresholds override this)")
        elif kind == "moderation-calibrated":
            how = ("fitted on training folds only (macro-F1), so cuts differ by fold; shown: "
                   "the first item's fold")
        else:
            how = "fixed cuts on max(self_harm, self_harm_intent) (Beyond the Flag, §4.1)"
        out.append(Paragraph(f"{name}: cut points {cuts}; {how}."))
    return out


def _table2(metrics: dict[str, Any], names: list[str]) -> Section:
    cols = ["Method", *(HEADERS[m] for m in TABLE2_METRICS), "n", "Failures"]
    chance = metrics["chance"]
    rows: list[list[Any]] = [["Chance (uniform random, analytic)",
                              *(chance.get(m) for m in TABLE2_METRICS), metrics["n"], None]]
    reference = [0]  # chance rows and flagged methods do not compete for best
    for n in names:
        e = metrics["methods"][n]
        if e.get("flagged"):
            reference.append(len(rows))
        rows.append([_shown(metrics, n), *(_val(e[m]) for m in TABLE2_METRICS), e["n_scored"],
                     e["failures"]])
        if e.get("chance"):
            reference.append(len(rows))
            rows.append([f"Chance on the {e['n_scored']} items {n} scored",
                         *(e["chance"].get(m) for m in TABLE2_METRICS), e["n_scored"], None])
    hi = [HEADERS[m] for m in TABLE2_METRICS if m not in LOWER_BETTER]
    lo = [HEADERS[m] for m in TABLE2_METRICS if m in LOWER_BETTER]
    t = Table(cols, rows, caption="Table 2: the seven metrics per method with the analytic "
              "chance row; best per column in bold, second best underlined (chance rows and "
              "flagged methods do not compete). " + policy_text(metrics), number_format=".3f",
              highlight_max_cols=hi, highlight_min_cols=lo, highlight_second=True,
              exclude_rows=reference)
    return Section("Main results (Table 2)", [t], anchor="table2")


def _table4(metrics: dict[str, Any], names: list[str]) -> Section:
    cols = ["Method", *(HEADERS[m] for m in TABLE2_METRICS)]
    rows = [[_shown(metrics, n), *(_iv(metrics["methods"][n][m]) for m in TABLE2_METRICS)]
            for n in names]
    st = metrics.get("settings") or {}
    t = Table(cols, rows, caption=f"Table 4: metrics with 95% percentile bootstrap intervals "
              f"(B={st.get('bootstrap')}, seed {st.get('seed')}, {st.get('resampling')} resampling). "
              + policy_text(metrics))
    return Section("Bootstrap intervals (Table 4)", [t], anchor="table4")


def _per_class(metrics: dict[str, Any], names: list[str]) -> Section:
    rows = [[_shown(metrics, n), *metrics["methods"][n]["per_class_f1"]] for n in names]
    t = Table(["Method", *LEVEL_NAMES], rows, caption="Per-class F1. " + policy_text(metrics),
              highlight_max_cols=list(LEVEL_NAMES),
              exclude_rows=[i for i, n in enumerate(names) if _flag(metrics, n)])
    blocks: list[Any] = [t]
    if names:
        series = {n: [np.nan if v is None else v for v in metrics["methods"][n]["per_class_f1"]]
                  for n in names}
        blocks.append(figure_or_sentence(
            "fig1_per_class_f1", "Figure 1: per-class F1 by method.",
            lambda: bar_chart(list(LEVEL_NAMES), series, "Per-class F1 by method", "F1", ylim=(0, 1))))
    return Section("Per-class F1 (Figure 1)", blocks, anchor="per-class")


def _confusions(metrics: dict[str, Any], names: list[str]) -> Section:

    st = metrics.get("settings") or {}
    blocks: list[Any] = [Paragraph(
        "Rows are the gold level, columns the prediction; cells are row shares with raw counts "
        "in parentheses."
        + (" Failed predictions appear at the level farthest from gold (scored as wrong)."
           if st.get("failures") == "wrong" else " Failed predictions are excluded."))]
    for n in names:
        cm = metrics["methods"][n]["confusion"]
        blocks.append(figure_or_sentence(
            figure_name(f"fig3_confusion_{n}"), f"Figure 3: confusion matrix, {n}.",
            lambda cm=cm, n=n: confusion_heatmap(cm, list(LEVEL_NAMES), f"{n}")))
    return Section("Confusion matrices (Figure 3)", blocks, anchor="confusion")


def _triage(metrics: dict[str, Any], names: list[str]) -> Section:
    rows = [[_shown(metrics, n), _iv(metrics["methods"][n]["under_triage"]),
             _iv(metrics["methods"][n]["over_triage"])] for n in names]
    chance = metrics["chance"]
    rows.insert(0, ["Chance (uniform random)", chance.get("under_triage"), chance.get("over_triage")])
    t = Table(["Method", "Under-triage ↓ (pred < gold)", "Over-triage ↓ (pred > gold)"], rows,
              caption="Share of items placed below (under-triage) or above (over-triage) their "
              "gold level, with 95% intervals. " + policy_text(metrics))
    return Section("Under- and over-triage", [t], anchor="triage")


def _failures(metrics: dict[str, Any], names: list[str], st: dict[str, Any]) -> Section:
    statuses = sorted({s for n in names for s in metrics["methods"][n]["failures_by_status"]})
    cols = ["Method", "Scored", "Excluded", "Failures", *map(name_with_code, statuses)]
    rows = []
    for n in names:
        e = metrics["methods"][n]
        rows.append([_shown(metrics, n), e["n_scored"], e["n_excluded"], e["failures"],
                     *(e["failures_by_status"].get(s, 0) for s in statuses)])
    policy = ("scored as wrong (level farthest from gold)" if st.get("failures") == "wrong"
              else "excluded from that method's metrics")
    blocks: list[Any] = [
        Paragraph(f"Failed predictions (parse failures, empty or filtered answers, call errors, "
                  f"budget stops) are {policy}; they are never dropped silently. Excluded items "
                  "are those a method holds out by design (few-shot exemplars)."),
        Table(cols, rows, caption="Failures and parse/empty counts per method.")]
    engaged = [n for n in names if metrics["methods"][n].get("engagement")]
    if engaged:
        blocks.append(_engagement_table(metrics, engaged))
    return Section("Failures", blocks, anchor="failures")


def _engagement_table(metrics: dict[str, Any], names: list[str]) -> Table:
    """Per method whose records hold the model's reply: how often it was empty or a refusal."""
    rows = []
    for n in names:
        e = metrics["methods"][n]["engagement"]
        shares = e.get("shares") or {}
        rows.append([_shown(metrics, n), e.get("n", 0),
                     *(c for k in RISK_CLASSES for c in ((e.get("counts") or {}).get(k, 0),
                                                         _iv(shares.get(k)))),
                     ])
    cols = ["Method", "Answered", *(c for k in RISK_CLASSES for c in (f"{label(k)} (n)", f"{label(k)} share"))]
    return Table(cols, rows, caption=(
        "Engagement of the model's own reply, decided without a model: empty (no text), refusal (the "
        "provider refused, or a short reply stating a refusal phrase), else engaged; deflections are not "
        "detected. Over the items the model answered (harness failures and excluded items left out), "
        "with 95% percentile bootstrap intervals. Empty and refusing replies are also failures above."))


def _cost(metrics: dict[str, Any], names: list[str], unpriced: list[str]) -> Section:
    rows = []
    for n in names:
        c = metrics["methods"][n]["cost"]
        usd = "unpriced" if c.get("unpriced") else c["usd_per_1k"]
        rows.append([n, c["n_calls"], c["mean_tokens"], usd, c["median_latency_s"],
                     c.get("median_queue_wait_s")])
    t = Table(["Method", "Model calls", "Tokens (mean per item)", "Cost ($ per 1,000 items)",
               "Latency (median s)", "Queue wait (median s)"], rows,
              caption="Table 3: cost and latency per method. Latency is service time: request "
              "sent to answer received, summed over an item's calls; the time a call waited in "
              "this client for a free slot (or through retries) is the queue wait, shown apart. "
              "Fitted methods make no model call; "
              "their latency is the per-item share of encoding (embeddings) plus fitting and "
              "predicting one fold. Costs "
              "use the price table at list prices; cached calls keep their original cost.",
              number_format=["s", ".0f", ".0f", ".2f", ".3f", ".3f"])
    blocks: list[Any] = [t]
    if unpriced:
        blocks.insert(0, Callout("Cost " + unpriced_note(unpriced) + ".", "warning"))
    return Section("Cost and latency (Table 3)", blocks, anchor="cost")


def _paired(metrics: dict[str, Any]) -> Section:
    pv = metrics.get("paired_vs_best") or {}
    ref = pv.get("reference")
    comps = pv.get("comparisons") or {}
    if not ref or not comps:
        return Section("Paired comparisons", [Paragraph("Only one method was scored.")],
                       anchor="paired")
    rows = []
    for n, res in comps.items():
        row: list[Any] = [n, res["n"]]
        for m in ("macro_f1", "qwk", "mae", "accuracy"):
            r = res[m]
            row += [None if r["diff"] is None else Interval(r["diff"], *r["ci"]), _excludes_zero(r, res["n"])]
        rows.append(row)
    cols = ["Method", "n"]
    for m in ("macro_f1", "qwk", "mae", "accuracy"):
        cols += [f"Δ {HEADERS[m]}", "CI excludes 0"]
    t = Table(cols, rows, caption=f"Paired bootstrap of each method minus the best by macro-F1 "
              f"({ref}) on the items both scored; negative Δ means worse except for MAE. "
              "Flagged methods are not compared. " + policy_text(metrics))
    return Section("Paired comparisons against the best", [t], anchor="paired")


def _excludes_zero(r: Mapping[str, Any], n: Any) -> str:
    """Whether a paired difference's interval excludes 0, in words a reader can trust: an
    undefined difference is not computed, and an interval collapsed to a point (too few
    items or nothing to resample) is said to be one rather than counted as evidence."""
    ci = r.get("ci") or [None, None]
    if r.get("diff") is None or None in ci:
        return "not computed"
    if ci[0] == ci[1]:
        return f"interval collapsed to a point (n = {n})"
    return "yes" if r["separated"] else "no"


def _comparison(metrics: dict[str, Any], names: list[str]) -> Section:
    keys = ("accuracy", "macro_f1", "weighted_f1", "qwk", "high_risk_f1")
    series = {n: [np.nan if _val(metrics["methods"][n][k]) is None else _val(metrics["methods"][n][k])
                  for k in keys] for n in names}
    if not series:
        return Section("Method comparison", [])
    return Section("Method comparison (Figure 6)", [figure_or_sentence(
        "fig6_method_comparison", "Figure 6: methods across five metrics. " + policy_text(metrics),
        lambda: bar_chart([HEADERS[k].rstrip(" ↑") for k in keys], series, "Method comparison", "value"))],
        anchor="comparison")


def _moderation_figure(records: list[dict[str, Any]]) -> Section | None:
    """Figure 2: moderation score distributions per gold level (from moderation records)."""
    seen: dict[str, dict[str, float]] = {}
    gold: dict[str, int] = {}
    for r in records:
        if not str(r["method"]).startswith("moderation") or r["status"] != "ok":
            continue
        try:
            scores = json.loads(r.get("raw") or "")
        except ValueError:
            continue
        if isinstance(scores, dict) and "self_harm" in scores:
            seen.setdefault(r["item_id"], scores)
            gold[r["item_id"]] = int(r["gold"])
    if not seen:
        return None
    blocks: list[Any] = []
    for ch in ("self_harm", "self_harm_intent", "self_harm_instructions"):
        groups = {LEVEL_NAMES[lvl]: [float(s[ch]) for i, s in seen.items() if gold[i] == lvl and ch in s]
                  for lvl in range(4)}
        blocks.append(figure_or_sentence(
            f"fig2_moderation_{ch}", f"Figure 2: moderation {label(ch)} ({ch}) score distribution per gold level.",
            lambda groups=groups, ch=ch: box_chart(groups, f"{label(ch)} by gold level", "score")))
    return Section("Moderation score distributions (Figure 2)", blocks, anchor="moderation")


def _items(records: list[dict[str, Any]], names: list[str]) -> Section:
    by_item: dict[str, dict[str, dict[str, Any]]] = {}
    gold: dict[str, int] = {}
    recovered: dict[str, bool] = {}
    for r in records:
        by_item.setdefault(r["item_id"], {})[r["method"]] = r
        gold[r["item_id"]] = int(r["gold"])
        recovered[r["item_id"]] = recovered.get(r["item_id"], False) or bool(r.get("recovered"))

    def cell(r: dict[str, Any] | None) -> str | None:
        if r is None:
            return None
        if r["status"] == EXCLUDED:
            return "excluded"
        if r["status"] != "ok" or r.get("pred") is None:
            return f"failed: {name_with_code(r['status'])}"
        return LEVEL_NAMES[int(r["pred"])]

    ids = list(by_item)[:MAX_ITEMS_SHOWN]
    texts = {i: next((r["excerpt"] for r in by_item[i].values() if r.get("excerpt") is not None), None)
             for i in ids}
    show_text = any(t is not None for t in texts.values())  # runs before excerpts were recorded: none
    show_recovered = any(recovered[i] for i in ids)  # only a truncated source (gaur) recovers rows
    columns = ["Item", *(["Text"] if show_text else []), "Gold",
               *(["Recovered"] if show_recovered else []), *names]
    rows = [[i, *([texts[i]] if show_text else []), LEVEL_NAMES[gold[i]],
             *(["yes" if recovered[i] else "no"] if show_recovered else []),
             *(cell(by_item[i].get(n)) for n in names)] for i in ids]
    caption = ("Text: the item's text, whitespace collapsed, first characters only."
               if show_text else None)
    if show_recovered:
        caption = ((caption + " ") if caption else "") + (
            "Recovered: the row was cut in the source file and its complete posts were recovered "
            "(the partial last post dropped).")
    blocks: list[Any] = [Details(
        f"Predictions per item ({len(ids)} of {len(by_item)} items)",
        [Table(columns, rows, caption=caption)])]
    profiles = [(i, n, by_item[i][n]["profile"]) for i in ids for n in names
                if by_item[i].get(n) and by_item[i][n].get("profile")]
    if profiles:
        dims = list(dict.fromkeys(k for _, _, p in profiles for k in p))
        prow = [[i, n, *(p.get(d) for d in dims)] for i, n, p in profiles]
        blocks.append(Details(f"Clinical schema profiles ({len(prow)})",
                              [Table(["Item", "Method", *dims], prow, number_format=".0f")]))
    failed = [(i, n, by_item[i][n]) for i in ids for n in names
              if by_item[i].get(n) and by_item[i][n]["status"] not in ("ok", EXCLUDED)]
    if failed:
        frows = [[i, n, r["status"], (r.get("raw") or "")[:EXCERPT],
                  str((r.get("detail") or {}).get("error") or "")[:EXCERPT]] for i, n, r in failed]
        blocks.append(Details(f"Failed predictions ({len(frows)})",
                              [Table(["Item", "Method", "Status", "Raw output", "Error"], frows)]))
    return Section("Per-item detail", blocks, anchor="items")


# ----------------------------------------------------------------------------- few-shot sweep
#: columns of the sweep table (Appendix G discusses these four)
SWEEP_METRICS: tuple[str, ...] = ("accuracy", "macro_f1", "qwk", "mae")


def arm_name(k: int) -> str:
    return f"few-shot k={k}"


def sweep_rows(metrics: dict[str, Any], ks: list[int], failures: str) -> list[dict[str, Any]]:
    """One row per arm (k=0 first) from the run's metrics: n, failures, values + CIs."""
    rows = []
    for k in ks:
        m = metrics["methods"].get(arm_name(k))
        if m is None or m.get("status") == "incomplete":
            continue
        row: dict[str, Any] = {
            "k": k,
            "n": m["n_scored"] + (m["failures"] if failures == "drop" else 0),
            "scored": m["n_scored"],
            "failures": m["failures"],
        }
        for name in SWEEP_METRICS:
            row[name] = m[name]["value"]
            row[f"{name}_ci"] = m[name]["ci"]
        rows.append(row)
    return rows


def sweep_figure(rows: list[dict[str, Any]]) -> bytes | None:
    """Figure 4: macro-F1 and QWK against k (k > 0), the k=0 values as dotted lines."""

    ref = next((r for r in rows if r["k"] == 0), None)
    arms = [
        r for r in rows if r["k"] > 0 and r.get("macro_f1") is not None and r.get("qwk") is not None
    ]
    if not arms:
        return None
    series = {"Macro-F1": [r["macro_f1"] for r in arms], "QWK": [r["qwk"] for r in arms]}
    refs = None
    if ref is not None and ref.get("macro_f1") is not None and ref.get("qwk") is not None:
        refs = {"Macro-F1": ref["macro_f1"], "QWK": ref["qwk"]}
    return line_chart(
        [str(r["k"]) for r in arms],  # categorical axis: doubling k evenly spaced
        series,
        title=f"Few-shot scaling (n = {arms[0]['n']} items outside the exemplar pool)",
        xlabel="k (exemplars in the prompt)",
        ylabel="score",
        reference_lines=refs,
        reference_label="k=0",
    )


def sweep_section(rows: list[dict[str, Any]], pool_size: int, n_scored: int) -> Section:
    """The sweep table and Figure 4 (Beyond the Flag, Appendix G)."""

    def cell(row: dict[str, Any], name: str) -> Any:
        v, ci = row.get(name), row.get(f"{name}_ci") or (None, None)
        return None if v is None else Interval(v, ci[0], ci[1])

    table = Table(
        ["k", "Items", "Failures", "Acc", "F1-Mac", "QWK", "MAE"],
        [[r["k"], r["n"], r["failures"], *[cell(r, m) for m in SWEEP_METRICS]] for r in rows],
        caption="Every arm is scored on the same items outside the exemplar pool (k=0: zero-shot).",
        highlight_max_cols=["Acc", "F1-Mac", "QWK"],
        highlight_min_cols=["MAE"],
    )
    blocks: list[Any] = [
        KeyValue([("exemplar pool (held out, never scored)", pool_size),
                  ("items scored by every arm", n_scored)]),
        table,
    ]
    try:
        png = sweep_figure(rows)
    except NothingToShow as empty:
        png = None
        blocks.append(Paragraph(empty.sentence()))
    if png:
        blocks.append(Figure("fig4_fewshot_sweep", png,
                             "Figure 4: macro-F1 and QWK against k; dotted lines: the k=0 reference."))
    blocks.append(Callout(
        "Exemplars are the shortest posts of each level, class-interleaved "
        "(a, b, c, d, a, ...); the k-shot set is nested in the 2k-shot set.", "info"))
    return Section("Few-shot scaling (Appendix G)", blocks, anchor="fewshot-sweep")


def risk_headline(metrics: Mapping[str, Any], records: list[dict[str, Any]],
                  manifest: Mapping[str, Any]) -> Headline:
    """The best method by macro-F1 (Beyond the Flag's main measure, Table 2), named as in the
    report's tables, with its interval and the items it scored."""
    shown = shown_names(list(records), dict(manifest))
    st = metrics.get("settings") or {}
    candidates, extra = [], []
    for name, m in (metrics.get("methods") or {}).items():
        if not isinstance(m, Mapping):
            continue
        cell = m.get("macro_f1") if isinstance(m.get("macro_f1"), Mapping) else {}
        ci = cell.get("ci") or [None, None]
        missing = int(m.get("n_attempted") or 0) - int(m.get("n_scored") or 0)
        failures = int(m.get("failures") or 0)
        incomplete = "; ".join(x for x in (
            f"{missing} of {count(int(m.get('n_attempted') or 0), 'item')} not scored" if missing > 0 else "",
            "method did not finish" if m.get("status") not in (None, "complete") else "") if x)
        if failures > 0:  # scored, as the farthest level, or left out: either way the reader must know
            extra.append(f"{shown.get(name, name)}: {count(failures, 'failed prediction')} "
                         + ("scored as wrong (the level farthest from gold)" if st.get("failures", "wrong") == "wrong"
                            else "left out of its scores"))
        candidates.append(Candidate(shown.get(name, name), cell.get("value"), ci[0], ci[1],
                                    m.get("n_scored"), bool(m.get("flagged")), incomplete))
    if str(st.get("resampling", "")).startswith("cluster"):
        groups = {r.get("group") for r in records if r.get("group") is not None}
        if len(groups) < SMALL_N:  # the interval resamples groups, not items
            extra.append(f"small n: the intervals resample {count(len(groups), 'group')} of items (fewer than "
                         f"{SMALL_N}), not the items one by one; they are wide and a ranking may not hold")
    box = best_headline("macro-F1 (0 to 1, higher is better)", candidates, unit="items", role="method",
                        extra_caveats=extra)
    box.rows.extend(deployment_rows(metrics, shown))
    return box
