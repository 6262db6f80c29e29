"""The kinds of sheet the suites hand to people, and what comes back.

- ``policy``: plural calibration cases (``PromptRecord`` rows) labelled with the
  INTENT / FUNCTION / RESPONSE taxonomy by peer-support practitioners and
  clinicians (VEILED-SH, §5.1 and Appendix B.1) -> ``Annotation`` rows, which
  ``carebench plural calibrate`` reads;
- ``review``: blind rewrite reviews (``ReviewItem`` rows: source, persona, context,
  rewrite; the rewriter hidden) with three Yes/No gates and five 1-5 ratings
  (VEILED-SH, Appendix A.5) -> ``RewriteReview`` rows, which
  ``carebench construct review-stats`` reads;
- ``criterion``: one rubric criterion of one reply at a time, met / not met
  (DistressBench, Appendix B.1) -> ``CriterionLabel`` rows, which
  ``carebench support calibrate --labels`` reads;
- ``rubric-walk``: one conversation (of a converse run, or a transcript from elsewhere),
  the rubric's decision tree walked by a clinician question by question (VERA-MH's rubric format and walk rules) ->
  ``WalkLabel`` rows: every question answered and the rating of every dimension.

Each kind knows how to load its sheet, what its form may contain, and how a
stored answer becomes an export row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from carebench.annotate.forms import Form, FormError
from carebench.annotate.store import ExportRow
from carebench.datasets import prompts as prompt_files
from carebench.datasets import sheets as sheet_files
from carebench.datasets.files import format_from_suffix, read_rows
from carebench.taxonomy import SeverityScale, Taxonomy, load_contexts
from carebench.types import CarebenchError

KINDS = ("policy", "review", "criterion", "rubric-walk")
TITLES = {"policy": "practitioner policies", "review": "rewrite review", "criterion": "criterion labels",
          "rubric-walk": "rubric walks"}
SCALE = ("1", "2", "3", "4", "5")  # review ratings
GATES = (
    ("severity_preserved", "Severity preserved"),
    ("no_leakage", "No leakage"),
    ("format_ok", "Format fits the context"),
)
RATINGS = (
    ("factual", "Factual faithfulness"),
    ("persona_fit", "Persona fit"),
    ("style", "Style"),
    ("context_fit", "Context fit"),
    ("naturalness", "Naturalness"),
)


def detect_kind(path: Path) -> str:
    """The sheet kind from the first row's fields."""
    fmt = format_from_suffix(path)
    if fmt is None:
        raise CarebenchError(f"{path}: unsupported file type (use .jsonl, .csv or .parquet)")
    for _, row in read_rows(path, fmt):
        if "criterion_id" in row:
            return "criterion"
        if "source_text" in row or "reviewer" in row:
            return "review"
        if "source_id" in row or "persona" in row:
            return "policy"
        raise CarebenchError(f"{path}: cannot tell the sheet kind from its fields "
                             f"({', '.join(sorted(row))}); give --kind")
    raise CarebenchError(f"{path}: the sheet is empty")


#: built-in sheets ``annotate load --project builtin:NAME`` takes: name -> (kind, what it is)
BUILTIN_SHEETS = {"calibration-cases": (
    "policy", "the 30 illustrative calibration cases of the built-in plural prompts (VEILED-SH §5.1)")}


