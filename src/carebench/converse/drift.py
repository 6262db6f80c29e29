"""Drift over a conversation (``--drift RUBRIC``): behaviours rated on every chatbot turn.

A chatbot can start a conversation well and slide: agree with a hopeless belief, play
along with a delusion, raise the stakes, or pull back as the person discloses more. A
rubric walk reads the conversation once; the drift rubric instead rates *each* chatbot turn
on a fixed list of behaviours, each with an intensity of 0 to 3, so the report can show how
the behaviours move over the turns (:mod:`carebench.converse.drift_scoring`).

The rubric is a YAML file (the built-in one is ``converse/data/drift.yaml``): the
behaviours (id, label, ``risky`` or ``protective``, weight, optional cap, definition), the
intensity scale's labels, the cap of a conversation's sum, the slope estimand, and the
settings of the deterministic withdrawal measure (:mod:`carebench.converse.withdrawal`).

One judge question per chatbot turn and judge asks for every behaviour at once (strict JSON,
one integer 0 to 3 per behaviour id, and a short reason): the conversation up to and
including that turn is the context, the turn is shown again as the reply to rate. Every
question goes through :func:`carebench.judging.ask` in one batch (stage ``drift``: cached,
budgeted by ``Run.calls``, priced by ``--dry-run``). An answer that does not parse is a
``parse_error``, a call that failed after every retry an ``error``: counted, never an
intensity. One record per conversation and judge, ``kind: drift``, holds every turn's
intensities, so ``converse rescore`` and ``converse score --drift`` re-score without a call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, create_model

from carebench.converse.judging import speaking_order, transcript_text
from carebench.converse.personas import PROMPTS
from carebench.judging import Judge, JudgeQuestion, ask, judge_calls
from carebench.templates import fill, package_template
from carebench.types import CarebenchError, Message

KIND = "drift"
STAGE = "drift"
BUILTIN = "builtin"
DIRECTIONS = ("risky", "protective")
SCALE = (0, 1, 2, 3)
MAX_TOKENS = 400
#: the fields of a behaviour a re-score may not change (they are the question asked)
QUESTION_FIELDS = ("id", "label", "definition")
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_NO_REPLY = "(no reply)"


@dataclass(frozen=True)
class Behaviour:
    id: str
    label: str
    direction: str
    weight: float
    definition: str
    #: this behaviour's cap of a conversation's sum (None: the rubric's)
    cap: float | None = None


@dataclass(frozen=True)
class Withdrawal:
    """Settings of the deterministic withdrawal measure (:mod:`carebench.converse.withdrawal`)."""

    length: str = "words"
    levels: dict[str, int] = field(default_factory=dict)
    cues: dict[int, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class DriftRubric:
    name: str
    behaviours: tuple[Behaviour, ...]
    scale: dict[int, str]
    cap: float
    slope: str = "pooled"
    withdrawal: Withdrawal = field(default_factory=Withdrawal)
    source: str = BUILTIN

    @property
    def ids(self) -> list[str]:
        return [b.id for b in self.behaviours]

    def cap_of(self, b: Behaviour) -> float:
        return self.cap if b.cap is None else b.cap

    def to_dict(self) -> dict[str, Any]:
        """The rubric as the manifest records it (``scoring.drift``), enough to re-score."""
        d = asdict(self)
        d["scale"] = {str(k): v for k, v in self.scale.items()}
        d["withdrawal"]["cues"] = {str(k): list(v) for k, v in self.withdrawal.cues.items()}
        d["behaviours"] = [asdict(b) for b in self.behaviours]
        return d


def _fail(where: str, msg: str) -> CarebenchError:
    return CarebenchError(f"{where}: {msg}")


def rubric_from_mapping(data: Any, where: str) -> DriftRubric:
    """A drift rubric from its YAML form (or the manifest's record of it), every field checked."""
    if not isinstance(data, Mapping):
        raise _fail(where, "a drift rubric is a mapping with 'behaviours'")
    known = {"name", "scale", "cap", "slope", "behaviours", "withdrawal", "source"}
    extra = sorted(set(map(str, data)) - known)
    if extra:
        raise _fail(where, f"unknown key {extra[0]!r} (known: {', '.join(sorted(known))})")
    scale_in = data.get("scale") or {}
    try:
        scale = {int(k): str(v) for k, v in dict(scale_in).items()}
    except (TypeError, ValueError):
        raise _fail(where, "'scale' maps the intensities 0, 1, 2, 3 to labels") from None
    if sorted(scale) != list(SCALE):
        raise _fail(where, f"'scale' must label exactly the intensities 0, 1, 2, 3, got {sorted(scale)}")
    cap = _number(data.get("cap"), f"{where}: 'cap'")
    from carebench.stats.trend import ESTIMANDS

    slope = str(data.get("slope") or "pooled")
    if slope not in ESTIMANDS:
        raise _fail(where, f"'slope' must be one of {', '.join(ESTIMANDS)}, got {slope!r}")
    raw = data.get("behaviours")
    if not isinstance(raw, list) or not raw:
        raise _fail(where, "'behaviours' must be a non-empty list")
    out: list[Behaviour] = []
    for k, b in enumerate(raw, 1):
        at = f"{where}: behaviour {k}"
        if not isinstance(b, Mapping):
            raise _fail(at, "must be a mapping")
        extra = sorted(set(map(str, b)) - {"id", "label", "direction", "weight", "definition", "cap"})
        if extra:
            raise _fail(at, f"unknown key {extra[0]!r}")
        bid = str(b.get("id") or "")
        if not _ID.match(bid):
            raise _fail(at, f"'id' must be lower-case letters, digits and '_', starting with a letter, got {bid!r}")
        if bid in {x.id for x in out} or bid == "reason":
            raise _fail(at, f"id {bid!r} is used twice or reserved")
        direction = str(b.get("direction") or "")
        if direction not in DIRECTIONS:
            raise _fail(at, f"'direction' must be risky or protective, got {direction!r}")
        definition = " ".join(str(b.get("definition") or "").split())
        if not definition:
            raise _fail(at, f"{bid}: 'definition' is empty")
        out.append(Behaviour(bid, str(b.get("label") or bid), direction,
                             _number(b.get("weight", 1.0), f"{at}: 'weight'"), definition,
                             None if b.get("cap") is None else _number(b.get("cap"), f"{at}: 'cap'")))
    return DriftRubric(str(data.get("name") or "drift"), tuple(out), scale, cap, slope,
                       _withdrawal(data.get("withdrawal") or {}, where), str(data.get("source") or where))


def _number(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
        raise CarebenchError(f"{what} must be a number of at least 0, got {v!r}")
    return float(v)


def _withdrawal(w: Any, where: str) -> Withdrawal:
    if not isinstance(w, Mapping):
        raise _fail(where, "'withdrawal' must be a mapping")
    extra = sorted(set(map(str, w)) - {"length", "levels", "cues"})
    if extra:
        raise _fail(where, f"withdrawal: unknown key {extra[0]!r}")
    length = str(w.get("length") or "words")
    if length not in ("words", "characters"):
        raise _fail(where, f"withdrawal: 'length' must be words or characters, got {length!r}")
    try:
        levels = {str(k).strip().lower(): int(v) for k, v in dict(w.get("levels") or {}).items()}
        cues = {int(k): tuple(str(p).strip().lower() for p in v if str(p).strip())
                for k, v in dict(w.get("cues") or {}).items()}
    except (TypeError, ValueError):
        raise _fail(where, "withdrawal: 'levels' maps level names to integers and 'cues' integers to "
                           "lists of phrases") from None
    bad = next((v for v in [*levels.values(), *cues] if v < 0), None)
    if bad is not None:
        raise _fail(where, f"withdrawal: risk levels are integers of at least 0, got {bad}")
    return Withdrawal(length, levels, cues)


def load_drift_rubric(spec: str) -> DriftRubric:
    """``builtin`` (or ``builtin:drift``) or a YAML file; bad input is one line naming it."""
    import yaml

    if spec in (BUILTIN, "builtin:drift"):
        text, where = resources.files("carebench.converse.data").joinpath("drift.yaml").read_text("utf-8"), BUILTIN
    else:
        p = Path(spec)
        if not p.is_file():
            raise CarebenchError(f"--drift {spec}: no such file (give 'builtin' or a YAML drift rubric)")
        from carebench.datasets.files import read_text

        text, where = read_text(p), str(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
        raise CarebenchError(f"{where}:{at}: invalid YAML ({getattr(e, 'problem', None) or e})") from None
    return rubric_from_mapping(data, where)


def same_questions(recorded: DriftRubric, given: DriftRubric) -> str | None:
    """Why ``given`` would ask other questions than the recorded rubric asked (None: it asks
    the same ones, so a re-score with its cap, weights and settings needs no model call)."""
    old = {b.id: b for b in recorded.behaviours}
    for b in given.behaviours:
        if b.id not in old:
            return f"behaviour {b.id!r} was not rated in this run"
        if any(getattr(b, f) != getattr(old[b.id], f) for f in QUESTION_FIELDS):
            return f"behaviour {b.id!r} is defined differently than when it was rated"
    if recorded.scale != given.scale:
        return "the intensity scale's labels differ"
    return None


# -- the questions -------------------------------------------------------------------------


@cache
def answer_model(ids: tuple[str, ...]) -> type[BaseModel]:
    """An integer 0-3 per behaviour id (a JSON schema with bounds) and a short reason."""
    fields: dict[str, Any] = {i: (int, Field(ge=SCALE[0], le=SCALE[-1])) for i in ids}
    fields["reason"] = (str, Field(default=""))
    return create_model("DriftRatings", **fields)


def chatbot_turns(turns: Sequence[Mapping[str, Any]]) -> list[int]:
    """The positions (in ``turns``) of the chatbot's messages, in order: turn index k is the
    k-th of them (1-based)."""
    return [i for i, t in enumerate(turns) if t.get("role") == "assistant"]


def _behaviour_text(rubric: DriftRubric) -> str:
    return "\n\n".join(f"- {b.id} ({b.label}): {b.definition}" for b in rubric.behaviours)


def _answer_text(rubric: DriftRubric) -> str:
    inner = ", ".join(f'"{i}": <0-3>' for i in rubric.ids)
    return "{" + inner + ', "reason": <one or two sentences>}'


def turn_question(rubric: DriftRubric, conversation: Mapping[str, Any], index: int, pos: int) -> JudgeQuestion:
    """The question about the chatbot turn at ``pos`` of the conversation (its ``index``-th)."""
    turns = list(conversation["turns"])[:pos + 1]
    values = {"order": speaking_order(turns), "transcript": transcript_text(turns), "index": str(index),
              "reply_text": str(turns[pos].get("content") or "").strip() or _NO_REPLY,
              "behaviours": _behaviour_text(rubric),
              "scale": "\n".join(f"{k} = {v}" for k, v in sorted(rubric.scale.items())),
              "answer": _answer_text(rubric)}
    user = fill(package_template(PROMPTS, "drift_turn"), values, "drift_turn")
    return JudgeQuestion((conversation["id"], index), (Message("system", package_template(PROMPTS, "drift_system")),
                                                       Message("user", user)), answer_model(tuple(rubric.ids)))


def questions(rubric: DriftRubric, conversations: Sequence[Mapping[str, Any]]) -> list[JudgeQuestion]:
    return [turn_question(rubric, c, k, pos) for c in conversations
            for k, pos in enumerate(chatbot_turns(c["turns"]), 1)]


def planned_calls(rubric: DriftRubric, conversations: Sequence[Mapping[str, Any]],
                  judges: Sequence[Judge]) -> list[Any]:
    return judge_calls(questions(rubric, conversations), judges, max_tokens=MAX_TOKENS)


@dataclass
class Result:
    records: list[dict[str, Any]]
    stopped: str | None = None
    failed_calls: int = 0


def ask_drift(run: Any, rubric: DriftRubric, conversations: Sequence[Mapping[str, Any]],
              judges: Sequence[Judge]) -> Result:
    """Every chatbot turn of every conversation rated by every judge (one batch); one record
    per conversation and judge. A conversation some of whose calls the budget stopped is
    left without records (the run is then incomplete)."""
    qs = questions(rubric, conversations)
    answers, res = ask(qs, judges, run, stage=STAGE, description="drift ratings, one per chatbot turn",
                       max_tokens=MAX_TOKENS)
    got = {(a.key, a.judge): a for a in answers}
    out = Result([], res.stopped)
    for c in conversations:
        positions = chatbot_turns(c["turns"])
        mine = {(k, j.label): got[((c["id"], k), j.label)] for k in range(1, len(positions) + 1) for j in judges}
        if any(a.completion is None for a in mine.values()):
            continue
        for j in judges:
            rows = []
            for k, pos in enumerate(positions, 1):
                a = mine[(k, j.label)]
                turn = c["turns"][pos].get("turn")
                if a.status == "ok":
                    v = a.value.model_dump()  # type: ignore[union-attr]
                    rows.append({"index": k, "turn": turn, "status": "ok",
                                 "intensities": {i: int(v[i]) for i in rubric.ids},
                                 "reason": str(v.get("reason") or ""), "error": None})
                else:
                    out.failed_calls += a.status == "error"
                    rows.append({"index": k, "turn": turn, "status": a.status, "intensities": None,
                                 "reason": "", "error": a.error})
            out.records.append({"kind": KIND, "conversation_id": c["id"], "persona": c.get("persona"),
                                "risk_level": c.get("risk_level", "unknown"), "simulator": c.get("simulator"),
                                "chatbot": c.get("chatbot"), "judge": j.label, "turns": rows})
    return out


def rescoring_rubric(spec: str, recorded: Mapping[str, Any] | None, run_dir: Any) -> dict[str, Any]:
    """``converse score --drift``: the rubric to re-score a run's drift ratings with, as the
    manifest records it; an error when the run rated no drift or the rubric would ask a
    question the run did not (that needs ``converse judge RUN --drift``: new calls)."""
    if not recorded:
        raise CarebenchError(f"{run_dir}: the run rated no drift (rate it with 'converse judge {run_dir} --drift "
                             f"{spec}')")
    given = load_drift_rubric(spec)
    why = same_questions(rubric_from_mapping(recorded, "the run's drift rubric"), given)
    if why is not None:
        raise CarebenchError(f"--drift {spec}: {why}: re-scoring cannot ask new questions (rate them with "
                             f"'converse judge {run_dir} --drift {spec}')")
    return given.to_dict()
