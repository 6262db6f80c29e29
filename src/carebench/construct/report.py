"""Reports of construct runs, built from metrics and records only (no file I/O).

A build report shows counts in and out at every step, screening reasons per
source, the selection table (VEILED-SH Table 7: gate failure rates, the five
means and Q per configuration, the excluding gate marked), anonymization counts
per entity type and step with every residual hit, and the exploratory figures.
All dataset text is escaped by the HTML renderer.
"""

from __future__ import annotations

from typing import Any

from carebench.construct.quality import GATE_NAMES, GATES, SCORES
from carebench.report import (
    Callout,
    Headline,
    Interval,
    KeyValue,
    Paragraph,
    Report,
    Section,
    Table,
)
from carebench.report.headline import SMALL_N
from carebench.wording import label

SCORE_LABELS = {"factual": "f", "persona_fit": "p", "style": "a", "context_fit": "c", "naturalness": "n"}


def stage_table(stages: list[dict[str, Any]]) -> Table:
    return Table(["step", "in", "out", "note"], [[s["step"], s["in"], s["out"], s["note"]] for s in stages],
                 caption="Counts in and out at every step.")


def selection_table(sel: dict[str, Any]) -> Table:
    rows = []
    for t in sel.get("table", []):
        fr = t["fail_rate"]
        cells = [t["config"], t["rank"] if t["rank"] is not None else "excluded"]
        for g in GATES:
            v = fr.get(g)
            mark = " *" if GATE_NAMES[g] in t["excluded_by"] else ""
            cells.append(None if v is None else f"{100 * v:.1f}%{mark}")
        cells += [t["means"][s] for s in SCORES]
        cells += [t["q"], t["judged"], t["failed_rewrites"], t["unjudged"],
                  ", ".join(t["excluded_by"]) or "passes"]
        rows.append(cells)
    cols = (["configuration", "rank", "severity fail", "leakage fail", "format fail"]
            + [SCORE_LABELS[s] for s in SCORES] + ["Q", "judged", "no text", "unjudged", "gates"])
    lim = sel.get("limits") or {}
    cap = ("Rewriter selection (VEILED-SH Table 7): gate failure rates (* = exceeds its limit: "
           f"severity {100 * lim.get('severity', 0.05):.0f}%, leakage {100 * lim.get('leakage', 0.05):.0f}%, "
           f"format {100 * lim.get('format', 0.2):.0f}%), mean judge scores 1-5 and "
           "Q = 0.25f + 0.25p + 0.20a + 0.20c + 0.10n.")
    return Table(cols, rows, caption=cap, number_format=".2f")


def anonymization_blocks(summary: dict[str, Any]) -> list[Any]:
    blocks: list[Any] = []
    if not summary.get("ner"):
        blocks.append(Callout("No NER model was used: the chain ran pattern recognizers only (NRIC/FIN, phone, "
                              "e-mail, URL, handle, plus any known-name list), so unlisted names are not "
                              "detected.", "warning"))
    counts = summary.get("counts", {})
    rows = [[step, ent, n] for step, per in counts.items() for ent, n in sorted(per.items())]
    blocks.append(Table(["step", "entity / check", "count"], rows,
                        caption=f"Anonymization ({summary.get('backend')}): counts per step and entity type."))
    hits = summary.get("residual_hits") or []
    if hits:
        blocks.append(Table(["row", "check", "what"], [[h["id"], h["check"], h["what"]] for h in hits],
                            caption="Residual hits (these rows were not released)."))
    else:
        blocks.append(Paragraph("No residual hits."))
    return blocks


def screening_table(detail: dict[str, Any]) -> Table:
    reasons = ["lexicon", "classifier", "uncertain", "hard_negative"]
    rows = [[src, c.get("in", 0), c.get("retained", 0)] + [c.get(r, 0) for r in reasons]
            for src, c in detail.get("by_source", {}).items()]
    return Table(["source", "rows", "retained"] + reasons, rows, caption="Screening: retained rows per source and reason.")


#: the routing step's figures, as a reader names them (VEILED-SH §4.2)
_ROUTING_LABELS = {
    "rows_in": "rows in", "rows_out": "rows out", "personas": "personas in the pool",
    "k": "candidate personas per row (k)", "attributes": "attributes filtered on",
    "embeddings_from_cache": "persona embeddings", "filter_relaxed": "rows whose attribute filter was relaxed",
    "fallbacks": "fallbacks", "distinct_personas": "distinct personas chosen",
}


