"""Reports of ``plural freeze``, ``plural label`` and ``plural agreement`` (from their files alone)."""

from __future__ import annotations

from typing import Any

from carebench.plural.calibration_report import ARCH_TITLE, header
from carebench.plural.report import code_names, label_name
from carebench.report.document import Callout, KeyValue, Paragraph, Report, Section, Table


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
