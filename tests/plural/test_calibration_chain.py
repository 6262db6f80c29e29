"""calibrate -> freeze -> label -> agreement on the built-in data against the scripted stub.

Every figure checked here is recomputed independently from records.jsonl (scikit-learn
F1, hand-coded AC1, counts from the prompt file), never read back from the code under test.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from labelling_stub import Labeller
from sklearn.metrics import f1_score

from carebench.cli import main
from carebench.datasets.prompts import load_annotations, load_policies, load_prompts
from carebench.plural.data import builtin_path
from stub_server import StubServer

PROMPTS = load_prompts(builtin_path("prompts.jsonl"))
ANNOTATIONS = load_annotations(builtin_path("annotations.jsonl"))
CAL_IDS = sorted({a.case_id for a in ANNOTATIONS})
BY_ID = {p.id: p for p in PROMPTS}
# scripted failures: one calibration case answered with garbage, one with a severity missing
GARBAGE = BY_ID[CAL_IDS[3]].text
NO_SEVERITY = BY_ID[CAL_IDS[8]].text
NONCAL = [p for p in PROMPTS if p.source_id not in {BY_ID[c].source_id for c in CAL_IDS}]


def _labels(policy: dict) -> set[str]:
    out = set(policy["intent"]) | set(policy["function"]) | set(policy["response"])
    if policy.get("nssi_severity"):
        out.add(f"NSSI_SEVERITY_{policy['nssi_severity']}")
    if policy.get("suicidal_severity"):
        out.add(f"SUICIDAL_SEVERITY_{policy['suicidal_severity']}")
    return out


def _sk_macro_f1(rows: list[dict], space: list[str]) -> float:
    t = np.array([[lab in _labels(r["gold"]) for lab in space] for r in rows], int)
    p = np.array([[r["policy"] is not None and lab in _labels(r["policy"]) for lab in space] for r in rows], int)
    sup = np.flatnonzero(t.sum(axis=0) > 0)
    return f1_score(t, p, average="macro", labels=sup, zero_division=0)


def _ac1_binary(m: np.ndarray) -> float:
    """Gwet's AC1 for complete binary ratings (items x raters), written out by hand."""
    r = m.shape[1]
    ones = m.sum(axis=1)
    pa = np.mean((ones * (ones - 1) + (r - ones) * (r - ones - 1)) / (r * (r - 1)))
    pi = m.mean()
    pe = 2 * pi * (1 - pi)
    return (pa - pe) / (1 - pe)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    root = tmp_path_factory.mktemp("plural")
    labeller = Labeller(PROMPTS, ANNOTATIONS, garbage={GARBAGE, NONCAL[2].text},
                        no_severity={NO_SEVERITY, NONCAL[5].text})
    with StubServer() as stub:
        stub.handler = labeller
        spec = f"openai:labeller@{stub.base_url}"
        common = ["--cache", str(root / "cache.sqlite")]
        cal = root / "cal"
        assert main(["plural", "calibrate", "--model", spec, "--out", str(cal), "--bootstrap", "300",
                     *common]) == 0
        n_cal_requests = len(labeller.requests)
        frz = root / "freeze"
        assert main(["plural", "freeze", "--calibration", str(cal), "--out", str(frz), *common]) == 0
        lab = root / "label"
        assert main(["plural", "label", "--profiles", str(frz), "--out", str(lab), *common]) == 0
        agr = root / "agree"
        assert main(["plural", "agreement", "--release", str(lab / "release"), "--out", str(agr)]) == 0
        # labelling again: every call answered from the cache
        before = len(labeller.requests)
        assert main(["plural", "label", "--profiles", str(frz), "--out", str(root / "label2"), *common]) == 0
        resumed = len(labeller.requests) - before
    return {"cal": cal, "freeze": frz, "label": lab, "agree": agr, "root": root,
            "n_cal_requests": n_cal_requests, "resumed": resumed}


def _records(d: Path) -> list[dict]:
    return [json.loads(line) for line in (d / "records.jsonl").read_text().splitlines()]


