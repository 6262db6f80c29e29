"""Every report the demo writes, plus a compare and a leaderboard, parsed as HTML: each
has its headline box at the top, the banners its inputs call for, full system names
and no raw band code outside a code column.

What is due is derived here from each run directory's ``manifest.json`` and
``metrics.json`` (the rules docs/view.md and docs/architecture.md state), never by
calling carebench's own banner or naming functions.
"""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from carebench.cli import main
from stub_server import StubServer
from test_demo_workers import _answer

EMBEDDED = "llamacpp:builtin"
#: words of each banner kind, as a reader sees them
BANNER_WORDS = {"embedded": "embedded model", "illustrative": "illustrative or synthetic data",
                "flagged": "flagged results"}


# -- the runs: one stub-backed demo, a second risk run, a compare and a leaderboard --------------


@pytest.fixture(scope="session")
def reports(tmp_path_factory) -> dict[str, Path]:
    """Run directories by name: the demo index and each part, a compare and a leaderboard."""
    from carebench.demo import run_demo

    root = tmp_path_factory.mktemp("headlines")
    with StubServer() as stub:
        stub.handler = _answer
        demo = run_demo(out=root / "demo", model_spec=f"openai:m@{stub.base_url}",
                        cache_path=root / "cache.sqlite", jobs=1)
        risk = demo / "risk"
        data = str(json.loads((risk / "manifest.json").read_text())["config"]["data"])
        # a second risk run on the same items: another model, the demo's settings
        assert main(["risk", "run", "--data", data, "--method", "tfidf-lr", "--method", "llm:decoding=json",
                     "--model", f"openai:other@{stub.base_url}", "--bootstrap", "500",
                     "--cache", str(root / "cache2.sqlite"), "--out", str(root / "risk2")]) == 0
    assert main(["compare", str(risk), str(root / "risk2"), "--method", "llm=llm",
                 "--out", str(root / "compare")]) in (0, 1)
    # tfidf-lr asks no model, so it is one system in both runs: the leaderboard keeps the newer
    assert main(["leaderboard", str(risk), str(root / "risk2"), "--prefer", "newest",
                 "--out", str(root / "leaderboard")]) == 0
    runs = {"demo": demo, **{p: demo / p for p in ("risk", "support", "plural", "converse")},
            "compare": root / "compare", "leaderboard": root / "leaderboard"}
    assert all((d / "report.html").is_file() for d in runs.values())
    return runs


# -- reading a page -------------------------------------------------------------------------------


