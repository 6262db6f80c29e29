"""The report of a ``support probe`` run (DistressBench §4.3, Appendix E.7, Table 13):
the run it probed, then the discrimination probe, its controls and the elicitation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carebench.report import Block, Callout, KeyValue, Paragraph, Report, Section, Table
from carebench.report.document import Headline, Interval
from carebench.report.headline import interval_caveats, no_headline
from carebench.support.report_values import fmt_rate, iv
from carebench.wording import count

#: the outcomes of a probed unit as a reader reads them (the probe's keys in probe.json)
OUTCOME_NAMES = {"standard_divergence": "standard divergence", "discrimination_failure": "discrimination failure",
                 "order_dependent": "order-dependent", "unstable": "unstable"}


def build_probe_report(manifest: Mapping[str, Any], p: Mapping[str, Any]) -> Report:
    """The report of a ``support probe`` run (§4.3, E.7, Table 13): the run it probed,
    then the probe, controls and elicitation."""
    probed = manifest.get("probes") or {}
    return Report(
        title="Support: discrimination probe and elicitation",
        subtitle=f"probe of the support run {probed.get('path', '?')}",
        sections=[Section("Probed run", [KeyValue([
            ("run directory", probed.get("path")), ("created", probed.get("created")),
            ("its manifest sha256", probed.get("manifest_sha256")),
            ("responders probed", ", ".join(p.get("responders") or []))])]), _probe(p)],
    )



def probe_headline(p: Mapping[str, Any]) -> Headline:
    """The probe's answer (§4.3, Table 13): which outcome holds most of the forfeited
    criterion weight of the competent responders, the standard-divergence share with its
    task-bootstrap interval and n, the other shares beside it, and who was excluded (E.7)."""
    d = p.get("decomposition") or {}
    excluded = list(p.get("excluded") or [])
    left_out = ([f"excluded as uninformative evaluators (E.7, not decomposed): {', '.join(excluded)}"]
                if excluded else [])
    if not d.get("units"):
        head = no_headline("no probed unit of a responder that passes the evaluator-competence check")
        head.caveats = left_out
        return head
    shares = {k: (d.get(k) or {}) for k in OUTCOME_NAMES}
    sd = shares["standard_divergence"]
    sd_share, df_share = sd.get("share") or 0.0, shares["discrimination_failure"].get("share") or 0.0
    lo, hi = (sd.get("ci") or [None, None])[:2]
    if sd_share > df_share:
        verdict = ("More forfeited weight is standard divergence than discrimination failure: the responders "
                   "prefer the compliant reply yet did not write it")
    elif sd_share < df_share:
        verdict = ("More forfeited weight is discrimination failure than standard divergence: the responders "
                   "prefer their own reply")
    else:
        verdict = "Standard divergence and discrimination failure hold equal shares of the forfeited weight"
    rows = [(OUTCOME_NAMES[k], f"{iv(v.get('share'), v.get('ci')).format()} ({count(int(v.get('units') or 0), 'unit')})")
            for k, v in shares.items() if k != "standard_divergence" and v.get("share") is not None]
    caveats = interval_caveats(sd.get("share"), lo, hi, d.get("tasks"), "tasks")
    caveats += left_out
    return Headline(verdict, measure=f"standard divergence: share of the forfeited criterion weight of "
                                     f"{d['units']} units (0 to 1; interval: bootstrap over tasks)",
                    value=Interval(float(sd["share"]), lo, hi), n=d.get("tasks"), unit="tasks",
                    rows=rows, caveats=caveats)


def _probe(p: Mapping[str, Any]) -> Section:
    def shares(d: Mapping[str, Any]) -> list[list[Any]]:
        return [[OUTCOME_NAMES[name], iv((d.get(name) or {}).get("share"), (d.get(name) or {}).get("ci")),
                 (d.get(name) or {}).get("units")]
                for name in ("standard_divergence", "discrimination_failure", "order_dependent", "unstable")]

    d = p.get("decomposition") or {}
    per = p.get("per_responder") or {}
    excluded = list(p.get("excluded") or [])
    blocks: list[Block] = [Paragraph(
        f"§4.3, E.7, Table 13: failed criterion units of {len(per)} responders in {p.get('tasks_sampled', 0)} "
        f"sampled tasks, each compared in both orders with the {p.get('alternative')} reply "
        f"({p.get('question', 'blind')} question). Standard divergence: the model prefers the compliant reply yet "
        "did not produce it; discrimination failure: it prefers its own. Order-dependent and unstable units are "
        "held out.")]
    if d.get("units"):
        blocks.append(Table(
            ["outcome", "share of forfeited weight [95% CI]", "units"], shares(d),
            caption=f"Pooled over the {len(p.get('competent') or [])} responders that pass the evaluator-competence "
                    f"check: {d['units']} units. Bootstrap over tasks, B={d.get('B')}, seed {d.get('seed')}."))
    else:
        blocks.append(Paragraph("No unit of a responder that passes the evaluator-competence check: "
                                "nothing is decomposed."))
    for spec in excluded:
        c = per[spec]["controls"]
        blocks.append(Callout(
            f"{spec} is excluded from the decomposition as an uninformative evaluator (E.7): on the floor pairs "
            f"it preferred the compliant reply in {c.get('prefers_alternative')} of {c.get('valid')} valid answers "
            f"({fmt_rate(c.get('rate'))}; {c.get('failed_answers')} failed answers), not above the competence "
            f"threshold {c.get('threshold')}. Its {per[spec].get('units_probed')} probed units are not decomposed.",
            "warning"))
    rows = []
    for spec, r in per.items():
        c, rd = r.get("controls") or {}, r.get("decomposition") or {}
        rows.append([spec, c.get("pairs"), c.get("valid"), c.get("rate"), "yes" if r.get("competent") else "no",
                     r.get("units_probed"), (r.get("real_pairs") or {}).get("rate"),
                     (rd.get("standard_divergence") or {}).get("share"),
                     (rd.get("discrimination_failure") or {}).get("share")])
    rates = [row[3] for row in rows if row[3] is not None]
    blocks.append(Table(
        ["responder", "floor pairs", "valid answers", "floor-pair alternative preference", "competent",
         "units probed", "raw alternative preference", "standard divergence", "discrimination failure"], rows,
        caption="Evaluator-competence check (E.7). A floor pair sets the compliant alternative against a floor reply "
                "that ignores the person's message, in both orders; the floor-pair alternative preference is the "
                f"share of valid answers choosing the compliant reply; a responder not above {p.get('competence_threshold')} "
                "is excluded from the decomposition. This rate differs between models (the paper reports 0.000 to "
                "1.000" + (f"; here {min(rates):.3f} to {max(rates):.3f}" if rates else "") + "), so the raw "
                "alternative preference on the real pairs is not compared across models."))
    e = p.get("elicitation") or {}
    erows = [[spec, (r.get("elicitation") or {}).get("conversations_sampled"),
              _conversion_text((r.get("elicitation") or {}).get("full_panel") or {}),
              _conversion_text((r.get("elicitation") or {}).get("without_own_family") or {})]
             for spec, r in per.items()]
    erows.append(["all probed responders", e.get("conversations_sampled"),
                  _conversion_text(e.get("full_panel") or {}), _conversion_text(e.get("without_own_family") or {})])
    blocks.append(Table(["responder", "conversations", "conversion, full panel",
                         "conversion, without the responder's family"], erows,
                        caption="Elicitation (E.7): the share of originally failed criteria the new reply earns."))
    return Section("Discrimination probe and elicitation", blocks)



def _conversion_text(c: Mapping[str, Any]) -> str:
    panel = f"; panel {', '.join(c['panel']) or 'empty'}" if "panel" in c else ""
    return f"{fmt_rate(c.get('rate'))} ({c.get('converted', 0)} of {c.get('criteria', 0)} failed criteria{panel})"