def test_calibration_scores_recomputed_from_records(chain):
    cal = chain["cal"]
    man = json.loads((cal / "manifest.json").read_text())
    metrics = json.loads((cal / "metrics.json").read_text())
    space = man["scoring"]["label_space"]
    preds = [r for r in _records(cal) if r["type"] == "prediction"]
    rated = sum(1 for a in ANNOTATIONS if not a.skipped)
    for m in ("E0", "E1", "E2", "E3", "E4", "E5"):
        rows = [r for r in preds if r["method"] == m]
        assert len(rows) == rated  # every rated case predicted exactly once, nothing dropped
        for arch in ("peer", "clinician"):
            pracs = sorted({a.practitioner for a in ANNOTATIONS if a.archetype == arch})
            want = np.mean([_sk_macro_f1([r for r in rows if r["practitioner"] == p], space) for p in pracs])
            assert metrics["methods"][m]["archetypes"][arch]["macro_f1"] == pytest.approx(want, abs=1e-12)
    # the scripted garbage and missing-severity answers are failures, scored and counted
    e1 = [r for r in preds if r["method"] == "E1"]
    failed = [r for r in e1 if r["policy"] is None]
    assert {r["case_id"] for r in failed} == {CAL_IDS[3], CAL_IDS[8]}
    assert any(r["error"].startswith("invalid combination") for r in failed)
    assert sum(metrics["methods"]["E1"]["archetypes"][a]["failed"] for a in ("peer", "clinician")) == len(failed)
    # the oracle-backed memory method beats the floor clearly; the selection is a qualifying method
    for arch in ("peer", "clinician"):
        comp = metrics["comparisons"][arch]["E4"]
        assert comp["diff"] >= 0.03 and comp["p_improve"] >= 0.8
        s = metrics["selection"][arch]
        assert s["method"] in s["qualifying"] and s["warning"] is None
        best = max(metrics["comparisons"][arch][m]["score"] for m in s["qualifying"])
        assert metrics["comparisons"][arch][s["method"]]["score"] == best
    html = (cal / "report.html").read_text()
    assert "Table 5" in html and "illustrative" in html.lower()
    # the page opens with the selection, per archetype, as metrics.json records it
    head = html[html.index('<div class="headline"'):html.index("<main>")]
    for arch, name in (("peer", "Peer support"), ("clinician", "Clinician")):  # archetypes by name
        assert f"{name}: {metrics['selection'][arch]['method']}" in head
    md = (cal / "report.md").read_text().splitlines()
    start = next(i for i, line in enumerate(md) if line.startswith("**Table 5"))
    rows = {line.split("|")[1].strip(): line for line in md[start + 4:start + 10]}
    peer_selected = metrics["selection"]["peer"]["method"]
    assert rows[peer_selected].split("|")[2].strip().startswith("**")  # the selected method in bold
    assert not rows["E0"].split("|")[2].strip().startswith("**")


def test_rescore_reproduces_metrics_byte_for_byte(chain):
    for d in ("cal", "freeze", "label", "agree"):
        before = (chain[d] / "metrics.json").read_bytes()
        assert main(["report", str(chain[d])]) == 0
        assert (chain[d] / "metrics.json").read_bytes() == before


def test_cached_rerun_makes_no_call(chain):
    assert chain["n_cal_requests"] > 0
    assert chain["resumed"] == 0


def test_freeze_aliases_and_hashes(chain):
    frz = chain["freeze"]
    sel = json.loads((chain["cal"] / "metrics.json").read_text())["selection"]
    profiles = {p.stem: json.loads(p.read_text()) for p in sorted((frz / "profiles").glob("*.json"))}
    assert sorted(profiles) == ["C1", "C2", "C3", "P1", "P2", "P3"]
    for alias, prof in profiles.items():
        arch = "peer" if alias.startswith("P") else "clinician"
        assert prof["method"] == sel[arch]["method"]
        rated = {a.case_id for a in ANNOTATIONS if a.practitioner == prof["practitioner"] and not a.skipped}
        assert set(prof["fit_cases"]) == rated  # refit on every case the practitioner labelled
    assert [profiles[a]["practitioner"] for a in ("P1", "P2", "P3")] == ["prac-a", "prac-b", "prac-c"]