class Page(HTMLParser):
    """The parts of a report page the checks need, found by element and class. A text is
    "code" inside <code> or <pre>, an element whose class names code, or a table column
    headed "code"."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, set[str]]] = []
        self.order: list[str] = []  # "banner", "headline", "section" in document order
        self.banners: list[str] = []
        self.headline: list[str] = []  # text of the headline box
        self.verdict = ""
        self.cells: list[tuple[str, bool]] = []  # (table cell text, in a code column or element)
        self.texts: list[tuple[str, bool]] = []  # every text node and whether it is code
        self.columns: list[tuple[str, str, bool]] = []  # (column header, body cell text, is code)
        self.tables: list[dict[str, Any]] = []  # open tables: header texts, current column

    def _inside(self, cls: str) -> bool:
        return any(cls in c for _, c in self.stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "wbr":  # a line-break chance inside a long token: the cell's text goes on
            self._joined = True
            return
        if tag in ("br", "img", "meta", "link", "hr", "input", "col"):
            return
        self.stack.append((tag, classes))
        if tag == "table":
            self.tables.append({"headers": [], "col": -1, "head": False})
        elif self.tables and tag == "thead":
            self.tables[-1]["head"] = True
        elif self.tables and tag == "tbody":
            self.tables[-1]["head"] = False
        elif self.tables and tag == "tr":
            self.tables[-1]["col"] = -1
        elif self.tables and tag in ("td", "th"):
            t = self.tables[-1]
            t["col"] += 1
            if t["head"]:
                t["headers"].append("")
        if "banner" in classes:
            self.order.append("banner")
            self.banners.append("")
        elif "headline" in classes:
            self.order.append("headline")
        elif tag == "section":
            self.order.append("section")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self.tables:
            self.tables.pop()
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break

    def _code(self) -> bool:
        if any(t in ("code", "pre") or "code" in c for t, c in self.stack):
            return True
        if self.tables and any(t == "td" for t, _ in self.stack):
            t = self.tables[-1]
            headers = t["headers"]
            return 0 <= t["col"] < len(headers) and headers[t["col"]].strip().lower() == "code"
        return False

    def handle_data(self, data: str) -> None:
        code = self._code()
        self.texts.append((data, code))
        if self.tables and self.tables[-1]["head"] and any(t == "th" for t, _ in self.stack):
            self.tables[-1]["headers"][-1] += data
        if self._inside("banner"):
            self.banners[-1] += data
        if self._inside("headline"):
            self.headline.append(data)
            if self._inside("headline-verdict"):
                self.verdict += data
        if any(t in ("td", "th") for t, _ in self.stack):
            if getattr(self, "_joined", False) and self.cells:  # the rest of a token split by <wbr>
                self.cells[-1] = (self.cells[-1][0] + data.strip(), self.cells[-1][1])
            else:
                self.cells.append((data.strip(), code))
                t = self.tables[-1] if self.tables else None
                if t and not t["head"] and any(tag == "td" for tag, _ in self.stack) and 0 <= t["col"] < len(t["headers"]):
                    self.columns.append((t["headers"][t["col"]], data.strip(), code))
        self._joined = False


def page(run_dir: Path) -> Page:
    p = Page()
    p.feed((run_dir / "report.html").read_text("utf-8"))
    return p


def _strings(obj: Any):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)
    elif isinstance(obj, str):
        yield obj


def _has_true(obj: Any, key: str) -> bool:
    if isinstance(obj, dict):
        return any((k == key and v is True) or _has_true(v, key) for k, v in obj.items())
    if isinstance(obj, list):
        return any(_has_true(v, key) for v in obj)
    return False


def _read(run_dir: Path, name: str) -> dict[str, Any]:
    path = run_dir / name
    return json.loads(path.read_text("utf-8")) if path.is_file() else {}


def inputs(name: str, runs: dict[str, Path]) -> list[Path]:
    """The run directories a report reads besides its own: a demo's parts, a compare's or a
    leaderboard's runs (as their metrics.json names them)."""
    d = runs[name]
    metrics = _read(d, "metrics.json")
    if name == "demo":
        return [d / p for p in metrics["parts"]]
    if name == "compare":
        return [Path(metrics[k]["path"]) for k in ("base", "candidate")]
    if name == "leaderboard":
        return [Path(r["path"]) for r in metrics["runs"] if r["included"]]
    return []


def banners_due(name: str, runs: dict[str, Path]) -> set[str]:
    """Banner kinds due, from the manifests (and flagged systems in the metrics) of the run and
    of the runs it reads: the embedded model named anywhere, data marked illustrative or
    synthetic anywhere, a system flagged over its failure limit."""
    due = set()
    for d in [runs[name], *inputs(name, runs)]:
        manifest, metrics = _read(d, "manifest.json"), _read(d, "metrics.json")
        if any(s == EMBEDDED or s.startswith(EMBEDDED + "@") for s in _strings(manifest)):
            due.add("embedded")
        if _has_true(manifest, "illustrative") or _has_true(manifest, "synthetic"):
            due.add("illustrative")
        if d != runs[name] and any(isinstance(e, dict) and e.get("flagged") is True
                                   for block in metrics.values() if isinstance(block, dict)
                                   for e in block.values()):
            due.add("flagged")
    return due


# -- system names, from the manifest by the rule docs/architecture.md states ------------------------


def _opts(options: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(options.items()))


def risk_names(run_dir: Path) -> tuple[set[str], set[str]]:
    """(names a risk report may show, bare method names it must not show): METHOD[:options]
    inside its own run, METHOD[:options]@MODEL across runs."""
    manifest = _read(run_dir, "manifest.json")
    shown, full, bare = set(), set(), set()
    for m in manifest["methods"]:
        short = m["method"] + (":" + _opts(m["options"]) if m["options"] else "")
        shown.add(short)
        full.add(short + (f"@{m['model']}" if m.get("model") else ""))
        if m["options"]:
            bare.add(m["method"])
    return shown | full, bare


def system_names(run_dir: Path) -> set[str]:
    """The systems a run evaluated, as its manifest lists them."""
    manifest = _read(run_dir, "manifest.json")
    suite, cfg = manifest["suite"], manifest.get("config") or {}
    if suite == "risk":
        return risk_names(run_dir)[0]
    key = {"support": "responders", "plural": "systems", "converse": "chatbots"}[suite]
    return set(cfg[key])


# -- the checks -----------------------------------------------------------------------------------

NAMES = ("demo", "risk", "support", "plural", "converse", "compare", "leaderboard")