def routing_pairs(route: dict[str, Any]) -> list[tuple[str, Any]]:
    """The routing figures as labelled, readable values (no raw ``False`` or ``{}``)."""
    out: list[tuple[str, Any]] = []
    for key, value in route.items():
        if key == "embeddings_from_cache":
            value = "read from the cache" if value else "computed in this run"
        elif key == "fallbacks":
            value = ", ".join(f"{label(k).lower()}: {v}" for k, v in sorted(value.items())) if value else "none"
        elif key == "attributes":
            value = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else (value or "none")
        out.append((_ROUTING_LABELS.get(key, label(key)), value))
    return out


def build_report(metrics: dict[str, Any], manifest: dict[str, Any], prompts: list[dict[str, Any]],
                 rows: list[dict[str, Any]]) -> Report:
    """The report of a finished build (pure: the caller writes it)."""
    sections = [Section("Pipeline", [stage_table(metrics["stages"]),
                                     KeyValue(list(_accounting(metrics.get("accounting") or {}).items()))])]
    if metrics.get("failed_calls"):
        sections.insert(0, Section("Incomplete", [Callout(
            f"{metrics['failed_calls']} calls failed after every retry (the server or the connection failed, "
            "not a model). The rows and rewrites they fed are left out (never counted against a rewriter "
            "configuration's gates) and counted in the pipeline table; re-run the same command to retry "
            "exactly those calls from the cache.", kind="warning")], anchor="incomplete"))
    det = metrics.get("details", {})
    if "screen" in det:
        sections.append(Section("Screening", [screening_table(det["screen"]),
                                              Paragraph("Proxy labels from screening are sampling aids only and "
                                                        "are not part of the released prompts.")]))
    if "route" in det:
        sections.append(Section("Persona routing", [KeyValue(routing_pairs(det["route"]))]))
    sel = metrics.get("selection") or {}
    if sel.get("table"):
        sections.append(Section("Rewriter selection", [selection_table(sel), Paragraph(
            "Selected: " + (", ".join(sel["selected"]) or "none (no rewrites are released)"))]))
    if "judge" in det:
        dropped = det["judge"].get("dropped", {})
        sections.append(Section("Construction judge", [Table(["gates failed", "rewrites"],
                                                             [[k, v] for k, v in sorted(dropped.items())] or [["none", 0]],
                                                             caption="Rewrites not released, by failed gate.")]))
    sections.append(Section("Anonymization", anonymization_blocks(metrics.get("anonymization") or {})))
    if prompts:
        sections.append(Section("Exploratory analysis", _figures(prompts, rows, metrics.get("topics"))))
    notes = []
    if manifest.get("dataset", {}).get("illustrative"):
        notes.append("Built from carebench's illustrative source set: the rows were written for the software, "
                     "not collected; the output demonstrates the pipeline only.")
    return Report("Construct: dataset build", subtitle=f"{len(prompts)} prompts written to prompts.jsonl",
                  notes=notes, sections=sections)


def _accounting(acct: dict[str, Any]) -> dict[str, Any]:
    return {"spent (USD)": acct.get("spent_usd", 0.0), "provider calls": acct.get("provider_calls", 0),
            "cache hits": acct.get("cache_hits", 0), "failed calls": acct.get("errors", 0)}


def _figures(prompts: list[dict[str, Any]], rows: list[dict[str, Any]], topics: Any) -> list[Any]:
    from carebench.construct import figures as F

    blocks: list[Any] = [F.length_by_context(prompts), *F.demographics(prompts)]
    years = F.source_years(rows)
    if years is not None:
        blocks.append(years)
    if topics:
        blocks.append(F.topics_table(topics))
    blocks.append(Paragraph("Figures are descriptive; persona attributes are synthetic, not properties of authors."))
    return blocks