def test_label_leakage_drops_and_release(chain):
    lab = chain["label"]
    metrics = json.loads((lab / "metrics.json").read_text())
    sources = {BY_ID[c].source_id for c in CAL_IDS}
    siblings = [p for p in PROMPTS if p.source_id in sources and p.id not in CAL_IDS]
    assert metrics["excluded_for_leakage"]["arithmetic"] == f"{len(CAL_IDS)} + {len(siblings)} = {len(CAL_IDS) + len(siblings)}"
    assert metrics["excluded_for_leakage"]["arithmetic"] == "30 + 18 = 48"
    assert metrics["labelled"] == len(PROMPTS) - 48
    assert metrics["dropped"] == {"total": 2, "failed interpretation": 1, "missing severity": 1}
    rel = lab / "release"
    prompts = load_prompts(rel / "prompts.jsonl")
    policies = load_policies(rel / "policies.jsonl")
    released = {p.id for p in prompts}
    assert len(released) == len(PROMPTS) - 48 - 2 == metrics["released"]
    assert NONCAL[2].id not in released and NONCAL[5].id not in released
    assert not released & set(CAL_IDS) and not any(p.source_id in sources for p in prompts)
    assert len(policies) == 6 * len(released)
    meta = json.loads((rel / "metadata.json").read_text())
    assert meta["illustrative"] is True and [p["alias"] for p in meta["profiles"]] == ["C1", "C2", "C3", "P1", "P2", "P3"]
    # withheld material stays in private/, not in the released files
    ident = json.loads((rel / "private" / "identity.json").read_text())
    assert ident["P1"] == "prac-a"
    public = "".join((rel / f).read_text() for f in ("prompts.jsonl", "policies.jsonl", "metadata.json"))
    assert "prac-" not in public and "rationale" not in public


def test_agreement_ac1_and_prevalence_recomputed(chain):
    agr = chain["agree"]
    metrics = json.loads((agr / "metrics.json").read_text())
    policies = load_policies(chain["label"] / "release" / "policies.jsonl")
    ids = sorted({p.prompt_id for p in policies})
    peer = {(p.profile, p.prompt_id): p for p in policies if p.archetype == "peer"}
    m = np.array([[int("RESPONSE_2" in peer[(a, i)].response) for a in ("P1", "P2", "P3")] for i in ids])
    assert metrics["ac1"]["profiles/peer"]["RESPONSE_2"] == pytest.approx(_ac1_binary(m), abs=1e-12)
    p1 = [peer[("P1", i)] for i in ids]
    assert metrics["prevalence"]["P1"]["labels"]["INTENT_1"] == pytest.approx(
        100 * np.mean(["INTENT_1" in p.intent for p in p1]))
    assert metrics["prevalence"]["P1"]["mean_policy_size"] == pytest.approx(np.mean([len(p.response) for p in p1]))
    # practitioners on the calibration cases (the built-in skipped case is a clinician's, so the
    # peers' ratings are complete and the hand formula applies)
    clin = sorted({a.practitioner for a in ANNOTATIONS if a.archetype == "peer"})
    got = {(a.practitioner, a.case_id): a for a in ANNOTATIONS}
    cases = [c for c in CAL_IDS if all(not got[(p, c)].skipped for p in clin)]
    assert len(cases) == len(CAL_IDS)
    mc = np.array([[int("RESPONSE_1" in got[(p, c)].response) for p in clin] for c in cases])
    assert metrics["ac1"]["practitioners/peer"]["RESPONSE_1"] == pytest.approx(_ac1_binary(mc), abs=1e-12)
    sets = [[set(got[(p, c)].intent) | set(got[(p, c)].function) | set(got[(p, c)].response)
             | ({f"NSSI_SEVERITY_{got[(p, c)].nssi_severity}"} if got[(p, c)].nssi_severity else set())
             | ({f"SUICIDAL_SEVERITY_{got[(p, c)].suicidal_severity}"} if got[(p, c)].suicidal_severity else set())
             for p in clin] for c in cases]
    jac = np.mean([np.mean([len(a & b) / len(a | b) for a, b in combinations(s, 2)]) for s in sets])
    assert metrics["jaccard"]["practitioners/peer"] == pytest.approx(jac, abs=1e-12)


