"""The report of a ``support calibrate`` run: judge calibration and panel selection
(DistressBench §3.3, Appendix B.1-B.5, B.7), built from its metrics alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carebench.report import Block, Headline, Interval, KeyValue, Paragraph, Report, Section, Table
from carebench.report.headline import SMALL_N, no_headline


def build_calibration_report(manifest: Mapping[str, Any], result: Mapping[str, Any]) -> Report:
    """Judge calibration and panel selection (§3.3, B.1-B.5, B.7)."""
    cfg = result.get("config", {})
    counts = result.get("counts", {})
    human = result.get("human", {})
    sel = result.get("selection", {})
    sections: list[Section] = []
    sections.append(Section("Labels and human ceiling", [
        Paragraph("Clinician consensus per labelled criterion judgment is the strict majority of the "
                  "clinicians who labelled it; human-human agreement is the ceiling a judge can be held to."),
        KeyValue([(k.replace("_", " "), v if not isinstance(v, dict) else ", ".join(f"{a}: {b}" for a, b in v.items()))
                  for k, v in counts.items()]),
        KeyValue([("raters", ", ".join(human.get("raters", []))),
                  ("mean pairwise kappa", human.get("mean_pairwise_kappa")),
                  ("mean pairwise agreement", human.get("mean_pairwise_agreement")),
                  ("Fleiss kappa", human.get("fleiss_kappa"))]),
        Table(["dimension", "AC1"], [[d, v] for d, v in (human.get("ac1") or {}).items()],
              caption="Human Gwet's AC1 by dimension (B.5: kappa understates agreement on skewed criteria)."),
    ]))
    cands = result.get("candidates", {})
    dims = sorted({d for c in cands.values() for d in (c.get("ac1") or {}) if d != "pooled"})
    sections.append(Section("Candidate judges", [Table(
        ["judge", "kappa", "macro-F1", "agreement", "met rate", "items", "AC1 pooled", *[f"AC1 {d}" for d in dims]],
        [[j, c.get("kappa"), c.get("macro_f1"), c.get("percent_agreement"), c.get("met_rate"), c.get("n_items"),
          (c.get("ac1") or {}).get("pooled"), *[(c.get("ac1") or {}).get(d) for d in dims]]
         for j, c in sorted(cands.items(), key=lambda kv: -(kv[1].get("kappa") or float("-inf")))],
        caption="Each candidate against the clinician consensus.", highlight_max_cols=["kappa"],
    )]))
    panels = sel.get("panels", [])
    blocks: list[Block] = [Paragraph(
        f"{sel.get('n_panels', 0)} panels of {sel.get('panel_size', cfg.get('panel_size'))} enumerated and ranked "
        f"by {sel.get('ranking_rule', 'kappa')}. Selected: {', '.join(sel.get('selected', []))}."
    )]
    blocks.append(Table(["rank", "panel", "kappa", "macro-F1", "agreement", "met rate"],
                        [[p["rank"], " + ".join(p["members"]), p["kappa"], p["macro_f1"],
                          p["percent_agreement"], p["met_rate"]] for p in panels[:20]],
                        caption="Top panels (all panels are in metrics.json)."))
    lead = sel.get("lead")
    if lead:
        blocks.append(KeyValue([
            ("leader", " + ".join(lead["leader"])), ("runner-up", " + ".join(lead["runner_up"])),
            ("kappa lead", Interval(lead["diff"], *lead["ci"])), ("interval spans zero", lead["spans_zero"]),
            ("bootstrap", f"B={lead.get('B')}, seed {lead.get('seed')}, {lead.get('resampling')}"),
        ]))
    wd = sel.get("without_disclaimers")
    if wd:
        blocks.append(Paragraph(
            f"Without the disclaimer criteria the selected panel ranks {wd['rank_of_selected']} of "
            f"{sel.get('n_panels')} (best then: {', '.join(wd['selected'])})."))
    sections.append(Section("Panel selection", blocks))
    sections.append(_agreement_by_dimension(result))
    sc = result.get("scope_comparison")
    if sc:
        scopes = list(sc.get("by_scope") or sc.get("candidates") or {})
        cand = sc.get("candidates") or {}
        rows = [[" + ".join(sc.get("panel", [])) + " (selected panel)",
                 *[(sc.get("by_scope", {}).get(s) or {}).get("kappa") for s in scopes]]]
        names = sorted({j for v in cand.values() for j in v})
        rows += [[j, *[(cand.get(s, {}).get(j) or {}).get("kappa") for s in scopes]] for j in names]
        sections.append(Section("Scoring rule: final turn vs credit anywhere", [Table(
            ["judge / panel", *[f"kappa ({s})" for s in scopes]], rows,
            caption="B.9: agreement with the clinician consensus (labelled on the final turn) when the judges "
                    "grade the final turn only or credit any turn. Percent agreement and macro-F1 are in "
                    "metrics.json.")]))
    sp = result.get("self_preference") or {}
    if sp.get("applicable"):
        rates = sp.get("met_rate", {})
        responders = sorted({r for v in rates.values() for r in v})
        sections.append(Section("Self-preference on the labelled responses", [Table(
            ["judge", "leniency", *responders],
            [[j, (sp.get("leniency") or {}).get(j), *[v.get(r) for r in responders]] for j, v in rates.items()],
            caption=str(sp.get("model", "")),
        )]))
    return Report(title="Support: judge calibration and panel selection",
                  subtitle=f"panel size {cfg.get('panel_size')}, seed {cfg.get('seed')}, B={cfg.get('B')}",
                  sections=sections)



def _agreement_by_dimension(result: Mapping[str, Any]) -> Section:
    """Table 5 (B.5): kappa beside AC1 and percent agreement, for clinicians and the selected panel."""
    human = result.get("human", {})
    panel = result.get("selected_by_dimension") or {}
    hk, hac, hpa = (human.get(k) or {} for k in ("fleiss_kappa_by_dimension", "ac1", "percent_agreement"))
    pk, pac, ppa = (panel.get(k) or {} for k in ("kappa_by_dimension", "ac1", "percent_agreement_by_dimension"))
    dims = sorted({*hk, *pk} - {"pooled"})
    rows = [[d, hk.get(d), hac.get(d), hpa.get(d), pk.get(d), pac.get(d), ppa.get(d)] for d in dims]
    rows.append(["pooled", hk.get("pooled"), hac.get("pooled"), hpa.get("pooled"), panel.get("kappa"),
                 pac.get("pooled"), panel.get("percent_agreement")])
    return Section("Agreement by dimension", [Table(
        ["dimension", "clinicians Fleiss kappa", "clinicians AC1", "clinicians agreement",
         "panel kappa", "panel AC1", "panel agreement"], rows,
        caption="B.5 / Table 5: kappa understates agreement on skewed dimensions (moralization, disclaimers), "
                "so AC1 and raw agreement stand beside it. Panel = the selected panel against the consensus.",
    )])


def calibration_headline(result: Mapping[str, Any]) -> Headline:
    """The selected judge panel and its agreement (Cohen's kappa) with the clinicians'
    consensus; a caveat when its lead over the runner-up panel spans zero."""
    sel = result.get("selection") or {}
    panels = sel.get("panels") or []
    if not sel.get("selected") or not panels:
        return no_headline("no panel was selected")
    top = panels[0]
    counts = result.get("counts") or {}
    n = next((counts[k] for k in ("items_with_consensus", "items") if isinstance(counts.get(k), int)), None)
    caveats = []
    lead = sel.get("lead") or {}
    if lead.get("spans_zero"):
        lo, hi = (lead.get("ci") or [None, None])[:2]
        caveats.append(f"not separable from the runner-up panel: the kappa lead's interval [{lo:.3f}, {hi:.3f}] "
                       "spans zero" if lo is not None and hi is not None else
                       "not separable from the runner-up panel: the kappa lead's interval spans zero")
    if n is not None and n < SMALL_N:
        caveats.append(f"small n: {n} items with a clinician consensus (fewer than {SMALL_N})")
    return Headline("Selected panel: " + " + ".join(map(str, sel["selected"])),
                    measure="Cohen's kappa with the clinician consensus (-1 to 1, higher is better)",
                    value=Interval(float(top.get("kappa")), None, None) if top.get("kappa") is not None else None,
                    n=n, unit="items with a clinician consensus" if n is not None else "", caveats=caveats)
