"""carebench's walk under the ``vera`` rules equals VERA-MH 2.0's judge, and under ``vera-1.2``
its 1.x judge, on every answer path: compared with an independent re-implementation written
from VERA-MH's code (``vera_reference``, whose docstring names the file and commit of each
rule). Also: the design record's STOP_* vocabulary walks exactly as END / ASSIGN_END /
NOT_RELEVANT>> do, on rubrics converted in the test.

The carebench-written rubrics here always run and exercise every case: an END at a gate, an
END after every dimension was walked, one END cell that is a gate on some paths and a
completion on others, ASSIGN_END with dimensions left to mark and with none, NOT_RELEVANT>>
with a later answer in the marked dimension, the question VERA-MH answers itself, default
Yes/No questions and every severity spelling. VERA-MH's own SI and HFO rubrics (../shared)
are walked exhaustively (SI: all 206,403 paths; HFO: at least 100,000 of its 980,416, every
END and ASSIGN_END case among them) when present; under CI their absence is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rubrics import HEADER, write_tsv
from vera_reference import NR, Judge, all_walks, parse, random_walks

from carebench.converse.rubric import load_rubric
from carebench.rubric_walk import WalkState

AUTO_Q = 'Select "Rate this dimension Not Relevant".'
#: D1: a gate END (q1 "out"), a jump over D2 and D3 into D4 (q1 "jump"), ASSIGN_END with every
#: other dimension unvisited (q2), a Yelow default question; D2: NOT_RELEVANT>> into the same
#: dimension (q4 "skip" -> q5 lifts the mark), a High default question; D3: the auto question
#: marking D3, then an answer in D3 (lifting the mark), a Medium question ending at a gate
#: ("stop": D4 unvisited); D4: q8 ends by END "done" (a gate after q1 "jump", a completion
#: otherwise) or ASSIGN_END on Yes (nothing left to mark); q9, the last row, runs off the end.
GATES = [
    ["1", "D1", "", "", "q1?", "", "in", "", ""],
    ["", "", "", "", "", "", "out", "END", ""],
    ["", "", "", "", "", "", "jump", "8", ""],
    ["2", "D1", "Red", "", "q2?", "", "Yes", "ASSIGN_END", ""],
    ["", "", "", "", "", "", "No", "", ""],
    ["3", "D1", "Yelow", "", "q3?", "", "", "", ""],
    ["4", "D2", "", "", "q4?", "", "skip", "NOT_RELEVANT>>5", ""],
    ["", "", "", "", "", "", "stay", "", ""],
    ["5", "D2", "High risk", "", "q5?", "", "", "", ""],
    ["6", "D3", "", "", AUTO_Q, "", "Rate this dimension Not Relevant", "NOT_RELEVANT>>7", ""],
    ["7", "D3", "Medium", "", "q7?", "", "Yes", "8", ""],
    ["", "", "", "", "", "", "No", "8", ""],
    ["", "", "", "", "", "", "stop", "END", ""],
    ["8", "D4", "Red", "", "q8?", "", "Yes", "ASSIGN_END", ""],
    ["", "", "", "", "", "", "No", "", ""],
    ["", "", "", "", "", "", "done", "END", ""],
    ["9", "D4", "yellow", "", "q9?", "", "", "", ""],
]
#: the same shapes with every END either always a gate (q1 "out", q7 "stop") or always a
#: completion (q9 "done"), as the design record's STOP_NOT_RELEVANT / STOP_SCORE split needs
SPLIT = [r for r in GATES if r[6] != "jump"]


def _shared(rel: str) -> Path | None:
    here = Path(__file__).resolve()
    for p in here.parents[3:5]:
        if (p / "shared/data" / rel).is_file():
            return p / "shared/data" / rel
    return None


def _need(path: Path | None) -> Path:
    """The shared file, or a skip outside CI (a failure in CI, where ../shared is present)."""
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("VERA-MH's rubrics are missing from ../shared/data in CI")
        pytest.skip("shared VERA-MH v1.2 rubrics not present")
    return path


def _carebench(rubric, path: list[tuple[str, str]]) -> WalkState:
    """carebench's walk given the answers of a reference walk (its own auto answers skipped)."""
    s = WalkState(rubric)
    for qid, ans in path:
        if rubric[qid].auto_answer:  # carebench answers it itself, as VERA-MH does
            continue
        q = s.pending()
        assert q is not None and q.id == qid, (path, q)
        s.give(ans)
    return s