def test_evaluation_continues_the_chain(chain):
    """label's release -> sample -> run -> rescore through the CLI (evaluation side, VEILED-SH §5.3).

    Judges name every policy category; judge-a finds every third prompt (by id number)
    inappropriate, the others every fourth, so a cell's full rate must equal the mean over
    judges of the share of sampled prompts they accept, recomputed here from sample.jsonl.
    """
    from jury_stub import Scripted

    rel = chain["label"] / "release"
    root = chain["root"]
    def every(judge):
        return 3 if judge == "judge-a" else 4

    def rule(judge, system, pid, wanted):
        return int(pid.rsplit("-", 1)[1]) % every(judge) != 0, wanted

    script = Scripted(rule=rule)
    script.texts = {p.text: p.id for p in reversed(load_prompts(rel / "prompts.jsonl"))}
    with StubServer() as stub:
        stub.handler = script
        u = stub.base_url
        smp = root / "sample"
        assert main(["plural", "sample", "--release", str(rel), "--size", "12", "--out", str(smp)]) == 0
        run = root / "run"
        judges = [x for j in ("judge-a", "judge-b", "judge-c") for x in ("--judge", f"openai:{j}@{u}")]
        assert main(["plural", "run", "--release", str(rel), "--sample", str(smp), "--system", f"openai:sys-a@{u}",
                     *judges, "--out", str(run), "--bootstrap", "200", "--cache", str(root / "cache.sqlite")]) == 0
        n_requests = len(stub.requests)
        before = (run / "metrics.json").read_bytes()
        assert main(["plural", "rescore", str(run)]) == 0
        assert main(["report", str(run)]) == 0
        assert (run / "metrics.json").read_bytes() == before and len(stub.requests) == n_requests
    sampled = [json.loads(x)["prompt_id"] for x in (smp / "sample.jsonl").read_text().splitlines()]
    assert len(sampled) == 12
    assert len(script.system_requests) == 2 * 12  # one system x two archetype instructions
    # the stub's systems name a prompt by its text (first id with that text)
    text_of = {p.id: p.text for p in load_prompts(rel / "prompts.jsonl")}
    tagged = [script.texts[text_of[i]] for i in sampled]
    ok = {j: np.mean([int(i.rsplit("-", 1)[1]) % every(j) != 0 for i in tagged]) for j in ("judge-a", "judge-b")}
    assert 0 < ok["judge-a"] < ok["judge-b"] < 1  # the sample makes the judges disagree
    metrics = json.loads(before)
    assert len(metrics["cells"]) == 6
    for cell in metrics["cells"]:
        assert cell["full"]["value"] == pytest.approx((ok["judge-a"] + 2 * ok["judge-b"]) / 3, abs=1e-9)  # 10 decimals
        assert cell["partial"]["value"] == 0 and cell["coverage"]["value"] == pytest.approx(1.0)


#: a taxonomy code as the reports would print it (Markdown escapes the underscore)
RAW_CODE = re.compile(r"\b(?:RESPONSE|INTENT|FUNCTION|NSSI_SEVERITY|SUICIDAL_SEVERITY|NSSI|SUICIDAL)\\?_\w+")


