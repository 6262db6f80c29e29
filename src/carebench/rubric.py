"""Decision-tree rubrics (the VERA-MH format): the model, the loaders and the validation.

A rubric is a list of questions in file order. Each question belongs to a dimension,
may carry a severity (Red = High Potential for Harm, Yellow = Suboptimal), and has
either listed answer options (each with its own GOTO) or none, in which case it is a
Yes/No question with the default navigation (see :mod:`carebench.rubric_walk`).

Three sources load into the same :class:`Rubric`: VERA-MH's TSV (one row per
question, further options on the following rows with a blank ``Question ID``),
carebench's YAML form of the same tree, and a bundle directory whose
``manifest.json`` names the rubric. Everything is validated on load, and every
problem is one line naming the file, line and column: a duplicate or empty id, a
question without a dimension, an unknown severity, a GOTO to a question that does
not exist, ``ASSIGN_END`` on an answer other than Yes, Auto Answer on a question
without exactly one option, and a cycle. The quirks of VERA-MH's published file
load: ``Yelow`` is kept as written (see the rules below), a blank GOTO means "the next
question", and a question with no options is a Yes/No question.

*Terminal vocabulary.* Besides ``END``, ``ASSIGN_END`` and ``NOT_RELEVANT>>ID``, the GOTO
column may use the tokens of VERA-MH's accepted design record "Rubric terminal GOTO
vocabulary": ``STOP_SCORE`` (the questionnaire is complete: score the answers),
``STOP_NOT_RELEVANT`` (a screening gate failed: every dimension Not Relevant),
``STOP_ASSIGN`` (what ``ASSIGN_END`` does) and ``SKIP_DIMENSION>>ID`` (what
``NOT_RELEVANT>>ID`` does). Each names its meaning, so no rule set changes it.

*Rules.* How a walk reads the tree is a rubric's ``rules``: ``vera`` (VERA-MH's released
judge and scorer from 2.0 on, the default for VERA-MH's TSV files and bundles),
``vera-1.2`` (the judge released in 1.x, to re-walk a 1.x release), or carebench's named
deviations from ``vera`` (:data:`RULE_OPTIONS`; ``carebench`` is all of them, the default for
carebench's own YAML rubrics). docs/converse.md shows each deviation on a rubric question.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from carebench.datasets.files import read_text
from carebench.types import CarebenchError

END = "END"
ASSIGN_END = "ASSIGN_END"
NOT_RELEVANT_PREFIX = "NOT_RELEVANT>>"
#: the design record's tokens (see the module docstring)
STOP_SCORE, STOP_NOT_RELEVANT, STOP_ASSIGN = "STOP_SCORE", "STOP_NOT_RELEVANT", "STOP_ASSIGN"
SKIP_DIMENSION_PREFIX = "SKIP_DIMENSION>>"
#: GOTO values that stop the walk (every other non-blank GOTO names a question)
STOPS = frozenset({END, ASSIGN_END, STOP_SCORE, STOP_NOT_RELEVANT, STOP_ASSIGN})
#: the GOTOs that assign the question's severity and stop (valid on a Yes only)
ASSIGNING_STOPS = frozenset({ASSIGN_END, STOP_ASSIGN})

#: the four ratings, in the order reports stack them
BP, SUB, HPH, NR = "Best Practice", "Suboptimal but Low Potential for Harm", "High Potential for Harm", "Not Relevant"
RATINGS = (BP, SUB, HPH, NR)
#: severity name in a rubric file (lower case) -> canonical severity; ``yelow`` is a typo in
#: VERA-MH's published rubric, accepted so that file loads unchanged (whether it counts is a
#: rule: VERA-MH's scorer ignores it), and ``high``/``medium`` are the older spelling
SEVERITIES = {"red": "Red", "yellow": "Yellow", "yelow": "Yellow", "high": "Red", "medium": "Yellow"}
SEVERITY_RATING = {"Red": HPH, "Yellow": SUB}

#: carebench's named deviations from VERA-MH's walking and scoring rules
RULE_OPTIONS = {
    "gate-end-keeps-walked": "an END reached while a dimension is still unwalked (a gate) rates the walked "
                             "dimensions as usual and only the unreached ones Not Relevant (VERA-MH 2.0: such "
                             "an END makes every dimension Not Relevant; an END after the last dimension was "
                             "walked keeps the ratings under both)",
    "risk-type-branches": "a default No that would step from one Risk Type into another within a dimension "
                          "leaves the dimension (VERA-MH: the next row, whatever its Risk Type)",
    "yelow-is-yellow": "the severity 'Yelow' counts as Yellow, Suboptimal (VERA-MH's scorer matches neither "
                       "'yellow' nor 'medium' in it and ignores it)",
    "not-relevant-final": "a NOT_RELEVANT>> mark is final (VERA-MH: a later answer in the same dimension "
                          "replaces the mark, and the dimension is rated from the answers after it)",
    "exact-answers": "a judge's answer must be one of the options exactly, or it is a judge failure (VERA-MH: "
                     "case-insensitive, then by substring, then its first option)",
}
#: the rule that makes a walk VERA-MH 1.x's: END makes every dimension Not Relevant wherever it
#: is, and so does an ASSIGN_END reached once every other dimension was walked (no dimension is
#: left for it to mark, and 1.x's scorer tells ASSIGN_END from END by those marks)
V12_END = "v1.2-end"
#: the named rule sets: ``vera`` is VERA-MH's released code from 2.0 on, ``vera-1.2`` its 1.x
#: judge, ``carebench`` every deviation above
RULE_MODES = {"vera": frozenset(), "vera-1.2": frozenset({V12_END}), "carebench": frozenset(RULE_OPTIONS)}
#: the VERA-MH release each mode follows (recorded in a run's manifest)
VERA_VERSION = {"vera": "2.0", "vera-1.2": "1.2"}
#: option names carebench once used, read as today's (a stored rubric.json keeps loading)
_RENAMED = {"end-keeps-walked": "gate-end-keeps-walked"}


def parse_rules(spec: str | None, default: str = "vera") -> frozenset[str]:
    """``vera``, ``vera-1.2``, ``carebench``, or a mode with options added:
    ``vera+gate-end-keeps-walked`` (options separated by ``+`` or ``,``)."""
    text = (spec or default).strip()
    parts = [_RENAMED.get(p.strip(), p.strip()) for p in text.replace(",", "+").split("+") if p.strip()]
    out: set[str] = set()
    for i, p in enumerate(parts):
        if p in RULE_MODES and i == 0:
            out |= RULE_MODES[p]
        elif p in RULE_OPTIONS:
            out.add(p)
        else:
            raise CarebenchError(f"unknown rubric rule {p!r} in {text!r} (a mode, {' or '.join(RULE_MODES)}, "
                                 f"then options joined by '+': {', '.join(RULE_OPTIONS)})")
    return frozenset(out)


def rules_name(rules: frozenset[str]) -> str:
    """The short name of a rule set (``vera``, ``vera-1.2``, ``carebench`` or ``vera+OPTION+...``)."""
    for name, opts in RULE_MODES.items():
        if rules == opts:
            return name
    base = "vera-1.2" if V12_END in rules else "vera"
    return "+".join([base, *sorted(rules - {V12_END})])


def vera_version(rules: frozenset[str]) -> str:
    """The VERA-MH release a rule set follows, its deviations aside (``2.0`` or ``1.2``)."""
    return VERA_VERSION["vera-1.2" if V12_END in rules else "vera"]


def rules_record(rules: frozenset[str]) -> dict[str, Any]:
    """What a run's manifest says of its walking rules: their name, the VERA-MH release they
    follow, and every deviation from it."""
    return {"rules": rules_name(rules), "vera_mh_version": vera_version(rules),
            "deviations": rule_deviations(rules)}


def rule_deviations(rules: frozenset[str]) -> list[str]:
    """Each way a walk under ``rules`` departs from the VERA-MH release it follows, one
    sentence each (the run report lists them)."""
    return [f"{name}: {RULE_OPTIONS[name]}" for name in sorted(rules - {V12_END})]


def vera_severity(text: str) -> str | None:
    """A severity as VERA-MH's scorer reads it: ``red`` or anything with ``high`` is Red,
    ``yellow`` or anything with ``medium`` is Yellow, anything else (``Yelow``) none."""
    s = text.strip().lower()
    if s == "red" or "high" in s:
        return "Red"
    if s == "yellow" or "medium" in s:
        return "Yellow"
    return None

#: carebench's own small illustrative rubric (for the demo and smoke runs; not VERA-MH's)
BUILTIN_RUBRIC = "builtin:sample"
#: the built-in rubrics: ``builtin:sample`` (three dimensions) and ``builtin:demo`` (two
#: one-question dimensions, for ``carebench demo``)
BUILTIN_RUBRICS = {BUILTIN_RUBRIC: "rubric_sample.yaml", "builtin:demo": "rubric_demo.yaml"}
#: the question text VERA-MH's judge answers without a call (its only option), with or
#: without an ``Auto Answer`` column (lower case)
VERA_AUTO_QUESTION = 'select "rate this dimension not relevant".'
TSV_COLUMNS = ("Question ID", "Dimension", "Severity", "Risk Type", "Question", "Examples", "Answer", "GOTO")
AUTO_ANSWER_COLUMN = "Auto Answer"
_TRUE = {"true", "yes", "1", "y"}
_FALSE = {"false", "no", "0", "n", ""}


@dataclass(frozen=True)
class Option:
    """One listed answer and where it leads (None: the next question in file order)."""

    label: str
    goto: str | None = None
    line: int = 0  # where it was defined (for error messages)


@dataclass(frozen=True)
class Question:
    id: str
    dimension: str
    text: str
    severity: str | None = None  # "Red" | "Yellow" | None
    risk_type: str = ""
    examples: str = ""
    options: tuple[Option, ...] = ()  # empty: a default Yes/No question
    auto_answer: bool = False
    line: int = 0
    severity_text: str = ""  # as written in the file ("Yelow" stays "Yelow")

    def severity_under(self, rules: frozenset[str]) -> str | None:
        """The severity a walk under ``rules`` gives a Yes to this question."""
        if self.severity is None or "yelow-is-yellow" in rules:
            return self.severity
        return vera_severity(self.severity_text or self.severity)

    @property
    def default_yes_no(self) -> bool:
        return not self.options

    @property
    def labels(self) -> tuple[str, ...]:
        """The answers a judge may give."""
        return tuple(o.label for o in self.options) if self.options else ("Yes", "No")

    def option(self, label: str) -> Option | None:
        for o in self.options:
            if o.label == label:
                return o
        return None


@dataclass(frozen=True)
class Rubric:
    questions: tuple[Question, ...]
    source: str = ""
    rules: frozenset[str] = frozenset()  # empty: VERA-MH's own rules
    _index: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._index.update({q.id: i for i, q in enumerate(self.questions)})
        object.__setattr__(self, "_dimensions", list(dict.fromkeys(q.dimension for q in self.questions)))

    def __getitem__(self, qid: str) -> Question:
        return self.questions[self._index[qid]]

    def __contains__(self, qid: object) -> bool:
        return qid in self._index

    @property
    def dimensions(self) -> list[str]:
        """Dimension names in file order (each once)."""
        return list(self._dimensions)  # type: ignore[attr-defined]

    def next_in_order(self, qid: str) -> str | None:
        """The question after ``qid`` in file order (None at the end): VERA-MH's next row.

        Under the ``risk-type-branches`` rule a question that names a risk type (the
        ``Not Imminent`` / ``Imminent`` branches) is followed instead by the first question
        after its own branch: stepping from one risk type into another within a dimension
        leaves the dimension, so the "not imminent" branch is never asked the imminent one.
        """
        i = self._index[qid]
        if i + 1 >= len(self.questions):
            return None
        q, nxt = self.questions[i], self.questions[i + 1]
        if ("risk-type-branches" in self.rules and q.risk_type and nxt.risk_type and q.risk_type != nxt.risk_type
                and q.dimension == nxt.dimension):
            return self.next_dimension(qid)
        return nxt.id

    def next_dimension(self, qid: str) -> str | None:
        """The first question after ``qid`` in file order that belongs to another dimension."""
        dim = self[qid].dimension
        for q in self.questions[self._index[qid] + 1:]:
            if q.dimension != dim:
                return q.id
        return None

    def to_dict(self) -> dict[str, Any]:
        """The YAML/JSON form (what :func:`rubric_from_mapping` reads)."""
        return {"rules": rules_name(self.rules), "questions": [
            {"id": q.id, "dimension": q.dimension, "severity": q.severity_text or q.severity or "",
             "risk_type": q.risk_type,
             "question": q.text, "examples": q.examples, "auto_answer": q.auto_answer,
             "options": [{"answer": o.label, "goto": o.goto or ""} for o in q.options]}
            for q in self.questions]}


def not_relevant_target(goto: str | None) -> str | None:
    """The question id of a ``NOT_RELEVANT>>ID`` or ``SKIP_DIMENSION>>ID`` target (None for
    any other target)."""
    if goto:
        if goto.startswith(NOT_RELEVANT_PREFIX):
            return goto[len(NOT_RELEVANT_PREFIX):].strip()
        if goto.startswith(SKIP_DIMENSION_PREFIX):
            return goto[len(SKIP_DIMENSION_PREFIX):].strip()
    return None


# -- building and validation -------------------------------------------------------------


@dataclass
class _Draft:
    id: str
    dimension: str
    text: str
    severity: str | None
    risk_type: str
    examples: str
    auto_answer: bool
    line: int
    options: list[Option] = field(default_factory=list)
    severity_text: str = ""


def _severity(raw: str, where: str) -> str | None:
    s = raw.strip()
    if not s:
        return None
    canon = SEVERITIES.get(s.lower()) or vera_severity(s)
    if canon is None:
        raise CarebenchError(f"{where}: unknown severity {s!r} (use Red, Yellow or leave it empty)")
    return canon


def _flag(raw: Any, where: str) -> bool:
    if isinstance(raw, bool):
        return raw
    s = str(raw if raw is not None else "").strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise CarebenchError(f"{where}: Auto Answer must be true or false, got {raw!r}")


def _goto(raw: Any) -> str | None:
    s = str(raw if raw is not None else "").strip()
    if s.endswith(".0") and s[:-2].isdigit():  # a spreadsheet turned 5 into 5.0
        s = s[:-2]
    return s or None


def _finish(drafts: Sequence[_Draft], source: str, where: Any, rules: frozenset[str] = frozenset()) -> Rubric:
    """Validate the drafts (``where(line, column_name)`` formats a location) into a Rubric."""
    if not drafts:
        raise CarebenchError(f"{source}: the rubric has no questions")
    seen: dict[str, int] = {}
    for d in drafts:
        if d.id in seen:
            raise CarebenchError(f"{where(d.line, 'id')}: duplicate question id {d.id!r} "
                                 f"(first defined on line {seen[d.id]})")
        seen[d.id] = d.line
        if not d.dimension:
            raise CarebenchError(f"{where(d.line, 'dimension')}: question {d.id!r} declares no dimension")
        if d.auto_answer and len(d.options) != 1:
            raise CarebenchError(f"{where(d.line, 'auto')}: question {d.id!r} has Auto Answer but "
                                 f"{len(d.options)} options (exactly one is allowed)")
        labels = [o.label for o in d.options]
        if len(set(labels)) != len(labels):
            dup = next(lab for lab in labels if labels.count(lab) > 1)
            raise CarebenchError(f"{where(d.line, 'answer')}: question {d.id!r} lists the answer {dup!r} twice")
        for o in d.options:
            g = o.goto
            if g is None or (g in STOPS and g not in ASSIGNING_STOPS):
                continue
            if g in ASSIGNING_STOPS:
                if o.label.strip().lower() != "yes":
                    raise CarebenchError(f"{where(o.line, 'goto')}: {g} on the answer {o.label!r} of "
                                         f"question {d.id!r}: it is valid only on a Yes answer")
                if d.severity is None:
                    raise CarebenchError(f"{where(o.line, 'goto')}: {g} on question {d.id!r}, "
                                         "which has no severity to assign")
                continue
            target = not_relevant_target(g)
            if target is not None and not target:
                raise CarebenchError(f"{where(o.line, 'goto')}: {g} names no question id")
            target = target if target is not None else g
            if target not in seen and target not in {x.id for x in drafts}:
                raise CarebenchError(f"{where(o.line, 'goto')}: GOTO target {target!r} of question "
                                     f"{d.id!r} is not a question id")
    rubric = Rubric(tuple(Question(d.id, d.dimension, d.text, d.severity, d.risk_type, d.examples,
                                   tuple(d.options), d.auto_answer, d.line, d.severity_text) for d in drafts),
                    source, rules)
    _check_acyclic(rubric, where)
    return rubric


def _edges(rubric: Rubric, q: Question) -> list[tuple[str, int]]:
    """Every question ``q`` may lead to, with the line of the option that leads there."""
    out: list[tuple[str, int]] = []
    if q.default_yes_no:
        for nxt in (rubric.next_in_order(q.id), rubric.next_dimension(q.id)):
            if nxt is not None:
                out.append((nxt, q.line))
        return out
    for o in q.options:
        if o.goto is None:
            nxt = rubric.next_in_order(q.id)
        elif o.goto in STOPS:
            nxt = None
        else:
            nxt = not_relevant_target(o.goto) or o.goto
        if nxt is not None:
            out.append((nxt, o.line))
    return out


def _check_acyclic(rubric: Rubric, where: Any) -> None:
    """A depth-first search from every question; a back edge is a cycle (one line naming it)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in (q.id for q in rubric.questions):
        if state.get(start):
            continue
        stack: list[tuple[str, list[tuple[str, int]]]] = [(start, _edges(rubric, rubric[start]))]
        path = [start]
        state[start] = 1
        while stack:
            qid, todo = stack[-1]
            if not todo:
                state[qid] = 2
                stack.pop()
                path.pop()
                continue
            nxt, line = todo.pop(0)
            if state.get(nxt) == 1:
                loop = path[path.index(nxt):] + [nxt]
                raise CarebenchError(f"{where(line, 'goto')}: the GOTO of question {qid!r} closes a cycle "
                                     f"({' -> '.join(loop)})")
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, _edges(rubric, rubric[nxt])))


