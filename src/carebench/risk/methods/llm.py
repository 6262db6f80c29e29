"""Prompted LLM classifiers (Beyond the Flag, §4.2, Appendices G, L, M).

- ``llm``: zero-shot clinical rubric, one level letter back; prompt ``variant`` is
  ``clinical`` (default), ``conservative`` (escalate when torn between neighbours) or
  ``contextual`` (weigh urgency, time, means, protective factors). Also registered as
  ``llm-conservative`` and ``llm-contextual``.
- ``llm-cot``: the rubric, brief reasoning, then a ``FINAL: X`` line (only that line
  is read; a cut-off answer is a ``truncated`` failure, never a guess).
- ``llm-few-shot``: k exemplars, class-interleaved, from a held-out pool of the
  shortest posts per level (16 per level: 64, Appendix G); pool items are *not
  predicted*: ``predict`` returns predictions for non-pool items only, every one
  carrying the pool ids in ``detail["pool_ids"]``, and ``excluded_ids`` lists them.

Where the provider returns log probabilities each level's probability is recorded
(normalised over a-d, at the answer's token). For in-process models that offer
``choice_probabilities`` (llama.cpp) the probabilities are the exact softmax over the
four letters' logits instead; the level always comes from the parsed answer. A failed call or unparsable answer is a
``RiskPrediction`` with a non-ok status and the raw text, never dropped.

The request builders here are also the components of the ensembles: an ensemble
issuing the same prompt builds the identical ``ChatRequest`` and so shares the cached
answer with the standalone method.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from carebench.engine.runner import Call
from carebench.models.structured import choice_spec
from carebench.risk.answers import parse_final_line, parse_level_answer
from carebench.risk.methods.base import (
    HARNESS_FAILURE,
    MethodContext,
    RiskItem,
    RiskPrediction,
    register,
)
from carebench.risk.prompts import join, render
from carebench.risk.scale import LETTERS, K, letter_to_level
from carebench.types import (
    CarebenchError,
    ChatRequest,
    Completion,
    Message,
    Usage,
    label_probabilities,
)

VARIANTS = ("clinical", "conservative", "contextual")
#: How the level is read (§4.2 asks for one letter and nothing else, so ``plain`` is the
#: default and identical for every provider); the others are explicit method options:
#: ``json`` constrains the answer to ``{"answer": "a".."d"}`` (JSON schema, or a grammar
#: for llama.cpp), ``logits`` takes the most probable of the four letter tokens.
DECODINGS = ("plain", "json", "logits")
#: room for a letter, or the ``{"answer": "x"}`` object a JSON-schema server returns
LETTER_MAX_TOKENS = 20
COT_MAX_TOKENS = 1024
#: Appendix G: 16 exemplars per level held out (pool of 64)
POOL_PER_LEVEL = 16
#: Appendix M: the reported few-shot arm uses eight exemplars
DEFAULT_K = 8


# -- shared plumbing (also used by schema and ensembles) ------------------------------
def run_calls(ctx: MethodContext, calls: Sequence[Call]) -> list[Completion | None]:
    """Completions for ``calls`` in order through the run (which makes each distinct call
    once and counts it against the run's budget). ``None`` = not made (budget)."""
    if not calls:
        return []
    return ctx.calls(calls).completions


def call_status(comp: Completion | None) -> str:
    """Prediction status of a call that produced no usable text (or ``ok``); a call that
    failed every retry is ``harness_failure`` (not the model's answer: never scored)."""
    if comp is None:
        return "budget"
    return HARNESS_FAILURE if comp.harness_failure else comp.status


def account(
    pred: RiskPrediction, comps: Sequence[Completion | None], latency_s: float | None = None
) -> RiskPrediction:
    """Fill usage, cost, call count and latency (default: the sum, i.e. sequential calls)."""
    made = [c for c in comps if c is not None]
    usage = Usage()
    for c in made:
        usage = usage + c.usage
    pred.usage = usage
    pred.cost_usd = sum(c.cost_usd for c in made)
    pred.priced = all(c.priced for c in made)
    pred.n_calls = len(made)
    pred.latency_s = sum(c.latency_s for c in made) if latency_s is None else latency_s
    pred.queue_wait_s = sum(c.queue_wait_s for c in made if not c.cached)
    return pred


def failed(
    item: RiskItem, method: str, comp: Completion | None, status: str, error: str
) -> RiskPrediction:
    pred = RiskPrediction(item.id, method, None, status=status, raw=comp.text if comp else "")
    pred.detail["error"] = error
    return account(pred, [comp])


def _normalise(probs: dict[str, float] | Sequence[float] | None) -> list[float] | None:
    """Per-level probabilities as a list summing to 1 (or None when unusable)."""
    if probs is None:
        return None
    vals = (
        [float(probs.get(lab, 0.0)) for lab in LETTERS]
        if isinstance(probs, dict)
        else [float(p) for p in probs]
    )
    if len(vals) != K or any(not math.isfinite(v) or v < 0 for v in vals) or sum(vals) <= 0:
        return None
    total = sum(vals)
    return [v / total for v in vals]


def answer_probabilities(comp: Completion) -> list[float] | None:
    """Level probabilities at the token that spells the answer letter.

    Starting at the first generated token that *is* a letter a-d (not the first
    position where a letter merely appears among alternatives) keeps a JSON wrapper
    such as ``{"answer": "b"}`` from being read at its opening brace.
    """
    if not comp.logprobs:
        return None
    for i, tok in enumerate(comp.logprobs):
        if tok.token.strip().lower() in LETTERS:
            return _normalise(label_probabilities(comp.logprobs[i:], LETTERS))
    return None


def exact_letter_probabilities(comp: Completion | None) -> list[float] | None:
    """Softmax over the four letter tokens themselves at the answer position, or None.

    Only the exact tokens ``a``..``d`` count (no " A"-style variants), which makes this
    the same number an in-process model's ``choice_probabilities`` computes from the
    letters' logits; None when a letter is missing from the recorded alternatives.
    """
    if comp is None or not comp.logprobs:
        return None
    for tok in comp.logprobs:
        if tok.token in LETTERS:
            cands = {**tok.top, tok.token: tok.logprob}
            if not all(lab in cands for lab in LETTERS):
                return None
            return _normalise({lab: math.exp(cands[lab]) for lab in LETTERS})
    return None


def first_token_letter_probabilities(comp: Completion | None) -> list[float] | None:
    """The four letters' probabilities among the alternatives at the first generated token
    (the answer slot when the text itself does not start with a letter), or None."""
    if comp is None or not comp.logprobs:
        return None
    first = comp.logprobs[0]
    cands = {**first.top, first.token: first.logprob}
    if not all(lab in cands for lab in LETTERS):
        return None
    return _normalise({lab: math.exp(cands[lab]) for lab in LETTERS})


def _set_probs(pred: RiskPrediction, probs: list[float]) -> None:
    """Probabilities belong to a scored level; on a failure they are only evidence."""
    if pred.status == "ok":
        pred.probs = probs
    else:
        pred.detail["probs"] = probs
        pred.detail["argmax"] = int(max(range(K), key=probs.__getitem__))


def letter_prediction(
    item: RiskItem, method: str, comp: Completion | None, letter: str | None, error: str | None
) -> RiskPrediction:
    """A prediction from one letter-answer call (``letter`` None = parse failure)."""
    status = call_status(comp)
    if status != "ok":
        err = f"no answer ({status}{': ' + comp.error if comp is not None and comp.error else ''})"
        return failed(item, method, comp, status, err)
    assert comp is not None
    probs = answer_probabilities(comp)
    if letter is None:
        pred = failed(item, method, comp, "parse_error", error or "no level letter in the answer")
        if probs is not None:
            _set_probs(pred, probs)
        return pred
    pred = RiskPrediction(item.id, method, letter_to_level(letter), raw=comp.text, probs=probs)
    return account(pred, [comp])


# -- prompts ------------------------------------------------------------------------
def system_prompt(variant: str = "clinical") -> str:
    """The rubric, the variant's addendum (if any), then the one-letter instruction."""
    if variant not in VARIANTS:
        raise CarebenchError(
            f"unknown llm prompt variant {variant!r}; known: {', '.join(VARIANTS)}"
        )
    parts = (
        ["rubric"] + ([] if variant == "clinical" else [f"variant_{variant}"]) + ["answer_letter"]
    )
    return join(*parts)


def post_message(text: str) -> str:
    return render("post", post=text)


def check_decoding(decoding: str) -> str:
    if decoding not in DECODINGS:
        raise CarebenchError(f"unknown decoding {decoding!r}; known: {', '.join(DECODINGS)}")
    return decoding


def letter_request(msgs: tuple[Message, ...], max_tokens: int = LETTER_MAX_TOKENS,
                   decoding: str = "plain") -> ChatRequest:
    """Deterministic one-letter request asking for level log probabilities when available.

    Only ``decoding="json"`` constrains the output; the plain request is the paper's.
    """
    return ChatRequest(
        messages=msgs,
        temperature=0.0,
        max_tokens=max_tokens,
        logprobs=True,
        top_logprobs=10,
        structured=choice_spec(LETTERS) if check_decoding(decoding) == "json" else None,
    )


def by_logits(pred: RiskPrediction, comp: Completion | None) -> None:
    """``decoding=logits``: the level is the most probable letter token, not the text.

    Only answered calls qualify; without level probabilities the item fails (never a
    guess from the text, which would silently mix two protocols).
    """
    if comp is None or not comp.ok:
        return
    probs = (pred.probs or pred.detail.get("probs") or exact_letter_probabilities(comp)
             or first_token_letter_probabilities(comp))
    if probs is None:
        pred.level, pred.status, pred.probs = None, "parse_error", None
        pred.detail["error"] = "decoding=logits: no probabilities for the letters a-d"
        return
    pred.detail.pop("error", None)
    pred.detail.pop("probs", None)
    pred.detail.pop("argmax", None)
    pred.detail["parsed_text_level"] = pred.level
    pred.probs = list(probs)
    pred.level = int(max(range(K), key=probs.__getitem__))
    pred.status = "ok"


def _probs_supported(model: Any) -> bool:
    return callable(getattr(model, "choice_probabilities", None))


async def _choice_probs(model: Any, requests: Sequence[ChatRequest]) -> list[Any]:
    return [await model.choice_probabilities(r, LETTERS) for r in requests]  # in-process: serial


# -- methods ------------------------------------------------------------------------
class LetterMethod:
    """Base of one-call-per-item methods whose answer is a level letter."""

    needs_model = True
    name = "llm"

    def __init__(
        self,
        role: str = "default",
        max_tokens: int | None = None,
        choice_probs: bool = True,
        name: str | None = None,
        decoding: str = "plain",
    ):
        self.role = role
        self.max_tokens = max_tokens
        self.choice_probs = choice_probs
        self.decoding = check_decoding(decoding)
        if name:
            self.name = name

    def messages(self, item: RiskItem, ctx: MethodContext) -> tuple[Message, ...]:
        raise NotImplementedError

    def request(self, item: RiskItem, ctx: MethodContext) -> ChatRequest:
        return letter_request(self.messages(item, ctx), self.max_tokens or LETTER_MAX_TOKENS,
                              self.decoding)

    def scored(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[RiskItem]:
        """The items this method predicts (all, except for few-shot's exemplar pool)."""
        return list(items)

    def calls(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[Call]:
        model = ctx.model(self.role)
        return [
            Call(model, self.request(it, ctx), (self.name, it.id)) for it in self.scored(items, ctx)
        ]

    def parse(self, comp: Completion) -> tuple[str | None, str | None]:
        return parse_level_answer(comp.text)

    def decode(
        self,
        items: Sequence[RiskItem],
        calls: Sequence[Call],
        comps: Sequence[Completion | None],
        ctx: MethodContext,
    ) -> list[RiskPrediction]:
        """Predictions from this method's completions (``items`` = ``scored`` items)."""
        preds = []
        for it, comp in zip(items, comps, strict=True):
            letter, err = self.parse(comp) if comp is not None and comp.ok else (None, None)
            pred = letter_prediction(it, self.name, comp, letter, err)
            pred.detail["model"] = str(ctx.model(self.role).spec)
            pred.detail["decoding"] = self.decoding
            preds.append(pred)
        self._add_choice_probs(calls, comps, preds, ctx)
        if self.decoding == "logits":
            for comp, pred in zip(comps, preds, strict=True):
                by_logits(pred, comp)
        return preds

    def _add_choice_probs(
        self,
        calls: Sequence[Call],
        comps: Sequence[Completion | None],
        preds: list[RiskPrediction],
        ctx: MethodContext,
    ) -> None:
        """For in-process models (llama.cpp): the exact level distribution at the answer slot.

        The softmax over the four letter tokens' logits (``choice_probabilities``) is read
        from the answer's recorded log probabilities when all four letters are among them,
        and asked of the model (one more prompt evaluation) only when they are not. This
        replaces the tolerant reading, which also counts variants such as "A" or " a"
        that a grammar-constrained answer could never produce. The level still comes
        from the parsed answer; on a parse failure the argmax is only recorded in
        ``detail``, never substituted.
        """
        model = ctx.model(self.role)
        if not self.choice_probs or not _probs_supported(model):
            return
        todo = []
        for call, comp, pred in zip(calls, comps, preds, strict=True):
            if pred.status not in ("ok", "parse_error"):
                continue
            exact = exact_letter_probabilities(comp)
            if exact is not None:
                _set_probs(pred, exact)
            else:
                todo.append((call, pred))
        if not todo:
            return
        got = asyncio.run(_choice_probs(model, [c.request for c, _ in todo]))
        for (_, pred), raw in zip(todo, got, strict=True):
            probs = _normalise(raw)
            if probs is not None:
                _set_probs(pred, probs)

    def predict(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        scored = self.scored(items, ctx)
        calls = self.calls(items, ctx)
        return self.decode(scored, calls, run_calls(ctx, calls), ctx)


@register("llm")
class LLMMethod(LetterMethod):
    """Zero-shot clinical rubric; ``variant`` selects the prompt strategy (§4.2)."""

    def __init__(self, variant: str = "clinical", **options: Any):
        super().__init__(**options)
        system_prompt(variant)  # validate now: a bad option fails before any call
        self.variant = variant
        if "name" not in options:
            self.name = "llm" if variant == "clinical" else f"llm-{variant}"

    def messages(self, item: RiskItem, ctx: MethodContext) -> tuple[Message, ...]:
        return (
            Message("system", system_prompt(self.variant)),
            Message("user", post_message(item.text)),
        )

    def decode(self, items, calls, comps, ctx):
        preds = super().decode(items, calls, comps, ctx)
        for p in preds:
            p.detail["variant"] = self.variant
        return preds


@register("llm-conservative")
def _llm_conservative(**options: Any) -> LLMMethod:
    return LLMMethod(variant="conservative", **options)


@register("llm-contextual")
def _llm_contextual(**options: Any) -> LLMMethod:
    return LLMMethod(variant="contextual", **options)


@register("llm-cot")
class CoTMethod(LetterMethod):
    """Rubric + brief step-by-step reasoning, read only from the closing ``FINAL: X`` line."""

    name = "llm-cot"

    def __init__(self, **options: Any):
        super().__init__(**options)
        if self.decoding != "plain":  # the reasoning must be free text
            raise CarebenchError("llm-cot reads a FINAL line from free text: decoding must be plain")

    def messages(self, item: RiskItem, ctx: MethodContext) -> tuple[Message, ...]:
        return (Message("system", join("rubric", "cot")), Message("user", post_message(item.text)))

    def request(self, item: RiskItem, ctx: MethodContext) -> ChatRequest:
        # free text (no choice constraint: the reasoning must be allowed), greedy
        return ChatRequest(
            messages=self.messages(item, ctx),
            temperature=0.0,
            max_tokens=self.max_tokens or COT_MAX_TOKENS,
        )

    def parse(self, comp: Completion) -> tuple[str | None, str | None]:
        return parse_final_line(comp.text)


# -- few-shot -------------------------------------------------------------------------
def select_pool(
    items: Sequence[RiskItem], per_level: int = POOL_PER_LEVEL
) -> dict[int, list[RiskItem]]:
    """Appendix G: the ``per_level`` shortest items of each level (ties by id), shortest first."""
    pool: dict[int, list[RiskItem]] = {}
    for level in range(K):
        of_level = sorted(
            (it for it in items if it.level == level), key=lambda it: (len(it.text), it.id)
        )
        pool[level] = of_level[:per_level]
    return pool


def interleave(pool: dict[int, list[RiskItem]], k: int) -> list[RiskItem]:
    """The first ``k`` of a, b, c, d, a, b, c, d, ... taking each level's shortest first.

    Every k that is a multiple of 4 has equal numbers per level, and the k-shot set
    is nested in the 2k-shot set, so a sweep varies only k.
    """
    if k < 0:
        raise CarebenchError(f"few-shot k must be >= 0, got {k}")
    order: list[RiskItem] = []
    depth = max((len(v) for v in pool.values()), default=0)
    for i in range(depth):
        for level in range(K):
            if i < len(pool.get(level, [])):
                order.append(pool[level][i])
    if k > len(order):
        raise CarebenchError(f"few-shot k={k} exceeds the exemplar pool ({len(order)} items)")
    return order[:k]


@register("llm-few-shot")
class FewShotMethod(LetterMethod):
    """k exemplars (user post / assistant gold letter turns) before the post (Appendix G).

    The pool comes from ``ctx.train`` when given (transfer: every evaluation item is
    scored) and is otherwise held out of the evaluated items, which are then scored
    only outside the pool. With ``k=0`` the request is exactly ``llm``'s (shared cache).
    """

    name = "llm-few-shot"

    def __init__(self, k: int = DEFAULT_K, pool_per_level: int = POOL_PER_LEVEL, **options: Any):
        super().__init__(**options)
        if k < 0 or pool_per_level < 1:
            raise CarebenchError(
                f"few-shot needs k >= 0 and pool_per_level >= 1 (got {k}, {pool_per_level})"
            )
        self.k = int(k)
        self.pool_per_level = int(pool_per_level)
        self.excluded_ids: list[str] = []
        self._shots: list[RiskItem] = []

    def pool(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[RiskItem]:
        """The held-out exemplar pool, interleaved (its first k are the exemplars).

        Deterministic in the items, so every k of a sweep holds out the same pool.
        """
        source = ctx.train if ctx.train is not None else items
        by_level = select_pool(source, self.pool_per_level)
        pool = interleave(by_level, sum(len(v) for v in by_level.values()))
        self.excluded_ids = [] if ctx.train is not None else [it.id for it in pool]
        return pool

    def exemplars(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[RiskItem]:
        pool = self.pool(items, ctx)
        if self.k > len(pool):
            raise CarebenchError(
                f"few-shot k={self.k} exceeds the exemplar pool ({len(pool)} items)"
            )
        return pool[: self.k]

    def scored(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[RiskItem]:
        self.pool(items, ctx)  # sets excluded_ids
        held = set(self.excluded_ids)
        return [it for it in items if it.id not in held]

    def messages(self, item: RiskItem, ctx: MethodContext) -> tuple[Message, ...]:
        return fewshot_messages(item.text, self._shots)

    def calls(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[Call]:
        self._shots = self.exemplars(items, ctx)
        if items and not self.scored(items, ctx):
            raise CarebenchError(
                f"{self.name}: all {len(items)} items fall in the exemplar pool "
                f"({self.pool_per_level} per level); lower pool_per_level or draw the "
                "exemplars from another corpus with --train"
            )
        return super().calls(items, ctx)

    def decode(self, items, calls, comps, ctx):
        preds = super().decode(items, calls, comps, ctx)
        shots = [it.id for it in self._shots]
        for p in preds:
            p.detail.update(k=self.k, exemplar_ids=shots, pool_ids=list(self.excluded_ids))
        return preds


def fewshot_messages(text: str, shots: Sequence[RiskItem]) -> tuple[Message, ...]:
    """System rubric, then one user/assistant pair per exemplar, then the post."""
    msgs = [Message("system", system_prompt("clinical"))]
    for ex in shots:
        msgs.append(Message("user", post_message(ex.text)))
        msgs.append(Message("assistant", LETTERS[ex.level]))
    msgs.append(Message("user", post_message(text)))
    return tuple(msgs)