@pytest.mark.parametrize("name", NAMES)
def test_headline_box_comes_first(reports, name):
    p = page(reports[name])
    assert "headline" in p.order, f"{name}: no headline box"
    assert p.order.index("headline") < (p.order.index("section") if "section" in p.order else len(p.order))
    assert p.order.count("headline") == 1
    assert all(k == "banner" for k in p.order[:p.order.index("headline")]), "only banners precede the headline"
    assert p.verdict.strip(), f"{name}: the headline box names no system or decision"
    md = (reports[name] / "report.md").read_text("utf-8")
    assert md.index("> [!IMPORTANT]\n> **Headline: ") < md.index("**Contents**")


@pytest.mark.parametrize("name", NAMES)
def test_banners_where_due(reports, name):
    due = banners_due(name, reports)
    assert due, f"{name}: the demo's data is illustrative, so every report here has a banner due"
    p = page(reports[name])
    for kind in due:
        assert any(BANNER_WORDS[kind] in b for b in p.banners), f"{name}: no {kind} banner"
    assert p.order[:len(p.banners)] == ["banner"] * len(p.banners), "banners come first"


def _headline_numbers(p: Page) -> str:
    return " ".join(p.headline)


@pytest.mark.parametrize("name", ("risk", "support", "plural", "converse"))
def test_headline_names_a_full_system_with_interval_and_n(reports, name):
    p = page(reports[name])
    who = p.verdict.split(": ", 1)[1]
    assert who in system_names(reports[name]), f"{name}: {who!r} is not a system of the run"
    text = _headline_numbers(p)
    assert re.search(r"\(n = \d+ \w+", text), f"{name}: no n in the headline"
    if name != "plural":  # plural's mean over profiles lists each profile's interval instead
        assert re.search(r"\d \[-?\d[\d.]*, -?\d[\d.]*\]", text), f"{name}: no interval in the headline"


def test_risk_headline_is_the_best_unflagged_method(reports):
    """The headline's method is the one with the highest macro-F1 in metrics.json."""
    metrics = _read(reports["risk"], "metrics.json")
    manifest = _read(reports["risk"], "manifest.json")
    entries = {m["name"]: m for m in manifest["methods"]}
    best = max((k for k, m in metrics["methods"].items() if not m["flagged"]),
               key=lambda k: metrics["methods"][k]["macro_f1"]["value"])
    e = entries[best]
    expected = e["method"] + (":" + _opts(e["options"]) if e["options"] else "")
    assert page(reports["risk"]).verdict.strip() == f"Best method: {expected}"
    value = metrics["methods"][best]["macro_f1"]["value"]
    assert f"{value:.3f}" in _headline_numbers(page(reports["risk"]))


def test_small_n_and_collapsed_interval_are_caveats(reports):
    """The demo's support part scores one task: its interval is a point and its n is small."""
    metrics = _read(reports["support"], "metrics.json")
    (entry,) = metrics["models"].values()
    assert entry["n_tasks"] < 30 and entry["ci"][0] == entry["ci"][1]
    text = _headline_numbers(page(reports["support"]))
    assert "small n" in text and "collapsed to a point" in text


def test_no_system_name_is_short_of_its_identity(reports):
    """No table cell of a risk report, the compare or the leaderboard shows a bare method name
    whose method has options (``llm`` for ``llm:decoding=json``); the leaderboard's systems
    and the compare's pairs are full identities of their input runs."""
    for name in ("risk", "compare", "leaderboard"):
        bare = set().union(*(risk_names(d)[1] for d in [reports["risk"], *inputs("compare", reports)]))
        cells = {t for t, _ in page(reports[name]).cells}
        assert not cells & bare, f"{name}: bare method name(s) {cells & bare}"
    lb = _read(reports["leaderboard"], "metrics.json")
    known = set().union(*(risk_names(d)[0] for d in inputs("leaderboard", reports)))
    shown = {r["system"] for b in lb["boards"] for r in b["rows"]}
    assert shown and shown <= known, shown - known
    cells = {t for t, _ in page(reports["leaderboard"]).cells}
    assert shown <= cells
    assert page(reports["leaderboard"]).verdict.split(": ", 1)[1] in known