def _compare(tsv: Path, rules: str, version: str, every: int = 1, min_walks: int = 0) -> dict[str, int]:
    ref = parse(tsv.read_text(encoding="utf-8"))
    rubric = load_rubric(tsv, rules=rules)
    dims = rubric.dimensions
    assert dims == ref.dimensions
    seen_ends: set[tuple] = set()
    n = checked = all_nr = 0
    for k, j in enumerate(all_walks(ref, version)):
        n += 1
        visited_all = all(d in j.answers for d in dims)
        end_case = (j.end, visited_all)
        if k % every and end_case in seen_ends and (j.end is None or visited_all):
            continue
        seen_ends.add(end_case)
        exp = j.ratings()
        exp = {d: exp.get(d, NR) for d in dims}  # VERA-MH leaves an unreached dimension blank
        nr = all(v == NR for v in exp.values())
        all_nr += nr
        checked += 1
        s = _carebench(rubric, j.path)
        assert [(st.question_id, st.answer) for st in s.steps] == j.path
        assert s.done and s.ratings() == exp, j.path
    assert checked >= min_walks
    return {"walks": n, "checked": checked, "all_nr": all_nr, "end_cases": len(seen_ends)}


# -- always: carebench-written rubrics ----------------------------------------------------------

@pytest.mark.parametrize(("rules", "version"), [("vera", "2.0"), ("vera-1.2", "1.2")])
def test_every_path_of_a_rubric_with_every_terminal_case(tmp_path, rules, version):
    got = _compare(write_tsv(tmp_path / "gates.tsv", GATES), rules, version)
    assert got["walks"] == got["checked"] > 50
    # hand-worked: q1 "out" (END at a gate) is all Not Relevant under both; so is q2 Yes under
    # neither (ASSIGN_END marks D2-D4). Under 2.0 a walk ending at q8 "done" keeps its ratings
    # unless it came by q1 "jump" (D2, D3 unvisited: a gate); under 1.2 every END discards.
    ref = parse((tmp_path / "gates.tsv").read_text())
    rubric = load_rubric(tmp_path / "gates.tsv", rules=rules)
    walked = {tuple(a for _, a in j.path): j.ratings() for j in all_walks(ref, version)}
    assert walked[("out",)] == {d: NR for d in ("D1", "D2", "D3", "D4")}
    assert walked[("in", "Yes")] == {"D1": "High Potential for Harm", "D2": NR, "D3": NR, "D4": NR}
    done = walked[("in", "No", "No", "stay", "No", "Rate this dimension Not Relevant", "No", "done")]
    assert done == ({d: NR for d in ("D1", "D2", "D3", "D4")} if version == "1.2" else
                    {"D1": "Best Practice", "D2": "Best Practice", "D3": "Best Practice", "D4": "Best Practice"})
    assert walked[("jump", "done")] == {d: NR for d in ("D1", "D2", "D3", "D4")}
    assert _carebench(rubric, [("1", "jump"), ("8", "done")]).ratings() == walked[("jump", "done")]


def test_answer_matching_is_vera_mhs(tmp_path):
    """VERA-MH reads 'yes', 'YES', 'Yes, clearly' as Yes and an unknown answer as the first
    option; carebench's walk under the vera rules reads them the same (every path, raw answers)."""
    from carebench.converse.judging import match_answer

    cases = {"yes": "Yes", "YES": "Yes", "Yes, clearly": "Yes", "  no ": "No", "maybe": "Yes",
             "STAY": "stay", "I would skip it": "skip", "": "in"}
    from vera_reference import match

    for raw, want in cases.items():
        options = ["in", "out", "jump"] if want == "in" else ["skip", "stay"] if want in ("stay", "skip") \
            else ["Yes", "No"]
        assert match(raw, options) == want
        assert match_answer(raw, tuple(options))[0] == want


def _convert(rows: list[list[str]]) -> list[list[str]]:
    """A hand conversion into the design record's vocabulary, as its "Decision" table maps the
    tokens: an END in a question of any dimension but the last is a screening gate
    (STOP_NOT_RELEVANT), an END in the last dimension completes the questionnaire (STOP_SCORE),
    ASSIGN_END is STOP_ASSIGN, NOT_RELEVANT>>ID is SKIP_DIMENSION>>ID; an implicit Yes/No last
    row gets both answers listed with STOP_SCORE (the record's rule 1: every terminating row
    names its stop)."""
    qi, di, ai, gi = (HEADER.index(c) for c in ("Question ID", "Dimension", "Answer", "GOTO"))
    last_dim = [r[di] for r in rows if r[di]][-1]
    out, dim = [], None
    for r in rows:
        r = list(r)
        dim = r[di] or dim if r[qi] else dim
        if r[gi] == "END":
            r[gi] = "STOP_SCORE" if dim == last_dim else "STOP_NOT_RELEVANT"
        elif r[gi] == "ASSIGN_END":
            r[gi] = "STOP_ASSIGN"
        elif r[gi].startswith("NOT_RELEVANT>>"):
            r[gi] = "SKIP_DIMENSION>>" + r[gi].split(">>", 1)[1]
        out.append(r)
    if out[-1][qi] and not out[-1][ai]:
        out[-1][ai], out[-1][gi] = "Yes", "STOP_SCORE"
        out.append([""] * ai + ["No", "STOP_SCORE"] + [""] * (len(HEADER) - ai - 2))
    return out


