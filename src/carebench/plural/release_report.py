"""Reports of ``plural freeze``, ``plural label`` and ``plural agreement`` (from their files alone)."""

from __future__ import annotations

from typing import Any

from carebench.plural.calibration_report import ARCH_TITLE, header
from carebench.plural.report import code_names, label_name
from carebench.report.document import (
    Callout,
    Headline,
    Interval,
    KeyValue,
    Paragraph,
    Report,
    Section,
    Table,
)
from carebench.report.headline import SMALL_N, interval_caveats, no_headline


def _acct(man: dict[str, Any]) -> Section:
    a = man.get("accounting", {})
    return Section("Run", [KeyValue([
        ("model", ", ".join(man.get("models") or []) or "none"),
        ("model calls made", a.get("provider_calls")),
        ("answered from cache", a.get("cache_hits")),
        ("spent (USD)", a.get("spent_usd")),
    ])])


def freeze_report(man: dict[str, Any], metrics: dict[str, Any], records: list[dict[str, Any]]) -> Report:
    rows = []
    for r in records:
        fs = r.get("fold_scores") or {}
        rows.append([r["alias"], ARCH_TITLE.get(r["archetype"], r["archetype"]), r["method"], r["fit_cases"],
                     r["guidelines"], r["demos"], fs.get("practitioner_out_of_fold_macro_f1"),
                     ", ".join(r.get("fit_warnings") or []) or "", r["hash"][:12]])
    table = Table(["Profile", "Archetype", "Method", "Cases", "Guidelines", "Demos",
                   "Out-of-fold macro-F1", "Fit warnings", "Hash"], rows,
                  caption="Frozen profiles: the selected method refit once per practitioner on every "
                          "calibration case they labelled (VEILED-SH, §5.2)",
                  number_format=["", "", "", "d", "d", "d", ".3f", "", ""])
    return Report("Plural: frozen profiles", "VEILED-SH, §5.2",
                  sections=[Section("About this run", header(man) or [Paragraph("Freeze run.")]),
                            Section("Profiles", [table, Paragraph(
                                "Aliases are neutral (P for peer support, C for clinicians); the mapping to "
                                "practitioners stays in the profile files and the release's private folder.")]),
                            _acct(man)])


def label_report(man: dict[str, Any], metrics: dict[str, Any]) -> Report:
    ex = metrics["excluded_for_leakage"]
    dr = metrics["dropped"]
    counts = KeyValue([
        ("prompts", metrics["prompts"]),
        ("excluded for calibration leakage",
         f"{ex['arithmetic']} (calibration prompts + prompts sharing their source id)"),
        ("labelled by every profile", metrics["labelled"]),
        ("dropped (failed interpretation or missing severity under any profile)",
         f"{dr['total']} (" + ", ".join(f"{k}: {v}" for k, v in dr.items() if k != "total") + ")"
         if dr["total"] else "0"),
        ("released", metrics["released"]),
    ])
    rows = [[a, c.get("labelled", 0), c.get("failed interpretation", 0), c.get("missing severity", 0)]
            for a, c in metrics["per_profile"].items()]
    about = header(man)
    if metrics["labelled"] and not metrics["released"]:
        about.append(Callout("No prompt received a valid policy from every profile, so the release is "
                             "empty. The per-profile failures below say why.", "warning"))
    return Report("Plural: scale-out and release", "VEILED-SH, §5.2 (profile freezing, release assembly)",
                  sections=[Section("About this run", about or [Paragraph("Label run.")]),
                            Section("Counts", [counts, Table(
                                ["Profile", "Labelled", "Failed interpretation", "Missing severity"], rows,
                                caption="Failures per profile (a prompt failing under any profile is dropped)",
                                number_format="d")]),
                            Section("Release", [Paragraph(
                                f"Release written to {man.get('release')}: prompts.jsonl, policies.jsonl "
                                "(one policy per prompt and profile), metadata.json; private/ holds the "
                                "identity mapping, raw practitioner labels, rationales and memories and is "
                                "not for distribution. Profile-generated labels are neither human annotations "
                                "nor ground truth.")]),
                            _acct(man)])


