"""The report's sections for detection and for precision at an alert budget.

Detection ("is this suicide-related?") and severity ("how severe?") are shown as two
results and never folded into one number (Beyond the Flag, Limitations). The alert-budget
section turns each method's risk score into what a deployment would see: precision,
recall, the number of alerts a reviewer must read per true case, and alerts per 10,000
messages, under a stated prevalence (docs/risk.md, "Detection, severity and the alert budget").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carebench.report import Callout, Interval, Paragraph, Section, Table
from carebench.report.figures import figure_or_sentence, line_panels

ANCHORS = (
    "Anchors from clinical prediction: Simon et al. 2018 (\"Predicting suicide attempts and suicide "
    "deaths following outpatient visits using electronic health records\") found that visits in the top "
    "5% of risk scores held 43% of later suicide attempts, with a precision of 5.4% at that budget; "
    "Belsher et al. 2019 (\"Prediction models for suicide attempts and deaths: a systematic review and "
    "simulation\") found positive predictive values of 0.01 or below for suicide death even where the "
    "area under the curve was 0.8 or more. A high AUROC does not make alerts precise when the "
    "condition is rare.")


def _iv(cell: Any) -> Interval | None:
    return Interval.of(cell.get("value"), cell.get("ci")) if isinstance(cell, Mapping) else None


def _pct(x: float) -> str:
    return f"{100 * x:g}%"


def weighting_text(metrics: Mapping[str, Any]) -> str | None:
    """Which metrics are weighted and for what population (None for a simple sample)."""
    st = metrics.get("settings") or {}
    if not st.get("weighted_metrics"):
        return None
    population = st.get("population") or ("not described (add \"population\" to the data's "
                                           "NAME.meta.json sidecar)")
    return ("Weighted (Horvitz-Thompson, weight = 1 / inclusion probability): the severity metrics of "
            "Tables 2 and 4, and every detection and alert-budget figure; intervals resample within "
            f"strata. Not weighted: {', '.join(st.get('unweighted') or [])}. The weights stand for: "
            f"{population}.")


def deployment_rows(metrics: Mapping[str, Any], shown: Mapping[str, str]) -> list[tuple[str, str]]:
    """Headline rows: the best detection AUROC beside the severity headline (never merged)."""
    dep = metrics.get("deployment") or {}
    best, best_v = None, -1.0
    for name, e in (dep.get("methods") or {}).items():
        v = ((e.get("detection") or {}).get("auroc") or {}).get("value")
        if v is not None and v > best_v:
            best, best_v = name, v
    if best is None:
        return []
    d = dep["methods"][best]["detection"]
    n_neg = int(metrics.get("n_negative") or 0)
    return [
        ("Severity", f"the number above: macro-F1 on the {metrics.get('n')} suicide-related items only"),
        ("Detection", (f"best AUROC (suicide-related vs {n_neg} negative items): {shown.get(best, best)} "
                       f"{_iv(d['auroc']).format()}; sensitivity {_iv(d['sensitivity']).format()}, "
                       f"specificity {_iv(d['specificity']).format()} at its own threshold")),
    ]


def deployment_sections(metrics: Mapping[str, Any], shown: Mapping[str, str]) -> list[Section]:
    dep = metrics.get("deployment")
    if not dep:
        return []
    methods = dep.get("methods") or {}
    out: list[Section] = []
    weighted = weighting_text(metrics)
    if any("detection" in e for e in methods.values()):
        rows = []
        for name, e in methods.items():
            d = e.get("detection") or {}
            if "unavailable" in d or not d:
                rows.append([shown.get(name, name), e.get("score"), None, None, None, None])
                continue
            rows.append([shown.get(name, name), e.get("score"),
                         *(_iv(d[k]) for k in ("auroc", "auprc", "sensitivity", "specificity"))])
        blocks: list[Any] = [
            Paragraph("Two results, never one number. Detection asks whether text is suicide-related at all "
                      f"(any level against the {metrics.get('n_negative')} negative items); severity (Tables 2 "
                      f"and 4) asks how severe it is, on the {metrics.get('n')} suicide-related items only."),
            Table(["Method", "Risk score", "AUROC", "AUPRC", "Sensitivity", "Specificity"], rows,
                  caption=("Detection: AUROC and AUPRC of each method's risk score; sensitivity and "
                           f"specificity of its own flag (a predicted level of {dep.get('detection_level')} "
                           "or above). 95% percentile bootstrap intervals, positives and negatives resampled "
                           "separately within strata.")),
        ]
        if weighted:
            blocks.append(Paragraph(weighted))
        out.append(Section("Detection (suicide-related vs negative)", blocks, anchor="detection"))
    out.append(_budget_section(dep, shown, weighted))
    return out


def _budget_section(dep: Mapping[str, Any], shown: Mapping[str, str], weighted: str | None) -> Section:
    positive = dep.get("positive", "behavior")
    rows = []
    for name, e in (dep.get("methods") or {}).items():
        res = (e.get("budget") or {}).get(positive)
        if not isinstance(res, list):
            rows.append([shown.get(name, name), None, None, None, None, None, None, None, None])
            continue
        for p in res:
            rows.append([shown.get(name, name), _pct(p["prior"]), _pct(p["budget"]),
                         "none" if p["threshold"] is None else f"{p['threshold']:.4g}",
                         _iv(p["precision"]), _iv(p["recall"]), _iv(p["number_needed_to_evaluate"]),
                         _iv(p["alerts_per_10k"]), _iv(p["true_alerts_per_10k"])])
    cut_rows = []
    for name, e in (dep.get("methods") or {}).items():
        for cut, res in (e.get("budget") or {}).items():
            if not isinstance(res, list):
                continue
            for p in res:
                cut_rows.append([shown.get(name, name), dep["cut_points"][cut], _pct(p["prior"]),
                                 _pct(p["budget"]), _iv(p["precision"]), _iv(p["recall"])])
    blocks: list[Any] = [
        Paragraph(f"Positive: {dep.get('positive_name')}. For a deployment prevalence pi and a budget b (the "
                  "share of messages allowed to raise an alert), positives are reweighted by pi/pi_s and "
                  "negatives by (1-pi)/(1-pi_s), pi_s the sample's own positive share. The threshold t_b is the "
                  "lowest score level whose alert rate is at most b; the items at the next level down are "
                  "alerted at random with the share that brings the expected alert rate to b. Discrete scores "
                  "tie, so this random choice within a tied level is common: every figure is its expectation, "
                  "not one draw. Intervals resample positives and negatives separately within strata and "
                  "solve t_b again in every resample."),
        Table(["Method", "Prior", "Budget", "t_b", "Precision@b", "Recall@b", "Alerts per true case",
               "Alerts per 10,000", "True alerts per 10,000"], rows,
              caption="Precision at an alert budget under a prior (alerts per true case = number needed "
                      "to evaluate, 1 / precision). The alert rate is the budget by construction."),
        Callout(ANCHORS, "info"),
    ]
    if weighted:
        blocks.append(Paragraph(weighted))
    panels: dict[str, dict[str, dict[str, list[float]]]] = {}
    curve_budgets: list[float] = []
    for name, e in (dep.get("methods") or {}).items():
        curve = e.get("curve")
        if not curve:
            continue
        curve_budgets = curve["budgets"]
        for prior, vals in curve["priors"].items():
            panels.setdefault(f"prior {_pct(float(prior))}", {})[shown.get(name, name)] = {
                "precision": vals["precision"], "recall": vals["recall"]}
    if panels:
        blocks.append(figure_or_sentence(
            "fig_alert_budget", f"Precision (solid) and recall (dashed) of {dep.get('positive_name')} against "
            "the alert budget, one line per method, a panel per prior.",
            lambda: line_panels(curve_budgets, panels, "Precision and recall at an alert budget",
                                "alert budget (share of messages)")))
    blocks.append(Table(["Method", "Positive", "Prior", "Budget", "Precision@b", "Recall@b"], cut_rows,
                        caption="Every cut-point of the 4-level scale (and suicide-related vs negative when "
                                "the data has a negative stratum)."))
    return Section("Precision at an alert budget", blocks, anchor="alert-budget")