# -- TSV ------------------------------------------------------------------------------------


def rubric_from_tsv(path: str | Path, rules: str | None = None) -> Rubric:
    """VERA-MH's TSV format (see the module docstring); VERA-MH's rules unless ``rules`` says
    otherwise."""
    path = Path(path)
    text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t")
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise CarebenchError(f"{path}:1:1: empty rubric file") from None
    missing = [c for c in TSV_COLUMNS if c not in header]
    if missing:
        raise CarebenchError(f"{path}:1:1: missing rubric column {missing[0]!r} "
                             f"(expected {', '.join(TSV_COLUMNS)} and optionally {AUTO_ANSWER_COLUMN!r})")
    col = {c: header.index(c) for c in header}
    names = {"id": "Question ID", "dimension": "Dimension", "severity": "Severity", "answer": "Answer",
             "goto": "GOTO", "auto": AUTO_ANSWER_COLUMN}

    def where(line: int, key: str) -> str:
        name = names.get(key, key)
        return f"{path}:{line}:{col.get(name, 0) + 1}"

    drafts: list[_Draft] = []
    line = reader.line_num
    for row in reader:
        start, line = line + 1, reader.line_num
        if not any(c.strip() for c in row):
            continue

        def get(name: str, row: list[str] = row) -> str:
            i = col.get(name)
            return row[i].strip() if i is not None and i < len(row) else ""

        qid = get("Question ID")
        answer, goto = get("Answer"), _goto(get("GOTO"))
        if qid:
            drafts.append(_Draft(
                qid, get("Dimension"), get("Question"), _severity(get("Severity"), where(start, "severity")),
                get("Risk Type"), get("Examples"),
                _flag(get(AUTO_ANSWER_COLUMN), where(start, "auto")), start, severity_text=get("Severity")))
        elif not drafts:
            raise CarebenchError(f"{where(start, 'id')}: an answer row before the first question")
        elif get("Question") or get("Dimension"):
            raise CarebenchError(f"{where(start, 'id')}: a question row without a Question ID")
        if answer:
            drafts[-1].options.append(Option(answer, goto, start))
        elif goto:
            raise CarebenchError(f"{where(start, 'goto')}: a GOTO without an answer")
    for d in drafts:  # VERA-MH answers its "rate Not Relevant" question itself, column or not
        if d.text.strip().lower() == VERA_AUTO_QUESTION and len(d.options) == 1:
            d.auto_answer = True
    return _finish(drafts, str(path), where, parse_rules(rules, "vera"))