def agreement_report(man: dict[str, Any], metrics: dict[str, Any]) -> Report:
    labels = man["scoring"]["label_space"]
    names = code_names(man)
    shown = {lab: label_name(lab, names) for lab in labels}  # the code stays in its own column
    about = header(man)
    if not metrics["prevalence"]:
        about.append(Callout("The release holds no policies: only the practitioners' agreement is shown.",
                             "warning"))
    sections = [Section("About this run", about or [Paragraph("Agreement run.")])]
    for arch, t_prev, t_ac1 in (("peer", "Table 10", "Table 12"), ("clinician", "Table 11", "Table 13")):
        profs = {a: v for a, v in metrics["prevalence"].items() if v["archetype"] == arch}
        blocks = []
        if profs:
            names = sorted(profs)
            aliases = sorted(profs)
            rows = [[shown[lab], lab, *[profs[a]["labels"][lab] for a in aliases]] for lab in labels]
            rows.append(["mean policy size", "", *[profs[a]["mean_policy_size"] for a in aliases]])
            blocks.append(Table(["Label", "code", *aliases], rows, number_format=".1f",
                                caption=f"{t_prev}: {ARCH_TITLE[arch]} profile-generated label prevalence (%) "
                                        "and mean policy size (response categories)"))
        hk, pk = f"practitioners/{arch}", f"profiles/{arch}"
        if hk in metrics["ac1"] or pk in metrics["ac1"]:
            rows = [[shown[lab], lab, metrics["ac1"].get(hk, {}).get(lab), metrics["ac1"].get(pk, {}).get(lab)]
                    for lab in labels]
            rows.append(["mean pairwise Jaccard", "", metrics["jaccard"].get(hk), metrics["jaccard"].get(pk)])
            blocks.append(Table(["Label", "code", "Practitioners (calibration cases)", "Profiles (released prompts)"],
                                rows, caption=f"{t_ac1}: {ARCH_TITLE[arch]} per-label Gwet AC1 on binary "
                                              "presence, and mean pairwise Jaccard of complete label sets"))
        if blocks:
            blocks.append(Paragraph("Practitioner and profile agreement are computed on different prompt "
                                    "populations (VEILED-SH, Appendix C.2); the comparison is descriptive."))
            sections.append(Section(ARCH_TITLE[arch], blocks))
    return Report("Plural: profile label distributions and agreement", "VEILED-SH, Appendix C",
                  sections=sections)


def _method(code: str) -> str:
    """A profile method's name with its code beside it (``memory-aligned judge (MemAlign) (E4)``)."""
    from carebench.plural.profiles import METHODS, get_method

    return f"{get_method(code).title} ({code})" if code in METHODS else str(code)


def freeze_headline(man: dict[str, Any], metrics: dict[str, Any], records: list[dict[str, Any]]) -> Headline:
    """What was frozen (VEILED-SH §5.2): per archetype the method and its profiles, the
    calibration cases each was fitted on, and the method's calibration macro-F1."""
    profiles = metrics.get("profiles") or {}
    if not profiles:
        return no_headline("no profile was frozen")
    by_arch: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_arch.setdefault(r["archetype"], []).append(r)
    rows, caveats, parts = [], [], []
    for arch, rs in by_arch.items():
        title = ARCH_TITLE.get(arch, arch)
        method = _method(rs[0]["method"])
        parts.append(f"{title} by {method}")
        cases = sorted({r["fit_cases"] for r in rs})
        f1 = (rs[0].get("fold_scores") or {}).get("archetype_macro_f1")
        rows.append((title, f"{len(rs)} profiles ({', '.join(r['alias'] for r in rs)}), {method}, fitted on "
                            f"{cases[0] if len(cases) == 1 else f'{cases[0]} to {cases[-1]}'} calibration cases each"
                            + (f"; calibration macro-F1 {f1:.3f}" if isinstance(f1, int | float) else "")))
        if cases[0] < SMALL_N:
            caveats.append(f"small n: {title} profiles fitted on {cases[0]} cases (fewer than {SMALL_N}); "
                           "their labels are automated proxies, not practitioner judgments")
        if not isinstance(f1, int | float):
            caveats.append(f"{title}: the method was set by hand, with no calibration score to show")
        warned = sorted({r["alias"] for r in rs if r.get("fit_warnings")})
        if warned:
            caveats.append(f"{title}: fit warnings for {', '.join(warned)} (see the table)")
    return Headline(f"Frozen {len(profiles)} profiles: " + "; ".join(parts), rows=rows, caveats=caveats)


