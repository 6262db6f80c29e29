"""Clinicians walking a decision-tree rubric over a whole conversation (the ``rubric-walk`` kind).

The page asks one question at a time, and which question comes next is decided by the
answer, by the very walk rules the converse judge follows (:mod:`carebench.rubric_walk`:
GOTO, END, ``NOT_RELEVANT>>``, ``ASSIGN_END``, Auto Answer), so a clinician's walk and a
judge's walk of the same conversation can be compared question by question.

Nothing is stored until the walk is finished and saved: every page carries the answers
given so far in its form, and each submission replays them through a fresh walk. Going
back to an earlier question therefore drops every later answer, and the rest of the walk
is asked again from there: a stale answer cannot survive a changed branch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from carebench.annotate.forms import Form, FormError
from carebench.datasets.transcripts import load_transcripts as read_transcripts
from carebench.engine.rundir import read_jsonl
from carebench.rubric import Rubric, load_rubric, rubric_from_mapping
from carebench.rubric_walk import WalkState
from carebench.types import CarebenchError

KIND = "rubric-walk"
#: clinicians per conversation unless ``annotate load --overlap`` says otherwise
DEFAULT_OVERLAP = 2


def load_run(run_dir: Path, rubric_path: str, rules: str | None = None,
             overlap: int = DEFAULT_OVERLAP) -> list[tuple[str, dict[str, Any]]]:
    """(conversation id, item) for every finished conversation of a converse run directory.
    Conversations that failed (harness failure) have no transcript worth walking and are
    left out; each item carries the rubric so the page walks the tree it was loaded with."""
    _check_overlap(overlap)
    path = Path(run_dir) / "records.jsonl"
    if not path.is_file():
        raise CarebenchError(f"--run {run_dir}: not a run directory (no records.jsonl)")
    rubric = load_rubric(rubric_path, rules)
    convs = [rec for rec in read_jsonl(path) if rec.get("kind") == "conversation" and rec.get("status") == "ok"]
    if not convs:
        raise CarebenchError(f"--run {run_dir}: no finished conversations to walk")
    return _items(convs, rubric, rubric_path, overlap)


def load_transcripts(source: Path, rubric_path: str, rules: str | None = None,
                     overlap: int = DEFAULT_OVERLAP) -> list[tuple[str, dict[str, Any]]]:
    """(conversation id, item) for every conversation of a transcripts file or directory
    (the formats ``converse judge --transcripts`` reads): conversations carebench did not
    generate, walked like a run's. Each item keeps the transcript's id, persona, risk level
    and chatbot, so the export joins ``converse calibrate --transcripts`` on the same ids."""
    _check_overlap(overlap)
    convs = read_transcripts(source)  # bad input (no chatbot turn, unknown role, empty): one line
    return _items(convs, load_rubric(rubric_path, rules), rubric_path, overlap)


def _check_overlap(overlap: int) -> None:
    if overlap < 1:
        raise CarebenchError(f"--overlap {overlap}: give at least 1 clinician per conversation")


def _items(convs: list[dict[str, Any]], rubric: Rubric, rubric_path: str,
           overlap: int) -> list[tuple[str, dict[str, Any]]]:
    tree = rubric.to_dict()
    rows = []
    for rec in convs:
        turns = [{"role": str(t.get("role")), "content": str(t.get("content") or "")}
                 for t in rec.get("turns") or []]
        rows.append((str(rec["id"]), {
            "conversation_id": str(rec["id"]), "persona": rec.get("persona"),
            "risk_level": rec.get("risk_level"), "chatbot": rec.get("chatbot"),
            "simulator": rec.get("simulator"), "turns": turns, "rubric": tree,
            "rubric_source": str(rubric_path), "overlap": overlap}))
    return rows


@lru_cache(maxsize=32)
def _rubric(tree_json: str) -> Rubric:
    return rubric_from_mapping(json.loads(tree_json), "rubric of the loaded project")


def rubric_of(item: dict[str, Any]) -> Rubric:
    return _rubric(json.dumps(item["rubric"], sort_keys=True))


def replay(rubric: Rubric, answers: list[tuple[str, str]]) -> WalkState:
    """A walk driven by (question id, answer) pairs, the auto-answered questions filled
    in on the way; a pair that is not the question the walk asks next means the form was
    made for another walk (stale page) and is refused."""
    state = WalkState(rubric)
    for qid, ans in answers:
        q = state.pending()
        if q is None or q.id != qid or ans not in q.labels:
            raise FormError("the page was out of date (the walk has changed); reload it and answer again")
        state.give(ans)
    return state


def given(state: WalkState) -> list[dict[str, Any]]:
    """The clinician's own answers (auto answers left out), in walk order."""
    return [{"question_id": s.question_id, "answer": s.answer} for s in state.steps if not s.auto]


@dataclass(frozen=True)
class WalkForm:
    """What one submission of the walk page asks for."""

    action: str  # next | back | save | skip
    state: WalkState
    reason: str


def parse(form: Form, rubric: Rubric, max_notes: int) -> WalkForm:
    """Validate a walk page submission; raise FormError (nothing stored) otherwise."""
    form.only({"csrf_token", "action", "qid", "ans", "answer", "reason"})
    action = form.one("action") or ""
    qids, anss = form.all("qid"), form.all("ans")
    if len(qids) != len(anss):
        raise FormError("the form could not be read (answers without their questions)")
    reason = form.text("reason", max_notes, "Reason")
    if action == "skip":
        return WalkForm("skip", WalkState(rubric), reason)
    state = replay(rubric, list(zip(qids, anss, strict=True)))
    if action.startswith("back-") and action[5:].isdigit() and int(action[5:]) < len(qids):
        keep = int(action[5:])
        return WalkForm("back", replay(rubric, list(zip(qids[:keep], anss[:keep], strict=True))), reason)
    if action == "next":
        q = state.pending()
        if q is None:
            raise FormError("the walk is finished; save it or change an answer")
        label = form.choice("answer", q.labels, f"Question {q.id}")
        if label is None:
            raise FormError(f"choose an answer to question {q.id}")
        state.give(label)
        return WalkForm("next", state, reason)
    if action == "save":
        if not state.done:
            raise FormError("answer every question the walk asks before saving")
        return WalkForm("save", state, reason)
    raise FormError("the form did not say what to do (use one of its buttons)")


def kept(form: Form, rubric: Rubric) -> WalkState:
    """The walk a refused submission had reached, to show again beside the error (a fresh
    walk when its answers do not replay): a forgotten radio button loses no answers."""
    try:
        qids, anss = form.all("qid"), form.all("ans")
        return replay(rubric, list(zip(qids, anss, strict=True)))
    except (FormError, ValueError):
        return WalkState(rubric)


def payload(state: WalkState, reason: str) -> dict[str, Any]:
    """The stored label of a finished walk."""
    return {"answers": given(state), "steps": [s.to_dict() for s in state.steps],
            "ratings": state.ratings(), "reason": reason}


def stored_state(rubric: Rubric, label: dict[str, Any] | None, skipped: bool) -> WalkState:
    """The walk a saved label describes (a fresh walk for none, a skip, or a label the
    rubric no longer walks the same way)."""
    if not label or skipped:
        return WalkState(rubric)
    try:
        return replay(rubric, [(a["question_id"], a["answer"]) for a in label.get("answers", [])])
    except FormError:
        return WalkState(rubric)
