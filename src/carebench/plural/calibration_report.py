"""Reports of the calibration-side commands (calibrate, freeze, label, agreement).

Built from manifest + metrics (+ records) only, so ``rerender`` reproduces them
from a run directory. Text from datasets and models is passed as plain text;
the report renderers escape it.
"""

from __future__ import annotations

from typing import Any

from carebench.report.document import Callout, Details, KeyValue, Paragraph, Report, Section, Table

ILLUSTRATIVE = (
    "Built-in illustrative data: the prompts and the six practitioners' labels were written for "
    "carebench to exercise the pipeline. They are not real posts or real practitioners' judgements, "
    "and no number here says anything about real practitioners or systems."
)
ARCH_TITLE = {"peer": "Peer support", "clinician": "Clinician"}


def header(man: dict[str, Any]) -> list[Any]:
    blocks: list[Any] = []
    if man.get("dataset", {}).get("illustrative"):
        blocks.append(Callout(ILLUSTRATIVE, "warning"))
    if man.get("status") != "complete":
        blocks.append(Callout(f"Run status: {man.get('status')}; results are incomplete.", "warning"))
    return blocks


def calibration_report(man: dict[str, Any], metrics: dict[str, Any], records: list[dict[str, Any]]) -> Report:
    scoring = man["scoring"]
    methods = scoring["methods"]
    archs = list(metrics["selection"])
    sections = []
    rows, bold = [], []
    cols = ["Method"]
    for a in archs:
        t = ARCH_TITLE.get(a, a)
        cols += [f"{t} macro-F1", f"{t} Δ vs E0", f"{t} P(improve)"]
    for i, m in enumerate(methods):
        row: list[Any] = [m]
        for j, a in enumerate(archs):
            score = metrics["methods"][m]["archetypes"][a]["macro_f1"]
            comp = metrics["comparisons"][a].get(m)
            row += [score, None if comp is None else comp["diff"], None if comp is None else comp["p_improve"]]
            if metrics["selection"][a]["method"] == m:
                bold.append((i, 1 + 3 * j))
        rows.append(row)
    table5 = Table(cols, rows, caption="Table 5: profile method selection by responder archetype "
                   "(supported-label macro-F1, out-of-fold; selected method in bold)", bold_cells=bold)
    sel_blocks: list[Any] = [table5]
    for a in archs:
        s = metrics["selection"][a]
        if s["warning"]:
            sel_blocks.append(Callout(s["warning"], "warning"))
        else:
            sel_blocks.append(Paragraph(
                f"{ARCH_TITLE.get(a, a)}: selected {s['method']} (qualifying: {', '.join(s['qualifying'])})."))
    st = metrics["settings"]
    sel_blocks.append(Paragraph(
        f"Rule (VEILED-SH, §5.2): a method qualifies when it beats E0 by at least {st['margin']:.2f} "
        f"macro-F1 and the paired bootstrap over calibration cases (B = {st['bootstrap']}, seed "
        f"{st['paired_seed']}, ties count 1/2) gives at least {st['min_probability']:.0%} probability "
        "of improvement; among qualifying methods the highest macro-F1 wins; with none, E1 is kept."))
    sections.append(Section("Selection", sel_blocks))

    jrows = [[ARCH_TITLE.get(a, a), metrics["jaccard"][a].get("practitioners"),
              metrics["jaccard"][a].get("selected_profiles")] for a in archs]
    sections.append(Section("Disagreement preserved?", [
        Table(["Archetype", "Practitioners", "Selected profiles (out-of-fold)"], jrows,
              caption="Mean pairwise Jaccard on the calibration cases (paper: 0.507 / 0.545 for "
                      "practitioners, 0.577 / 0.560 for the selected profiles)"),
    ]))

    n_prac = max(len(metrics["methods"][methods[0]]["archetypes"][a]["practitioners"]) for a in archs)
    n_folds = len(scoring["folds"])
    prow = []
    for m in methods:
        for a in archs:
            e = metrics["methods"][m]["archetypes"][a]
            per = [e["practitioners"][p] for p in sorted(e["practitioners"])]
            prow.append([m, ARCH_TITLE.get(a, a), *per, *[None] * (n_prac - len(per)),
                         *e["fold_macro_f1"], e["predictions"], e["failed"], e["invalid_combination"]])
    pcols = (["Method", "Archetype"] + [f"Practitioner {k + 1}" for k in range(n_prac)]
             + [f"Fold {k + 1}" for k in range(n_folds)] + ["Predictions", "Failed", "Invalid"])
    sections.append(Section("Per practitioner and fold", [
        Table(pcols, prow, caption="Out-of-fold macro-F1 per practitioner (sorted by name) and per fold "
              "(mean over the archetype's practitioners); failed predictions count as empty label sets",
              number_format=[".3f"] * (len(pcols) - 3) + ["d", "d", "d"]),
    ]))
    details = []
    for r in records:
        if r["type"] != "profile" or r["method"] in ("E0", "E1"):
            continue
        pairs = [("instruction", r["instruction"])]
        if r.get("demos"):
            pairs.append(("demonstrations", ", ".join(r["demos"])))
        if r.get("guidelines"):
            pairs.append(("guidelines", " | ".join(r["guidelines"])))
        if r.get("guidelines_interpret"):
            pairs.append(("guidelines (judge A)", " | ".join(r["guidelines_interpret"])))
        details.append(Details(f"{r['method']} · {r['practitioner']} · fold {r['fold'] + 1}",
                               [KeyValue(pairs)]))
    if details:
        sections.append(Section("Fitted profiles", details))
    sections.append(Section("Run", [KeyValue([
        ("model", ", ".join(man.get("models") or []) or "none (E0 only)"),
        ("folds (held-out case ids)", " / ".join(", ".join(f) for f in scoring["folds"])),
        ("fold seed", scoring["fold_seed"]),
        ("model calls made", man.get("accounting", {}).get("provider_calls")),
        ("answered from cache", man.get("accounting", {}).get("cache_hits")),
        ("spent (USD)", man.get("accounting", {}).get("spent_usd")),
    ])]))
    return Report("Plural: profile calibration and selection", "VEILED-SH, §5.2 and Appendix B.2",
                  sections=[Section("About this run", header(man) or [Paragraph("Calibration run.")]), *sections])