class _VisibleText(HTMLParser):
    """The text a reader sees in a report page, without the cells of table columns headed
    "code" (the allowed secondary label) and without style and script elements."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip_depth = 0
        self.header: list[str] = []
        self.col = -1
        self.in_cell = False
        self.cell_is_code = False
        self.head_text = ""

    def handle_starttag(self, tag, attrs):
        if tag in ("style", "script"):
            self.skip_depth += 1
        elif tag == "table":
            self.header, self.col = [], -1
        elif tag == "tr":
            self.col = -1
        elif tag in ("th", "td"):
            self.col += 1
            self.in_cell, self.head_text = True, ""
            self.cell_is_code = tag == "td" and self.col < len(self.header) and self.header[self.col] == "code"

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self.skip_depth -= 1
        elif tag == "th" and self.in_cell:
            self.header.append(self.head_text.strip())
        if tag in ("th", "td"):
            self.in_cell = self.cell_is_code = False

    def handle_data(self, data):
        if self.in_cell:
            self.head_text += data
        if not self.skip_depth and not self.cell_is_code:
            self.parts.append(data)


def _markdown_visible(text: str) -> str:
    """Markdown without the cells of table columns headed "code"."""
    out, drop = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = line.strip().strip("|").split(" | ")
            if drop is None:
                drop = [i for i, c in enumerate(cells) if c.strip() == "code"]
            line = " | ".join(c for i, c in enumerate(cells) if i not in drop)
        else:
            drop = None
        out.append(line)
    return "\n".join(out)


def test_calibration_and_release_reports_show_names_not_codes(chain):
    """Where a person reads a taxonomy label (calibrate, freeze, label, agreement reports),
    the taxonomy's name is shown; the code only in a column headed "code"."""
    from carebench.taxonomy import load_taxonomy

    names = load_taxonomy().names()
    for d in ("cal", "freeze", "label", "agree"):
        md = (chain[d] / "report.md").read_text()
        page = _VisibleText()
        page.feed((chain[d] / "report.html").read_text())
        for where, text in (("report.md", _markdown_visible(md)), ("report.html", "".join(page.parts))):
            found = sorted(set(RAW_CODE.findall(text)))
            assert not found, f"{d}/{where}: raw codes a reader sees: {found[:5]}"
    # the agreement tables name every label, with its code beside it as the secondary label
    md = (chain["agree"] / "report.md").read_text()
    assert "| Clarify / Investigate | RESPONSE\\_1 |" in md and f"| {names['FUNCTION_U']} | FUNCTION\\_U |" in md
    assert "| NSSI severity 3 | NSSI\\_SEVERITY\\_3 |" in md
    # and re-rendering keeps the reports byte for byte
    for d in ("cal", "freeze", "label", "agree"):
        before = [(chain[d] / f).read_bytes() for f in ("report.md", "report.html")]
        assert main(["report", str(chain[d])]) == 0
        assert [(chain[d] / f).read_bytes() for f in ("report.md", "report.html")] == before


# -- the headline box of each run kind, its numbers recounted from the runs' files --------------


def _jaccard(sets: list[list[set[str]]]) -> float:
    """Mean over items of the mean pairwise Jaccard of the raters' label sets (by hand)."""
    return float(np.mean([np.mean([len(a & b) / len(a | b) for a, b in combinations(s, 2)]) for s in sets]))


def test_freeze_headline_names_each_archetypes_method_and_profiles(chain):
    from headline_box import headline_box

    box = headline_box(chain["freeze"])
    sel = json.loads((chain["cal"] / "metrics.json").read_text())
    profiles = {p.stem: json.loads(p.read_text()) for p in (chain["freeze"] / "profiles").glob("*.json")}
    assert box.verdict.startswith(f"Frozen {len(profiles)} profiles: ")
    for arch, title in (("peer", "Peer support"), ("clinician", "Clinician")):
        method = sel["selection"][arch]["method"]
        assert f"{title} by " in box.verdict and f"({method})" in box.verdict
        mine = sorted(a for a, p in profiles.items() if p["archetype"] == arch)
        row = box.rows[title]
        assert row.startswith(f"{len(mine)} profiles ({', '.join(mine)})")
        counts = sorted(len({a.case_id for a in ANNOTATIONS if a.practitioner == profiles[a_]["practitioner"]
                             and not a.skipped}) for a_ in mine)
        shown = re.search(r"fitted on (\d+)(?: to (\d+))? calibration cases", row)
        assert (int(shown[1]), int(shown[2] or shown[1])) == (counts[0], counts[-1])
        f1 = sel["methods"][method]["archetypes"][arch]["macro_f1"]
        assert f"calibration macro-F1 {f1:.3f}" in row
        small = any(c.startswith(f"small n: {title} profiles fitted on {counts[0]} cases") for c in box.caveats)
        assert small == (counts[0] < 30)


