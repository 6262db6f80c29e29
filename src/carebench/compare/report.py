"""Reports of a comparison and of a leaderboard, pure functions of their ``metrics.json``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from carebench.report import (
    Block,
    Callout,
    Details,
    Headline,
    Interval,
    KeyValue,
    Paragraph,
    Report,
    Section,
    Table,
    dot_interval_chart,
    figure_name,
    figure_or_sentence,
)
from carebench.report.headline import interval_caveats

SECTIONS = (("headline", "Headline metrics"), ("safety", "Safety views"))
#: pairs with a forest plot of every metric each; beyond this (a 25-responder run against
#: another) the report draws one forest plot of the gated metrics of every pair, since each
#: chart costs about half a second to draw
MAX_PAIR_FORESTS = 3


#: said under every forest plot: which side is better
FOREST_CUE = ("Right of the dotted line the candidate is better, left of it worse: a lower-is-better "
              "metric (marked \u2193) is drawn as base - candidate, so its sign is turned to match.")


def _oriented(r: Mapping[str, Any]) -> tuple[float, float, float]:
    """A row's difference and interval turned so that a positive value means the candidate
    is better (a lower-is-better metric's candidate - base is negated, its bounds swapped)."""
    lo, hi = (float("nan") if x is None else float(x) for x in r["ci"])
    d = float(r["diff"])
    return (d, lo, hi) if r["higher_is_better"] else (-d, -hi, -lo)


def _forest(rows: list[dict[str, Any]], labels: list[str], title: str, name: str, caption: str) -> Block:
    """A forest plot of paired differences, every metric oriented so right is better."""
    oriented = [_oriented(r) for r in rows]
    shown = [lab if r["higher_is_better"] else f"{lab} \u2193" for lab, r in zip(labels, rows, strict=True)]
    return figure_or_sentence(figure_name(name), f"{caption} {FOREST_CUE}", lambda: dot_interval_chart(
        shown, [o[0] for o in oriented], [o[1] for o in oriented], [o[2] for o in oriented],
        title, xlabel="difference (95% paired CI)", sort=False, reference=0.0,
        sides=("candidate worse", "candidate better")))


def _override_lines(over: list[dict[str, Any]]) -> list[str]:
    return [f"{o['key']}: base {o['base']!r}, candidate {o['candidate']!r}" for o in over]


def _gate_text(g: Mapping[str, Any], m: Mapping[str, Any]) -> str:
    """A gate as a reader reads it: the metric's name with its key beside it (``macro-F1
    (macro_f1, margin 0.0)``); a pattern naming several metrics stays as written."""
    labels = {r["metric"]: r["label"] for p in m["pairs"] for r in p["rows"]}
    key = g["metric"]
    label = labels.get(key)
    return (f"{label} ({key}, margin {g['margin']})" if label and label != key
            else f"{key} (margin {g['margin']})")


def compare_report(m: Mapping[str, Any]) -> Report:
    s = m["settings"]
    failed = m["gate"]["failed"]
    comp = m["comparability"]
    notes = []
    decision: list[Any] = []
    if failed:
        decision.append(Callout(f"Gate failed: {len(failed)} gated metric(s) regressed (exit code 1): "
                                + "; ".join(f"{f['label']} ({f['pair']})" for f in failed), kind="warning"))
    else:
        decision.append(Callout("Gate passed: no gated metric regressed (exit code 0)."))
    if comp["overridden"]:
        decision.append(Callout("Comparability checks overridden on purpose (--allow-different): "
                                + "; ".join(_override_lines(comp["overridden"])), kind="warning"))
    decision.append(KeyValue([
        ("suite", m["suite"]),
        ("base run", m["base"]["path"]), ("base created", m["base"]["created"]),
        ("candidate run", m["candidate"]["path"]), ("candidate created", m["candidate"]["created"]),
        ("pairs", ", ".join(f"{a} -> {b}" for a, b in s["pairs"])),
        ("gated metrics", ", ".join(_gate_text(g, m) for g in s["gates"])
         + (" (the suite's defaults)" if s["gates_default"] else "")),
        ("bootstrap", f"paired percentile bootstrap, B = {s['B']}, seed {s['seed']}, {100 * (1 - s['alpha']):.0f}% "
                      f"intervals, resampling shared {m['unit']}s"
                      + (f" by {m['cluster']}" if m.get("cluster") else "")),
        ("margin", s["margin"]),
    ]))
    decision.append(Paragraph(
        "Difference = candidate - base on the units both runs scored. Verdict: regression when the whole "
        "interval is worse than -margin, improvement when it is wholly better than +margin, otherwise not "
        "separable (for lower-is-better rates such as under-triage, worse means higher). P(worse) is the share "
        f"of resamples in which the candidate is worse than the base. Units ({m['unit']}s), not single "
        "judgments, are resampled: the judgments of one unit are not independent evidence."))
    gated = [(p, r) for p in m["pairs"] for r in p["rows"] if r["gated"] and r["diff"] is not None]
    if gated:
        decision.append(_forest(
            [r for _, r in gated], [f"{r['label']} ({p['candidate']})" if len(m["pairs"]) > 1 else r["label"]
                                    for p, r in gated],
            "gated metrics: candidate - base", "forest-gated",
            "Forest plot of the gated metrics (dot: candidate - base; line: 95% paired interval; dotted "
            "line: no difference)."))
    sections = [Section("Decision", decision, anchor="decision")]
    comp_blocks: list[Any] = []
    if comp["notes"]:
        comp_blocks += [Paragraph(n) for n in comp["notes"]]
    comp_blocks.append(Paragraph("Every comparability key is equal" if not comp["overridden"] else
                                 f"{len(comp['overridden'])} key(s) differ and were overridden; every other "
                                 "key is equal."))
    if comp["overridden"]:
        comp_blocks.append(Table(["key", "base", "candidate"],
                                 [[o["key"], repr(o["base"]), repr(o["candidate"])] for o in comp["overridden"]],
                                 caption="Overridden comparability checks"))
    sections.append(Section("Comparability", comp_blocks, anchor="comparability"))
    for k, p in enumerate(m["pairs"]):
        blocks: list[Any] = [Paragraph(
            f"{p['n_units']} shared {m['unit']}s"
            + (f" in {p['n_clusters']} {m['cluster']}s" if p.get("n_clusters") else "")
            + f"; {p['n_base_only']} only in the base run, {p['n_candidate_only']} only in the candidate run "
            "(left out).")]
        for side in ("base", "candidate"):
            for c in (p.get("caveats") or {}).get(side) or []:
                blocks.append(Callout(f"{side} {p[side]}: {c}", kind="warning"))
        for key, title in SECTIONS:
            rows = [r for r in p["rows"] if r["section"] == key]
            if not rows:
                continue
            blocks.append(Table(
                ["metric", "base", "candidate", "difference [95% CI]", "P(worse)", "verdict", "gated"],
                [[r["label"] + ("" if r["higher_is_better"] else " (lower is better)"), r["base"], r["candidate"],
                  Interval.of(r["diff"], r["ci"]), r["p_worse"], r["verdict"], "yes" if r["gated"] else ""] for r in rows],
                caption=f"{title}: {p['base']} -> {p['candidate']}", number_format=".4f"))
        shown = [r for r in p["rows"] if r["diff"] is not None]
        if shown and len(m["pairs"]) <= MAX_PAIR_FORESTS:
            blocks.append(_forest(shown, [r["label"] for r in shown],
                                  f"candidate - base: {p['candidate']} vs {p['base']}", f"forest-{k + 1}",
                                  "Forest plot of every paired difference (dot: candidate - base; line: 95% "
                                  "interval; dotted line: no difference)."))
        sections.append(Section(f"{p['base']} -> {p['candidate']}", blocks, anchor=f"pair-{k + 1}"))
    drill = []
    for d in m["drilldown"]:
        if d["rows"]:
            drill.append(Details(d["title"], [Table(d["columns"], d["rows"], caption=d["caption"],
                                                    number_format=".3f")], open=True))
        else:
            drill.append(Paragraph(f"{d['title']}: {d['caption'] or 'none.'}"))
    if drill:
        sections.append(Section("What changed most", drill, anchor="drilldown"))
    return Report(title=f"Compare ({m['suite']}): candidate vs base", subtitle=f"{m['candidate']['path']} vs "
                  f"{m['base']['path']}", notes=notes, sections=sections)


def leaderboard_report(m: Mapping[str, Any]) -> Report:
    s = m["settings"]
    runs = m["runs"]
    excluded = [r for r in runs if not r["included"]]
    head: list[Any] = [Paragraph(
        f"{sum(r['included'] for r in runs)} of {len(runs)} runs merged; every run is checked against the first "
        "with the comparability rules of carebench compare. Systems are scored on the "
        f"{m['unit']}s all of them share; bands as DistressBench §4.1/E.1: adjacent systems are separated when "
        f"the {100 * (1 - s['alpha']):.0f}% paired-bootstrap interval of their gap excludes 0 (B = {s['B']}, "
        f"seed {s['seed']}, resampling {m['unit']}s" + (f" by {m['cluster']}" if m.get("cluster") else "") + ").")]
    if excluded:
        head.append(Callout(f"{len(excluded)} run(s) excluded: "
                            + "; ".join(f"{r['path']} ({r['reason']})" for r in excluded), kind="warning"))
    if m["duplicates"]:
        head.append(Callout("Systems found in several runs (never averaged): " + "; ".join(
            f"{d['system']} in {len(d['runs'])} runs, kept {d['chosen']} (--prefer {d['rule']})"
            for d in m["duplicates"]), kind="warning"))
    head.append(Table(["run", "created", "systems", "included", "reason"],
                      [[r["path"], r["created"], len(r["systems"]), "yes" if r["included"] else "no",
                        r["reason"] or ""] for r in runs], caption="Runs"))
    sections = [Section("Runs", head, anchor="runs")]
    for k, b in enumerate(m["boards"]):
        blocks: list[Any] = [Paragraph(
            f"{len(b['rows'])} systems on {b['n_common_units']} shared {m['unit']}s; "
            f"{b.get('n_separated', 0)} of {len(b['gaps'])} adjacent gaps separated, {b.get('n_bands', 0)} band(s).")]
        if b["rows"]:
            blocks.append(Table(["rank", "band", "system", b["label"] + " [95% CI]", "caveat", "run"],
                                [[r["rank"], r["band"], r["system"], Interval.of(r["value"], r["ci"]),
                                  "; ".join(r.get("caveats") or []), r["run"]]
                                 for r in b["rows"]], caption=f"Leaderboard: {b['label']}", number_format=".4f",
                                sortable=True))
            blocks.append(figure_or_sentence(
                figure_name(f"leaderboard-{k + 1}"), "Scores with 95% intervals; shading alternates by band.",
                lambda b=b: dot_interval_chart(
                    [r["system"] for r in b["rows"]], [r["value"] for r in b["rows"]],
                    [float("nan") if r["ci"][0] is None else r["ci"][0] for r in b["rows"]],
                    [float("nan") if r["ci"][1] is None else r["ci"][1] for r in b["rows"]],
                    b["label"], xlabel=b["label"], bands=[f"band {r['band']}" for r in b["rows"]], sort=False)))
            blocks.append(Details("Adjacent gaps", [Table(
                ["upper", "lower", "difference [95% CI]", "separated"],
                [[g["upper"], g["lower"], Interval.of(g["diff"], g["ci"]), "yes" if g["separated"] else "no"]
                 for g in b["gaps"]], number_format=".4f")]))
        sections.append(Section(f"Leaderboard: {b['label']}", blocks, anchor=f"board-{k + 1}"))
    n_in = len(runs) - len(excluded)
    subtitle = f"{n_in} run(s) merged" + (f"; {len(excluded)} excluded (see Runs)" if excluded else "")
    return Report(title=f"Leaderboard ({m['suite']})", subtitle=subtitle, sections=sections,
                  attachments={"leaderboard.csv": leaderboard_csv(dict(m))})


def leaderboard_csv(metrics: dict[str, Any]) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["metric", "rank", "system", "value", "ci_low", "ci_high", "band", "run", "caveats"])
    for b in metrics["boards"]:
        for r in b["rows"]:
            w.writerow([b["metric"], r["rank"], r["system"], _csv(r["value"]), _csv(r["ci"][0]), _csv(r["ci"][1]),
                        r["band"], r["run"], " | ".join(r.get("caveats") or [])])
    return buf.getvalue()