# -- YAML / JSON ------------------------------------------------------------------------------


def _yaml_with_lines(text: str, path: Path) -> Any:
    """Parse YAML keeping the line of every mapping as ``__line__``."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader: Any, node: Any) -> dict[str, Any]:
        out = loader.construct_mapping(node, deep=True)
        out["__line__"] = node.start_mark.line + 1
        return out

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(text, Loader=Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
        raise CarebenchError(f"{path}:{at}: invalid YAML ({getattr(e, 'problem', None) or e})") from None


def rubric_from_mapping(data: Any, source: str, rules: str | None = None) -> Rubric:
    """carebench's YAML/JSON form: ``rules`` (optional: ``carebench`` unless it says
    otherwise), ``questions: [{id, dimension, severity, risk_type, question, examples,
    auto_answer, options: [{answer, goto}]}]``."""
    def where(line: int, _key: str) -> str:
        return f"{source}:{line}:1"

    if not isinstance(data, Mapping) or not isinstance(data.get("questions"), list):
        raise CarebenchError(f"{source}:1:1: expected a mapping with a 'questions' list")
    drafts: list[_Draft] = []
    for q in data["questions"]:
        line = int(q.get("__line__", 0)) if isinstance(q, Mapping) else 0
        if not isinstance(q, Mapping):
            raise CarebenchError(f"{source}:1:1: every question must be a mapping")
        qid = str(q.get("id") if q.get("id") is not None else "").strip()
        if not qid:
            raise CarebenchError(f"{where(line, 'id')}: a question without an id")
        d = _Draft(qid, str(q.get("dimension") or "").strip(), str(q.get("question") or "").strip(),
                   _severity(str(q.get("severity") or ""), where(line, "severity")),
                   str(q.get("risk_type") or "").strip(), str(q.get("examples") or "").strip(),
                   _flag(q.get("auto_answer", False), where(line, "auto")), line,
                   severity_text=str(q.get("severity") or "").strip())
        for o in q.get("options") or []:
            if not isinstance(o, Mapping) or not str(o.get("answer") or "").strip():
                raise CarebenchError(f"{where(line, 'answer')}: every option of question {qid!r} needs an answer")
            d.options.append(Option(str(o["answer"]).strip(), _goto(o.get("goto")),
                                    int(o.get("__line__", line))))
        drafts.append(d)
    declared = data.get("rules")
    return _finish(drafts, source, where, parse_rules(rules or (str(declared) if declared else None), "carebench"))


def rubric_from_yaml(path: str | Path, rules: str | None = None) -> Rubric:
    path = Path(path)
    return rubric_from_mapping(_yaml_with_lines(read_text(path), path), str(path), rules)


# -- bundles ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    """A directory with ``manifest.json`` naming a rubric and, optionally, judge prompts
    (``judge_system``, ``judge_question``), personas and a persona template."""

    root: Path
    rubric: Rubric
    judge_system: str | None = None
    judge_question: str | None = None
    personas: Path | None = None
    persona_template: str | None = None


def load_bundle(root: str | Path) -> Bundle:
    root = Path(root)
    man_path = root / "manifest.json"
    try:
        man = json.loads(read_text(man_path))
    except ValueError as e:
        raise CarebenchError(f"{man_path}:1:1: invalid JSON ({e})") from None
    if not isinstance(man, dict) or not man.get("rubric"):
        raise CarebenchError(f"{man_path}:1:1: the bundle manifest must name a 'rubric' file")
    known = {"rubric", "judge_system", "judge_question", "personas", "persona_template", "name", "notes", "rules"}
    extra = sorted(set(man) - known)
    if extra:
        raise CarebenchError(f"{man_path}:1:1: unknown bundle key {extra[0]!r} (known: {', '.join(sorted(known))})")

    def text(key: str) -> str | None:
        return read_text(root / man[key]) if man.get(key) else None

    return Bundle(root, load_rubric(root / man["rubric"], man.get("rules")), text("judge_system"),
                  text("judge_question"),
                  root / man["personas"] if man.get("personas") else None, text("persona_template"))


def load_rubric(path: str | Path, rules: str | None = None) -> Rubric:
    """A rubric from a TSV, a YAML/JSON file, a bundle directory, or a built-in one
    (``builtin:sample``, ``builtin:demo``). ``rules`` (see :func:`parse_rules`) overrides
    the file's own: VERA-MH's for a TSV, the ``rules`` key (else ``carebench``) for YAML/JSON."""
    if str(path) in BUILTIN_RUBRICS:
        from importlib import resources

        name = BUILTIN_RUBRICS[str(path)]
        return rubric_from_yaml(Path(str(resources.files("carebench.converse.data").joinpath(name))), rules)
    if str(path).startswith("builtin:"):
        raise CarebenchError(f"unknown built-in rubric {str(path)!r} (known: {', '.join(BUILTIN_RUBRICS)})")
    path = Path(path)
    if path.is_dir():
        b = load_bundle(path).rubric
        return b if rules is None else replace(b, rules=parse_rules(rules))
    if not path.is_file():
        raise CarebenchError(f"{path}: rubric file not found")
    suffix = path.suffix.lower()
    if suffix in (".tsv", ".txt"):
        return rubric_from_tsv(path, rules)
    if suffix in (".yaml", ".yml"):
        return rubric_from_yaml(path, rules)
    if suffix == ".json":
        try:
            data = json.loads(read_text(path))
        except ValueError as e:
            raise CarebenchError(f"{path}:1:1: invalid JSON ({e})") from None
        return rubric_from_mapping(data, str(path), rules)
    raise CarebenchError(f"{path}: unsupported rubric file (use .tsv, .yaml or a bundle directory)")