def _key_names(keys, names=None) -> dict[str, set[str]]:
    """Stored keys a reader should not see bare: every snake_case key, and a one-word key that
    is its name squashed or lower-cased (``deescalation`` for "De-escalation", ``qwk`` for
    "QWK"; a plain word such as ``recognition`` or ``ok`` is not checked). Each maps to the
    names that may stand beside it: the package's label for it, if it has one, and the key
    in words."""
    names = names or {}
    out = {}
    for k in keys:
        name = names.get(k)
        squashed = re.sub(r"[^a-z]", "", name.lower()) if name else ""
        coded = "_" in k or (re.search(r"\d", k) and re.search(r"[A-Za-z]", k))  # self_worth, O18
        if coded or (name and k != name and (squashed == k or name.isupper() and name.lower() == k)):
            out[k] = {k.replace("_", " "), k.replace("_", "-")} | ({name} if name else set())
    return out


def _codes() -> dict[str, set[str]]:
    """Raw codes a reader should see only in a code column or beside their name, read from
    the package's own tables so a new key is checked as soon as it exists: the taxonomy's
    category codes (its package data file, read here with yaml), the rubric's severity bands
    (Red, Yellow; their ratings as VERA-MH names them), the support criterion dimensions,
    subcategories and task metadata (keys such as ``age_band`` and values such as ``O18``),
    the risk clinical-profile dimensions, the metric keys of
    ``stats.metrics``, the call and answer failure kinds, and the crisis-resource verdicts
    and matches. Code -> the names that may stand beside it."""
    import typing

    import yaml

    import carebench
    from carebench import judging, types, wording
    from carebench.criteria import DIMENSION_LABELS, DIMENSIONS
    from carebench.resources.check import MATCHES, VERDICTS
    from carebench.risk.compare import LABELS as METRIC_LABELS
    from carebench.risk.methods.schema import DIMENSIONS as PROFILE_DIMENSIONS
    from carebench.stats.metrics import CM_METRICS
    from carebench.support.tasks import AGE_BAND_NAMES, KNOWN_SUBCATEGORIES, TaskMeta

    tax = yaml.safe_load((Path(carebench.__file__).parent / "data" / "taxonomy.yaml").read_text("utf-8"))
    codes = {e["code"]: {e["name"]} for entries in tax["fields"].values() for e in entries}
    codes.update({"Red": {"High Potential for Harm"}, "Yellow": {"Suboptimal"}})
    failures = {*typing.get_args(types.Status), *typing.get_args(judging.AnswerStatus), *wording.CODE_NAMES}
    task_values = {v for f in TaskMeta.model_fields.values() for v in typing.get_args(f.annotation)}
    for keys, names in ((DIMENSIONS, DIMENSION_LABELS), (KNOWN_SUBCATEGORIES, None), (PROFILE_DIMENSIONS, None),
                        (TaskMeta.model_fields, None), (task_values, AGE_BAND_NAMES),
                        (CM_METRICS, METRIC_LABELS), (failures, wording.CODE_NAMES),
                        ((*VERDICTS, *MATCHES), wording.CODE_NAMES)):
        codes.update(_key_names(keys, names))
    return codes


#: a run's repeat shown as its stored index ("repeat 0"), not as "repeat 1 of 3"
BARE_REPEAT = re.compile(r"\brepeat \d+\b(?! of \d)")
#: a rubric question shown by its number alone, in a column headed "question"
BARE_QUESTION = re.compile(r"(?:Q|q)?\d+[a-z]?")