def builtin_sheet(name: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """A built-in sheet's kind and rows: the prompts the built-in ``prompts.jsonl`` marks
    ``"calibration": true`` (the cases its illustrative practitioners annotated)."""
    from carebench.datasets.builtin import package_file

    if name not in BUILTIN_SHEETS:
        raise CarebenchError(f"unknown built-in sheet {name!r}; known: {', '.join(BUILTIN_SHEETS)}")
    path = package_file("plural", "prompts.jsonl")
    marked = {str(row["id"]) for _, row in read_rows(path, "jsonl") if row.get("calibration") is True}
    rows = [(key, row) for key, row in load_sheet(path, "policy") if key in marked]
    return BUILTIN_SHEETS[name][0], rows


def load_sheet(path: Path, kind: str) -> list[tuple[str, dict[str, Any]]]:
    """(item key, row as JSON-able dict) for every row, validated by the core loaders."""
    if kind == "policy":
        rows = prompt_files.load_prompts(path)
        _check_contexts(path, [(r.id, r.context) for r in rows])
        return [(r.id, r.model_dump(mode="json")) for r in rows]
    if kind == "review":
        # one rewrite may go to two reviewers (VEILED-SH, Appendix A.5: 90 shared prompts)
        rows = sheet_files.load_review_items(path)
        _check_contexts(path, [(r.item_id, getattr(r, "context", None)) for r in rows])
        return [(f"{r.item_id}\u241f{r.reviewer}", r.model_dump(mode="json")) for r in rows]
    if kind == "criterion":
        rows = sheet_files.load_criterion_items(path)
        return [(r.item_id, r.model_dump(mode="json")) for r in rows]
    if kind == "rubric-walk":
        raise CarebenchError("--kind rubric-walk loads conversations: give --run RUN_DIR or --transcripts PATH "
                             "with --rubric, not --project")
    raise CarebenchError(f"--kind {kind!r}: use one of {', '.join(KINDS)}")


def _check_contexts(path: Path, items: list[tuple[str, str | None]]) -> None:
    """Every case's application context must be one the taxonomy's contexts define (the form
    shows its interaction contract, and plural scores by it)."""
    known = load_contexts()
    bad = next(((i, c) for i, c in items if c and c not in known), None)
    if bad is not None:
        raise CarebenchError(f"{path}: item {bad[0]!r}: context {bad[1]!r} is not defined; "
                             f"known: {', '.join(sorted(known))}")


@dataclass(frozen=True)
class Answer:
    payload: dict[str, Any]
    skipped: bool


#: the buttons each kind's form has
ACTIONS = {"policy": ("save", "skip"), "review": ("save", "skip"), "criterion": ("met", "not_met", "skip")}


def parse_answer(kind: str, form: Form, max_notes: int, tax: Taxonomy) -> Answer:
    """Validate a submitted case form; raise FormError (nothing stored) otherwise."""
    if kind not in ACTIONS:
        raise FormError(f"unknown sheet kind {kind!r}")
    action = form.choice("action", ACTIONS[kind], "action")
    if action is None:
        raise FormError("the form did not say what to do (use one of its buttons)")
    if kind == "policy":
        form.only({"csrf_token", "action", "intent", "function", "response", "nssi_severity",
                   "suicidal_severity", "notes"})
        notes = form.text("notes", max_notes, "Notes")
        return _policy(form, notes, tax) if action != "skip" else Answer(_empty_policy(notes), True)
    if kind == "review":
        form.only({"csrf_token", "action", "notes"} | {g for g, _ in GATES} | {r for r, _ in RATINGS})
        notes = form.text("notes", max_notes, "Notes")
        return _review(form, notes) if action != "skip" else Answer({"notes": notes}, True)
    form.only({"csrf_token", "action"})
    if action == "skip":
        return Answer({}, True)
    return Answer({"met": action == "met"}, False)


def _empty_policy(notes: str) -> dict[str, Any]:
    return {"intent": [], "nssi_severity": None, "suicidal_severity": None, "function": [],
            "response": [], "notes": notes}


def severity_fields(tax: Taxonomy) -> dict[str, tuple[str, SeverityScale]]:
    """INTENT code -> (form/export field, its severity scale), from the taxonomy."""
    return {scale.intent: (f"{kind}_severity", scale) for kind, scale in tax.severity.items()}


def _policy(form: Form, notes: str, tax: Taxonomy) -> Answer:
    intent = form.choices("intent", tax.codes("intent"), "INTENT")
    function = form.choices("function", tax.codes("function"), "FUNCTION")
    response = form.choices("response", tax.codes("response"), "RESPONSE")
    severities: dict[str, int | None] = {"nssi_severity": None, "suicidal_severity": None}
    for code, (field, scale) in severity_fields(tax).items():
        value = form.choice(field, [str(v) for v in scale.values], field.replace("_", " "))
        # a severity left selected under an intent that was then unticked is ignored
        severities[field] = int(value) if value is not None and code in intent else None
    problems = tax.validate_policy(intent, function, response, **severities)
    if problems:
        raise FormError(*problems)
    return Answer({"intent": intent, **severities, "function": function, "response": response,
                   "notes": notes}, False)


def _review(form: Form, notes: str) -> Answer:
    payload: dict[str, Any] = {}
    missing = []
    for field, label in GATES:
        v = form.choice(field, ("yes", "no"), label)
        if v is None:
            missing.append(label)
        payload[field] = v == "yes"
    for field, label in RATINGS:
        v = form.choice(field, SCALE, label)
        if v is None:
            missing.append(label)
        payload[field] = int(v) if v is not None else None
    if missing:
        raise FormError(f"answer every gate and rating (missing: {', '.join(missing)})")
    payload["notes"] = notes
    return Answer(payload, False)


def export_records(kind: str, row: ExportRow) -> list[BaseModel]:
    """Every export record of one stored answer (none for a skipped one that its format
    cannot hold): one for the sheet kinds, one per question and dimension for a walk."""
    if kind == "rubric-walk":
        return [] if row.skipped else _walk_records(row)
    rec = export_row(kind, row)
    return [] if rec is None else [rec]


def _walk_records(row: ExportRow) -> list[BaseModel]:
    from carebench.datasets.walk_labels import WalkLabel

    item, label = row.item, row.label
    common = {"clinician": row.annotator, "conversation_id": item["conversation_id"],
              "chatbot": item.get("chatbot"), "simulator": item.get("simulator"),
              "persona": item.get("persona"),
              "risk_level": None if item.get("risk_level") is None else str(item["risk_level"]),
              "reason": label.get("reason", "")}
    out: list[BaseModel] = [
        WalkLabel(record="answer", dimension=s["dimension"], step=i, question_id=s["question_id"],
                  answer=s["answer"], auto=bool(s.get("auto")), **common)
        for i, s in enumerate(label["steps"], 1)]
    dims = list(dict.fromkeys(q["dimension"] for q in item["rubric"]["questions"]))  # the rubric's order
    out += [WalkLabel(record="rating", dimension=dim, rating=label["ratings"][dim], **common)
            for dim in dims if dim in label["ratings"]]
    return out


def export_row(kind: str, row: ExportRow) -> BaseModel | None:
    """The suite-facing record of one stored answer; None for a skipped review or
    criterion (their formats have no 'skipped'); skipped policy cases are kept with
    ``skipped: true`` as the plural annotation format allows."""
    if kind == "policy":
        return prompt_files.Annotation(practitioner=row.annotator, archetype=row.role,
                                       case_id=row.item["id"], skipped=row.skipped, **row.label)
    if row.skipped:
        return None
    if kind == "review":
        return sheet_files.RewriteReview(item_id=row.item["item_id"], reviewer=row.annotator, **row.label)
    if kind == "criterion":
        item = row.item
        return sheet_files.CriterionLabel(task_id=item["task_id"], response_id=item["response_id"],
                                          criterion_id=item["criterion_id"], rater=row.annotator,
                                          met=row.label["met"])
    raise CarebenchError(f"unknown sheet kind {kind!r}")