def _csv(x: Any) -> str:
    return "" if x is None else repr(float(x))


def compare_headline(m: Mapping[str, Any]) -> Headline:
    """The gate decision first, then the first gated difference with its paired interval and
    the shared units; caveats for small n, a collapsed interval, overridden checks and
    flagged inputs."""
    failed = m["gate"]["failed"]
    verdict = (f"Gate failed: {len(failed)} gated metric(s) regressed" if failed
               else "Gate passed: no gated metric regressed")
    caveats: list[str] = []
    measure = value = n = None
    for p in m["pairs"]:
        row = next((r for r in p["rows"] if r["gated"] and r["diff"] is not None), None)
        if row is None:
            continue
        measure = (f"{row['label']}, candidate - base ({p['base']} -> {p['candidate']}; "
                   f"{'higher' if row['higher_is_better'] else 'lower'} is better), verdict {row['verdict']}")
        value, n = Interval(float(row["diff"]), row["ci"][0], row["ci"][1]), p.get("n_units")
        caveats += interval_caveats(value.value, value.lo, value.hi, n, f"{m['unit']}s", ".4f")
        break
    if m["comparability"]["overridden"]:
        caveats.append("comparability checks overridden: " + "; ".join(_override_lines(m["comparability"]["overridden"])))
    if "flagged results" in (m.get("banners") or []):
        caveats.append("an input run has flagged results: the decision rests on systems over their failure limit "
                       "or with failed calls")
    caveats += _system_caveats(m)
    return Headline(verdict, measure=measure, value=value, n=n, unit=f"{m['unit']}s" if n is not None else "",
                    caveats=caveats, number_format=".4f")