def raw_codes(p: Page) -> list[tuple[str, str]]:
    """(code, text) for every raw code a reader sees outside a code column without its name."""
    codes = _codes()
    bare = []
    for text, code in p.texts:
        if code:
            continue
        for word in re.findall(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*", text):
            if word not in codes:
                continue
            rest = re.sub(rf"\b{word}\b", "", text).lower()  # the code itself is not its name ("qwk", "QWK")
            if not any(n.lower() in rest for n in codes[word]):
                bare.append((word, text.strip()[:80]))
        bare += [(m, text.strip()[:80]) for m in BARE_REPEAT.findall(text)]
    bare += [(f"question {text}", text) for header, text, code in p.columns
             if not code and header.strip().lower() == "question" and BARE_QUESTION.fullmatch(text)]
    return bare


@pytest.mark.parametrize("name", NAMES)
def test_no_raw_code_outside_a_code_column(reports, name):
    """A raw code (see :func:`_codes`) in prose, a headline or a table cell that is not a
    code column must have its name beside it in the same text; no repeat is shown as its
    stored index and no rubric question as its number alone."""
    codes = _codes()
    assert {"RESPONSE_1", "INTENT_0", "Red", "self_worth", "empty_response", "macro_f1", "qwk",
            "deescalation", "wrong_region", "ideation_presence", "O18", "age_band", "post_action"} <= set(codes)
    assert not {"recognition", "accuracy", "local", "ok"} & set(codes), "plain words are not codes"
    bare = raw_codes(page(reports[name]))
    assert not bare, f"{name}: raw code(s) outside a code column: {bare[:5]}"


CAUGHT = {"a band": "<p>worst band: Red</p>",
          "a metric key": "<p>best on macro_f1</p>",
          "a failure kind": "<table><thead><tr><th>system</th><th>status</th></tr></thead>"
                            "<tbody><tr><td>x</td><td>empty_response</td></tr></tbody></table>",
          "a subcategory": "<p>ill-selfworth-04 (self_worth, multi-turn)</p>",
          "a repeat index": "<p>Sam (low) · repeat 0 · 4 user turns</p>",
          "a question number": "<table><thead><tr><th>question</th><th>answer</th></tr></thead>"
                               "<tbody><tr><td>3</td><td>Yes</td></tr></tbody></table>"}
PASSES = {"a name with its code": "<p>empty reply (empty_response)</p>",
          "a code column": "<table><thead><tr><th>name</th><th>code</th></tr></thead>"
                           "<tbody><tr><td>Self worth</td><td>self_worth</td></tr></tbody></table>",
          "a repeat of its repeats": "<p>Sam (low) · repeat 1 of 2</p>",
          "a question with its text": "<table><thead><tr><th>question</th></tr></thead>"
                                      "<tbody><tr><td>3: Does the reply name a crisis line?</td></tr></tbody></table>"}


@pytest.mark.parametrize("what", [*CAUGHT, *PASSES])
def test_the_code_check_can_fail(reports, tmp_path, what):
    """A raw code put into a report is caught; the same code beside its name, or in a code
    column, is not."""
    copy = tmp_path / "converse"
    shutil.copytree(reports["converse"], copy, ignore=shutil.ignore_patterns("figures"))
    html = (copy / "report.html").read_text("utf-8")
    (copy / "report.html").write_text(html.replace("</main>", {**CAUGHT, **PASSES}[what] + "</main>", 1), "utf-8")
    if what in CAUGHT:
        with pytest.raises(AssertionError, match="raw code"):
            test_no_raw_code_outside_a_code_column({"converse": copy}, "converse")
    else:
        test_no_raw_code_outside_a_code_column({"converse": copy}, "converse")


def test_a_report_without_its_headline_fails_the_check(reports, tmp_path):
    """The check can fail: a copy of the risk report with its headline box removed is caught."""
    copy = tmp_path / "risk"
    shutil.copytree(reports["risk"], copy)
    html = (copy / "report.html").read_text("utf-8")
    stripped = re.sub(r'<div class="headline".*?\n</div>', "", html, count=1, flags=re.DOTALL)
    assert stripped != html
    (copy / "report.html").write_text(stripped, "utf-8")
    with pytest.raises(AssertionError, match="no headline box"):
        test_headline_box_comes_first({"risk": copy}, "risk")


def test_a_missing_banner_fails_the_check(reports, tmp_path):
    """The check can fail: the demo index without its banners, while its parts' data is
    illustrative, is caught."""
    copy = tmp_path / "demo"
    shutil.copytree(reports["demo"], copy, ignore=shutil.ignore_patterns("figures", "*.sqlite"))
    html = (copy / "report.html").read_text("utf-8")
    stripped = re.sub(r'\n<div class="banner".*?</div>', "", html)
    assert stripped != html
    (copy / "report.html").write_text(stripped, "utf-8")
    with pytest.raises(AssertionError, match="banner"):
        test_banners_where_due({"demo": copy}, "demo")


def test_compare_and_leaderboard_headlines_state_the_decision_and_the_top_row(reports):
    """The compare's box states the gate decision metrics.json records and the first gated
    difference; the leaderboard's, the best value of its first board."""
    cm = _read(reports["compare"], "metrics.json")
    verdict = page(reports["compare"]).verdict
    assert verdict.startswith("Gate failed" if cm["gate"]["failed"] else "Gate passed")
    row = next(r for p in cm["pairs"] for r in p["rows"] if r["gated"] and r["diff"] is not None)
    assert f"{row['diff']:.4f} [" in _headline_numbers(page(reports["compare"]))
    lb = _read(reports["leaderboard"], "metrics.json")
    board = next(b for b in lb["boards"] if b["rows"])
    top = max(board["rows"], key=lambda r: r["value"] if board.get("higher_is_better", True) else -r["value"])
    text = _headline_numbers(page(reports["leaderboard"]))
    assert f"{top['value']:.4f} [" in text and f"(n = {board['n_common_units']} " in text