def test_label_headline_counts_the_release(chain):
    from headline_box import headline_box

    box = headline_box(chain["label"])
    released = (chain["label"] / "release" / "prompts.jsonl").read_text().splitlines()
    assert box.verdict == f"Released {len(released)} of {len(PROMPTS)} prompts"
    assert box.rows["excluded for calibration leakage"] == "48 (30 + 18 = 48)"
    labelled = {r["prompt_id"] for r in _records(chain["label"])}
    assert box.rows["labelled by every profile"] == f"{len(labelled)} prompts by 6 profiles"
    assert box.rows["dropped"].startswith(f"{len(labelled) - len(released)} (")
    assert any("2 labelled prompts dropped" in c for c in box.caveats)


def test_agreement_headline_is_the_jaccard_of_each_population(chain):
    """The box states the mean pairwise Jaccard among the peer practitioners (annotation file)
    and among the peer profiles (the release's policies), recomputed here by hand."""
    from headline_box import headline_box

    box = headline_box(chain["agree"])
    policies = load_policies(chain["label"] / "release" / "policies.jsonl")
    ids = sorted({p.prompt_id for p in policies})
    peer = {(p.profile, p.prompt_id): p for p in policies if p.archetype == "peer"}
    prof = _jaccard([[_labels(peer[(a, i)].model_dump()) for a in ("P1", "P2", "P3")] for i in ids])
    pracs = sorted({a.practitioner for a in ANNOTATIONS if a.archetype == "peer"})
    got = {(a.practitioner, a.case_id): a for a in ANNOTATIONS}
    prac = _jaccard([[_labels(got[(p, c)].model_dump()) for p in pracs] for c in CAL_IDS])
    row = box.rows["Peer support"]
    m = re.fullmatch(r"practitioners (\d\.\d+) \((\d+) raters, (\d+) calibration cases\) -> "
                     r"profiles (\d\.\d+) \((\d+) raters, (\d+) released prompts\)", row)
    assert m, row
    assert float(m[1]) == pytest.approx(prac, abs=5e-4) and float(m[4]) == pytest.approx(prof, abs=5e-4)
    assert (int(m[2]), int(m[3]), int(m[5]), int(m[6])) == (len(pracs), len(CAL_IDS), 3, len(ids))
    move = {1: "higher", -1: "lower", 0: "equal"}[int(np.sign(round(prof, 3) - round(prac, 3)))]
    assert f"{move} for peer support" in box.verdict
    assert any("different prompts" in c for c in box.caveats)


def test_sample_headline_counts_what_was_sampled(chain, tmp_path):
    from headline_box import headline_box

    rel = chain["label"] / "release"
    out = tmp_path / "sample"
    assert main(["plural", "sample", "--release", str(rel), "--size", "12", "--seed", "7", "--out", str(out)]) == 0
    box = headline_box(out)
    release = load_prompts(rel / "prompts.jsonl")
    rows = _records(out)
    assert box.verdict == f"Sampled {len(rows)} of {len(release)} release prompts (seed 7)"
    assert box.rows["reserved for severity levels"] == f"{sum(r['reason'] != 'weighted' for r in rows)} prompts"
    picked = {r["prompt_id"] for r in rows}
    contexts = {p.context for p in release}
    in_sample = {p.context for p in release if p.id in picked}
    assert box.rows["contexts"] == f"{len(in_sample)} of {len(contexts)} in the sample"
    assert any(c.startswith(f"small n: {len(rows)} prompts") for c in box.caveats)
    from test_headlines import page, raw_codes

    assert not raw_codes(page(out)), raw_codes(page(out))


@pytest.mark.parametrize("kind", ["freeze", "label", "agree"])
def test_release_reports_show_no_stored_code(chain, kind):
    """The freeze, label and agreement reports pass the same names-not-codes check as the demo's."""
    from test_headlines import page, raw_codes

    assert not raw_codes(page(chain[kind])), raw_codes(page(chain[kind]))