def _system_caveats(m: Mapping[str, Any]) -> list[str]:
    """Every compared system's own caveats (e.g. a chatbot whose every turn refused), once each."""
    out: list[str] = []
    for p in m["pairs"]:
        for side in ("base", "candidate"):
            for c in (p.get("caveats") or {}).get(side) or []:
                line = f"{side} {p[side]}: {c}"
                if line not in out:
                    out.append(line)
    return out


def leaderboard_headline(m: Mapping[str, Any]) -> Headline:
    """The first board's top system with its interval and the shared units; the systems in
    its band (not separable from it) and the excluded runs are caveats."""
    excluded = [r for r in m["runs"] if not r["included"]]
    boards = [b for b in m["boards"] if b["rows"]]
    tail = [f"{len(excluded)} run(s) excluded (see Runs)"] if excluded else []
    if "flagged results" in (m.get("banners") or []):
        tail.append("an input run has flagged results")
    if not boards:
        return Headline("No system on the leaderboard", caveats=tail)
    b = boards[0]
    top = b["rows"][0]
    same = [str(r["system"]) for r in b["rows"][1:] if r["band"] == top["band"]]
    lo, hi = top["ci"][0], top["ci"][1]
    caveats = ([f"not separable from (same band): {', '.join(same)}"] if same else []) + interval_caveats(
        top["value"], lo, hi, b.get("n_common_units"), f"{m['unit']}s", ".4f") + tail
    caveats += [f"{r['system']} (rank {r['rank']}): {c}" for r in b["rows"] for c in r.get("caveats") or []]
    return Headline(f"Top system: {top['system']}", measure=b["label"],
                    value=None if top["value"] is None else Interval(float(top["value"]), lo, hi),
                    n=b.get("n_common_units"), unit=f"{m['unit']}s", caveats=caveats, number_format=".4f")