def label_headline(man: dict[str, Any], metrics: dict[str, Any]) -> Headline:
    """The release (VEILED-SH §5.2): how many prompts it holds of how many, and why the
    others are not in it (calibration leakage, failed or incomplete policies)."""
    ex, dr = metrics["excluded_for_leakage"], metrics["dropped"]
    released, total = metrics["released"], metrics["prompts"]
    rows = [("excluded for calibration leakage", f"{ex['total']} ({ex['arithmetic']})"),
            ("labelled by every profile", f"{metrics['labelled']} prompts by {len(metrics['per_profile'])} profiles"),
            ("dropped", f"{dr['total']}" + (" (" + ", ".join(f"{k}: {v}" for k, v in dr.items() if k != "total") + ")"
                                            if dr["total"] else ""))]
    caveats = interval_caveats(None, None, None, released, "prompts") if released else []
    if metrics["labelled"] and not released:
        caveats.append("the release is empty: no prompt received a valid policy from every profile")
    elif dr["total"]:
        caveats.append(f"{dr['total']} labelled prompts dropped: a prompt failing under any profile is left out")
    return Headline(f"Released {released} of {total} prompts", rows=rows, caveats=caveats)


def agreement_headline(man: dict[str, Any], metrics: dict[str, Any]) -> Headline:
    """Agreement among practitioners against agreement among their profiles (VEILED-SH
    Appendix C.2): mean pairwise Jaccard of complete label sets per archetype, with the
    raters and items behind each."""
    jac, raters = metrics.get("jaccard") or {}, metrics.get("raters") or {}
    rows, caveats, moves = [], [], []
    for arch in ("peer", "clinician"):
        hk, pk = f"practitioners/{arch}", f"profiles/{arch}"
        if hk not in jac and pk not in jac:
            continue
        title = ARCH_TITLE[arch]

        def side(key: str, items: str) -> str:
            r = raters.get(key) or {}
            v = jac.get(key)
            return (("n/a" if v is None else Interval(v).format()) +
                    f" ({len(r.get('raters') or [])} raters, {r.get('items', 0)} {items})")

        rows.append((title, f"practitioners {side(hk, 'calibration cases')} -> profiles {side(pk, 'released prompts')}"))
        if hk in jac and pk in jac:  # compared as shown (3 decimals): a shown tie is called equal
            prof, prac = round(jac[pk], 3), round(jac[hk], 3)
            moves.append(f"{'higher' if prof > prac else 'lower' if prof < prac else 'equal'} for {title.lower()}")
        small = [f"{(raters.get(k) or {}).get('items', 0)} {what}" for k, what in
                 ((hk, "calibration cases"), (pk, "released prompts"))
                 if k in jac and (raters.get(k) or {}).get("items", 0) < SMALL_N]
        if small:
            caveats.append(f"small n: {title.lower()} agreement over {' and '.join(small)} (fewer than {SMALL_N})")
    if not rows:
        return no_headline("no archetype has two raters to compare")
    caveats.append("no interval is computed for these agreement figures")
    caveats.append("practitioners and profiles label different prompts, so the comparison is descriptive "
                   "(VEILED-SH, Appendix C.2)")
    verdict = ("Profile agreement against practitioner agreement (mean pairwise Jaccard): " + ", ".join(moves)
               if moves else "Mean pairwise Jaccard of complete label sets")
    return Headline(verdict, measure=None, rows=rows, caveats=caveats)