def stage_report(metrics: dict[str, Any], manifest: dict[str, Any]) -> Report:
    """A single stage's report (or a stopped build's): counts in and out, and the stage's
    own details (pure)."""
    blocks: list[Any] = [stage_table(metrics.get("stages", []))]
    if metrics.get("incomplete"):
        blocks.insert(0, Callout(
            f"The run's budget stopped it during {', '.join(metrics['incomplete'])} (incomplete); the steps "
            "above finished. No output rows were written and nothing half-done is counted. Re-run the same "
            "command without --budget (or with a larger one) to finish it from the cache without repeating "
            "a completed call.", "warning"))
    sections = [Section("Counts", blocks)]
    if metrics.get("selection"):
        sections.append(Section("Rewriter selection", [selection_table(metrics["selection"])]))
    if metrics.get("anonymization"):
        sections.append(Section("Anonymization", anonymization_blocks(metrics["anonymization"])))
    if metrics.get("review"):
        sections.append(Section("Review statistics", review_blocks(metrics["review"])))
    for step, det in (metrics.get("details") or {}).items():
        if step == "screen":
            sections.append(Section("Screening", [screening_table(det)]))
    if metrics.get("accounting"):
        sections.append(Section("Model calls", [KeyValue(list(_accounting(metrics["accounting"]).items()))]))
    title = f"Construct: {manifest.get('kind', 'stage')}"
    if metrics.get("incomplete"):
        title += " (incomplete: no output written)"
    elif metrics.get("status") == "stopped":
        title += " (stopped: no output written)"
    return Report(title, sections=sections)


def review_blocks(stats: dict[str, Any]) -> list[Any]:
    est = stats["estimates"]
    rows = [[name.replace("_", " "), e["estimate"], e["lo"], e["hi"]] for name, e in est.items()]
    blocks: list[Any] = [Table(["measure", "estimate", "2.5%", "97.5%"], rows, number_format=".3f",
                               caption=f"Weighted estimates over {stats['items_reviewed']} reviewed items "
                                       "(failure rates as proportions, ratings 1-5); intervals from "
                                       f"{stats['bootstrap']['B']} resamples within context-rewriter cells "
                                       f"(seed {stats['bootstrap']['seed']}).")]
    ag = stats.get("agreement", {})
    blocks.append(Table(["statistic", "value"], [[k, v] for k, v in ag.items()],
                        caption="Agreement on shared items: Cohen's kappa for gates, quadratic-weighted kappa for "
                                "ratings (VEILED-SH Table 9)."))
    if stats.get("missing_reviews"):
        blocks.append(Callout(f"{stats['missing_reviews']} assigned reviews are missing.", "warning"))
    return blocks


def construct_headline(metrics: dict[str, Any]) -> Headline:
    """What the command produced: the best rewriter configuration by Q among those passing
    every gate (VEILED-SH §4, Table 7) when the run selected one, and the rows in and out;
    caveats for a stopped or incomplete run and for configurations the gates excluded."""
    stages = metrics.get("stages") or []
    caveats = []
    if metrics.get("status") in ("stopped", "incomplete"):
        caveats.append(f"run {metrics['status']}" + (f" ({', '.join(metrics.get('incomplete') or [])} incomplete)"
                                                      if metrics.get("incomplete") else "")
                       + (f": {metrics['error']}" if metrics.get("error") else ""))
    if metrics.get("failed_calls"):
        caveats.append(f"{metrics['failed_calls']} calls failed after every retry (left out and counted)")
    sel = metrics.get("selection") or {}
    table = {t["config"]: t for t in sel.get("table") or []}
    excluded = [c for c, t in table.items() if t.get("excluded_by")]
    if excluded:
        caveats.append("excluded by a gate: " + ", ".join(excluded))
    rows = [(str(s["step"]), f"{s['in']} in, {s['out']} out") for s in stages]
    chosen = sel.get("selected") or []
    if chosen:
        best = table.get(chosen[0]) or {}
        judged = best.get("judged")
        if isinstance(judged, int) and judged < SMALL_N:
            caveats.append(f"small n: {judged} judged rewrites (fewer than {SMALL_N})")
        return Headline(f"Selected rewriter: {chosen[0]}", measure="Q, the weighted judge score (1 to 5, "
                        "higher is better)", value=None if best.get("q") is None else Interval(float(best["q"])),
                        n=judged if isinstance(judged, int) else None, unit="judged rewrites",
                        caveats=caveats, rows=rows, number_format=".2f")
    if sel:
        return Headline("No rewriter configuration passes every gate", caveats=caveats, rows=rows)
    last = stages[-1] if stages else None
    verdict = (f"{label(str(last['step']))}: {last['out']} of {last['in']} rows out" if last
               else "No step finished")
    return Headline(verdict, caveats=caveats, rows=rows)
