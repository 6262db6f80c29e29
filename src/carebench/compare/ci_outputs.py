"""What a CI job reads from a comparison: a JUnit XML file and a pull-request summary.

JUnit: one ``testsuite`` named after the comparison, one ``testcase`` per gated
metric and pair, with a ``failure`` element when its verdict is a regression (CI
systems show those as failed tests). The summary is short markdown for a
pull-request comment: the gate's outcome, then one line per gated metric.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from carebench.fileio import atomic_write_text
from carebench.report import format_value


def _num(x: Any, fmt: str = "+.4f") -> str:
    return "n/a" if x is None else format(float(x), fmt)


def _ci(ci: list[Any]) -> str:
    return f"[{_num(ci[0])}, {_num(ci[1])}]"


def gated_rows(metrics: Mapping[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(p, r) for p in metrics["pairs"] for r in p["rows"] if r["gated"]]


def junit_xml(metrics: Mapping[str, Any]) -> str:
    rows = gated_rows(metrics)
    failures = sum(r["verdict"] == "regression" for _, r in rows)
    suite = ET.Element("testsuite", name=f"carebench compare ({metrics['suite']})", tests=str(len(rows)),
                       failures=str(failures), errors="0", skipped="0")
    for p, r in rows:
        case = ET.SubElement(suite, "testcase", classname=f"carebench.compare.{metrics['suite']}",
                             name=f"{r['metric']} [{p['base']} -> {p['candidate']}]")
        text = (f"{r['label']}: base {_num(r['base'], '.4f')}, candidate {_num(r['candidate'], '.4f')}, "
                f"difference {_num(r['diff'])} {_ci(r['ci'])} (95% paired bootstrap over {p['n_units']} "
                f"shared units), margin {r['margin']}, verdict {r['verdict']}")
        if r["verdict"] == "regression":
            ET.SubElement(case, "failure", message=f"regression: {r['label']} {_num(r['diff'])}",
                          type="regression").text = text
        else:
            ET.SubElement(case, "system-out").text = text
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def summary_markdown(metrics: Mapping[str, Any]) -> str:
    rows = gated_rows(metrics)
    failed = [r for _, r in rows if r["verdict"] == "regression"]
    head = (f"**carebench compare ({metrics['suite']}): {'FAIL' if failed else 'pass'}** - "
            f"{len(failed)} of {len(rows)} gated metric(s) regressed.")
    lines = [head, "", (f"Base `{metrics['base']['path']}` vs candidate `{metrics['candidate']['path']}`; "
             f"95% paired bootstrap (B = {metrics['settings']['B']}, seed {metrics['settings']['seed']})."), "",
             "| pair | metric | base | candidate | difference [95% CI] | P(worse) | verdict |",
             "|---|---|---:|---:|---|---:|---|"]
    for p, r in rows:
        mark = "**regression**" if r["verdict"] == "regression" else r["verdict"]
        lines.append(f"| {_md(p['base'])} -> {_md(p['candidate'])} | {_md(r['label'])} | "
                     f"{format_value(r['base'], '.4f')} | {format_value(r['candidate'], '.4f')} | "
                     f"{_num(r['diff'])} {_ci(r['ci'])} | {format_value(r['p_worse'], '.3f')} | {mark} |")
    over = metrics["comparability"]["overridden"]
    if over:
        lines += ["", "Overridden comparability checks: " + ", ".join(f"`{o['key']}`" for o in over)]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("`", "'")


def write_junit(path: str | Path, metrics: Mapping[str, Any]) -> None:
    atomic_write_text(Path(path), junit_xml(metrics))


def write_summary(path: str | Path, metrics: Mapping[str, Any]) -> None:
    atomic_write_text(Path(path), summary_markdown(metrics))