def _walks_alike(original: Path, converted: Path, walks) -> int:
    """carebench walks both rubrics alike on the given reference walks' answers."""
    a, b = load_rubric(original), load_rubric(converted)
    n = 0
    for j in walks(parse(original.read_text(encoding="utf-8"))):
        x, y = _carebench(a, j.path), _carebench(b, j.path)
        assert [s.question_id for s in x.steps] == [s.question_id for s in y.steps]
        assert x.ratings() == y.ratings() and x.triggers() == y.triggers(), j.path
        n += 1
    return n


def test_stop_vocabulary_walks_as_the_original(tmp_path):
    orig = write_tsv(tmp_path / "split.tsv", SPLIT)
    conv_rows = _convert(SPLIT)
    gotos = {r[HEADER.index("GOTO")] for r in conv_rows}
    assert {"STOP_NOT_RELEVANT", "STOP_SCORE", "STOP_ASSIGN", "SKIP_DIMENSION>>5"} <= gotos
    assert not gotos & {"END", "ASSIGN_END"}
    assert _walks_alike(orig, write_tsv(tmp_path / "stop.tsv", conv_rows), all_walks) > 50
    # GATES' q8 "done" is a gate after q1 "jump" and a completion otherwise: no one token says
    # both, so its conversion walks differently on one of them (the design record's rule 3)
    gates = write_tsv(tmp_path / "gates.tsv", GATES)
    with pytest.raises(AssertionError):
        _walks_alike(gates, write_tsv(tmp_path / "gates-stop.tsv", _convert(GATES)), all_walks)


# -- VERA-MH's SI and HFO rubrics (../shared) -----------------------------------------------------

SI = "vera_mh/v1.2/data/SI/rubric.tsv"
HFO = "vera_mh/v1.2/data/HFO/rubric_HFO.tsv"


@pytest.mark.shared_data
def test_si_every_path_equals_vera_mh_2():
    got = _compare(_need(_shared(SI)), "vera", "2.0")
    assert got["walks"] == got["checked"] == 206_403


@pytest.mark.shared_data
def test_hfo_paths_equal_vera_mh_2():
    # every 8th walk of the 980,416, plus the first of every (end question and GOTO, every
    # dimension visited or not) case, plus every walk that stopped with a dimension unvisited
    got = _compare(_need(_shared(HFO)), "vera", "2.0", every=8, min_walks=100_000)
    assert got["walks"] == 980_416 and got["all_nr"] == 52


@pytest.mark.shared_data
def test_si_and_hfo_in_the_stop_vocabulary_walk_as_the_originals(tmp_path):
    import csv

    for seed, (rel, first) in enumerate(((SI, "Question ID"), (HFO, "Label"))):
        src = _need(_shared(rel))
        with src.open(newline="", encoding="utf-8") as fh:
            rows = [{k: (v or "") for k, v in r.items()} for r in csv.DictReader(fh, delimiter="\t")]
        table = [[r.get(h, "") for h in HEADER] for r in rows]
        orig = write_tsv(tmp_path / f"{first}-orig.tsv", table)
        conv = _convert(table)
        assert {"STOP_NOT_RELEVANT", "STOP_ASSIGN"} <= {r[HEADER.index("GOTO")] for r in conv}
        # 20,000 walks with answers drawn at random: every way each rubric ends among them
        seen: set = set()

        def sample(ref, seen=seen, seed=seed):
            for j in random_walks(ref, 20_000, seed=seed):
                seen.add(j.end)
                yield j

        assert _walks_alike(orig, write_tsv(tmp_path / f"{first}-stop.tsv", conv), sample) == 20_000
        ends = {(qid, g) for q in parse(orig.read_text()).questions.items() for qid in [q[0]]
                for g in {a["goto"] for a in q[1]["answers"]} if g in ("END", "ASSIGN_END")}
        assert ends <= seen


def test_judge_reference_copy_is_independent():
    """The reference's branching copies do not share state (a guard on the test's own tool)."""
    import io

    text = io.StringIO()
    text.write("\t".join(HEADER) + "\n")
    for r in GATES:
        text.write("\t".join(r) + "\n")
    ref = parse(text.getvalue())
    j = Judge(ref)
    k = j.copy()
    k.give("in")
    assert j.path == [] and k.path == [("1", "in")]
