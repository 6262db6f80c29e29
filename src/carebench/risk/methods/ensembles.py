"""Multi-agent aggregation (Beyond the Flag, §4.3, Appendix I) and a learned combiner.

Components (Figure 5): the schema profiler (``schema``), moderation self-harm scores
(dataset columns, else the ``moderation`` model role), and the classifiers: by
default, as in "Beyond the Flag" §4.3, *different models* under the same clinical
prompt (``--model`` given three times, or roles ``voter1``..``voter3``); the three
prompt variants (clinical, conservative, contextual) on one model only when asked
for with ``voters=variants``. Every component call is the *identical* request its
standalone method (``schema``, ``llm``, ``llm-conservative`` ...) makes, so they
share the cache.

- ``vote``: majority of the classifiers' levels, ties to the higher level.
- ``schema-calibrated``: rule-based ordinal calibration of the profile level by
  the moderation level (see ``calibrated_level``).
- ``adjudicated``: an adjudicator (role ``adjudicator``) sees the post, the profile,
  the scores and the votes, and returns the final level.
- ``stacked``: multinomial logistic regression over the component outputs (vote
  one-hots, level probabilities, profile ratings, moderation scores, failure flags),
  fitted out-of-fold (stratified 5-fold, seed 42) or on ``ctx.train``.

Cost and tokens sum over every component call; latency is the critical path: the
components run in parallel (their slowest call), then the adjudicator (Table 3 note).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from carebench.engine.runner import Call
from carebench.risk.answers import parse_level_answer
from carebench.risk.methods.base import MethodContext, RiskItem, RiskPrediction, register
from carebench.risk.methods.folds import fit_predict_oof
from carebench.risk.methods.llm import (
    LetterMethod,
    LLMMethod,
    account,
    by_logits,
    check_decoding,
    letter_prediction,
    letter_request,
    run_calls,
    system_prompt,
)
from carebench.risk.methods.moderation import (
    CHANNELS,
    FIXED_THRESHOLDS,
    cut,
    fixed_signal,
    moderation_request,
)
from carebench.risk.methods.schema import (
    DIMENSIONS,
    SchemaMethod,
)
from carebench.risk.prompts import load_prompt, render
from carebench.risk.scale import LETTERS, LEVEL_NAMES, K
from carebench.types import CarebenchError, Completion, Message

DEFAULT_VARIANTS = ("clinical", "conservative", "contextual")


# -- components -----------------------------------------------------------------------
@dataclass
class Evidence:
    """Everything the components said about one item."""

    votes: list[RiskPrediction] = field(default_factory=list)
    schema: RiskPrediction | None = None
    moderation: dict[str, float] | None = None
    moderation_source: str = "unavailable"  # column | model spec | unavailable
    moderation_comp: Completion | None = None

    def completions(self) -> list[Completion | None]:
        return [self.moderation_comp] if self.moderation_comp is not None else []

    def critical_path(self) -> float:
        """The components run side by side: the slowest one bounds the stage."""
        lat = [p.latency_s for p in self.votes] + ([self.schema.latency_s] if self.schema else [])
        if self.moderation_comp is not None:
            lat.append(self.moderation_comp.latency_s)
        return max(lat, default=0.0)

    def preds(self) -> list[RiskPrediction]:
        return self.votes + ([self.schema] if self.schema is not None else [])

    def summary(self) -> dict[str, Any]:
        return {
            "votes": [LETTERS[p.level] if p.level is not None else None for p in self.votes],
            "voters": [p.method for p in self.votes],
            "vote_status": [p.status for p in self.votes],
            "schema_status": self.schema.status if self.schema else None,
            "moderation": self.moderation,
            "moderation_source": self.moderation_source,
        }


PANELS = ("models", "variants")


def voter_roles(ctx: MethodContext) -> list[str]:
    """The run's voter roles ``voter1``, ``voter2``, ... in order."""
    found = [r for r in ctx.models if r.startswith("voter") and r[5:].isdigit()]
    return sorted(found, key=lambda r: int(r[5:]))


def voter_methods(ctx: MethodContext, voters: str | Sequence[str] | None = None,
                  variants: Sequence[str] | None = None, decoding: str = "plain",
                  method: str = "vote") -> list[LLMMethod]:
    """The classifiers of the vote (§4.3: different models under the same clinical prompt).

    ``voters``: ``None``/``"models"`` = the voter models of the run (``--model`` given
    several times, or roles ``voter1``..); a list = those roles; ``"variants"`` (or
    giving ``variants``) = the prompt-variant panel on one model, only when asked for.
    Never a silent fallback: three prompts on one model are not three voters.
    """
    if voters == "variants" or variants is not None:
        return [LLMMethod(variant=v, role="default", decoding=decoding)
                for v in (variants or DEFAULT_VARIANTS)]
    if voters is None or voters == "models":
        roles = voter_roles(ctx)
        if len(roles) < 2:
            raise CarebenchError(
                f"{method}: the voters are different models under one clinical prompt "
                "(Beyond the Flag, §4.3): pass --model three times (or roles voter1..voter3); "
                f"for the prompt-variant panel on one model use {method}:voters=variants")
    else:
        roles = [voters] if isinstance(voters, str) else list(voters)
        missing = [r for r in roles if r not in ctx.models]
        if missing:  # never fall back silently: three copies of one model are not three voters
            raise CarebenchError(f"no model given for voter role(s) {', '.join(missing)}")
    return [LLMMethod(variant="clinical", role=r, name=f"llm@{r}", decoding=decoding)
            for r in roles]


def panel_of(ctx: MethodContext, voters: list[LLMMethod]) -> dict[str, Any]:
    """What the report says about the panel: which kind, and its members."""
    if all(v.role == "default" for v in voters):
        return {"kind": "variants", "model": str(ctx.model().spec),
                "members": [v.variant for v in voters]}
    return {"kind": "models", "prompt": "clinical",
            "members": [str(ctx.model(v.role).spec) for v in voters]}


class Components:
    """Builds, runs (as one batch) and decodes the component calls for a set of items."""

    def __init__(self, votes: bool = True, schema: bool = True, moderation: bool = True,
                 voters: str | Sequence[str] | None = None,
                 variants: Sequence[str] | None = None, decoding: str = "plain",
                 method: str = "vote"):
        self.want_votes, self.want_schema, self.want_moderation = votes, schema, moderation
        self.voters, self.variants, self.decoding, self.method = voters, variants, decoding, method
        self.panel: dict[str, Any] | None = None

    def _plan(self, items: Sequence[RiskItem], ctx: MethodContext):
        voters = (voter_methods(ctx, self.voters, self.variants, self.decoding, self.method)
                  if self.want_votes else [])
        self.panel = panel_of(ctx, voters) if voters else None
        schema = SchemaMethod(role="schema") if self.want_schema else None
        parts: list[tuple[Any, list[Call]]] = [(v, v.calls(items, ctx)) for v in voters]
        if schema is not None:
            parts.append((schema, schema.calls(items, ctx)))
        mod_model = ctx.models.get("moderation") if self.want_moderation else None
        need = [i for i, it in enumerate(items) if not _has_scores(it)] if self.want_moderation else []
        mod_calls = [Call(mod_model, moderation_request(items[i].text), ("moderation", items[i].id))
                     for i in need] if mod_model is not None else []
        return voters, schema, parts, need, mod_calls, mod_model

    def calls(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[Call]:
        _, _, parts, _, mod_calls, _ = self._plan(items, ctx)
        return [c for _, cs in parts for c in cs] + mod_calls

    def gather(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[Evidence]:
        items = list(items)
        _, schema, parts, need, mod_calls, mod_model = self._plan(items, ctx)
        flat = [c for _, cs in parts for c in cs] + mod_calls
        comps = run_calls(ctx, flat)
        ev = [Evidence() for _ in items]
        pos = 0
        for method, cs in parts:
            chunk = comps[pos: pos + len(cs)]
            preds = method.decode(items, cs, chunk, ctx)
            pos += len(cs)
            for e, p in zip(ev, preds, strict=True):
                if method is schema:
                    e.schema = p
                else:
                    e.votes.append(p)
        for i, it in enumerate(items):
            if _has_scores(it):
                ev[i].moderation = {c: float(it.scores[c]) for c in CHANNELS}
                ev[i].moderation_source = "column"
        if mod_model is not None:
            for i, comp in zip(need, comps[pos:], strict=True):
                ev[i].moderation_comp = comp
                ev[i].moderation_source = str(mod_model.spec)
                s = (comp.extra or {}).get("scores") if comp is not None and comp.ok else None
                if s:
                    ev[i].moderation = {c: float(s[c]) for c in CHANNELS}
        return ev


def _has_scores(item: RiskItem) -> bool:
    return all(c in item.scores for c in CHANNELS)


def _finish(pred: RiskPrediction, ev: Evidence, extra: Sequence[Completion | None] = (),
            extra_latency: float = 0.0) -> RiskPrediction:
    """Sum tokens and cost over every component call; latency = critical path."""
    comps_cost = sum(p.cost_usd for p in ev.preds()) + sum(
        c.cost_usd for c in [*ev.completions(), *extra] if c is not None)
    account(pred, [*ev.completions(), *extra], latency_s=ev.critical_path() + extra_latency)
    for p in ev.preds():
        pred.usage = pred.usage + p.usage
        pred.n_calls += p.n_calls
    pred.cost_usd = comps_cost
    pred.priced = pred.priced and all(p.priced for p in ev.preds())
    pred.detail.update(ev.summary())
    if ev.schema is not None and ev.schema.profile is not None:
        pred.profile = ev.schema.profile
    return pred


NO_SCORES_CALIBRATED = ("no moderation scores (no score columns, no --moderation-model, or the "
                        "call failed): the profile level stood uncorroborated, as in 'schema'")
NO_SCORES_ADJUDICATOR = "no moderation scores: the adjudicator was told they were not available"
NO_PROFILE_ADJUDICATOR = "no clinical profile: the adjudicator was told it was not available"


def warn(pred: RiskPrediction, text: str) -> None:
    """Record missing evidence on a prediction; the report counts these per method."""
    pred.detail.setdefault("warnings", []).append(text)


def _failure_status(preds: Sequence[RiskPrediction]) -> str:
    """The commonest non-ok status among failed components (first seen on ties)."""
    bad = [p.status for p in preds if p.status != "ok"]
    return Counter(bad).most_common(1)[0][0] if bad else "error"


# -- aggregation rules ------------------------------------------------------------------
def majority_vote(levels: Sequence[int | None]) -> int | None:
    """Most frequent level among the valid votes; ties go to the higher level.

    Failed voters abstain; with no valid vote there is no level.
    """
    counts = Counter(lvl for lvl in levels if lvl is not None)
    if not counts:
        return None
    top = max(counts.values())
    return max(lvl for lvl, c in counts.items() if c == top)


def moderation_level(scores: dict[str, float] | None) -> int | None:
    """The §4.1 fixed-threshold level of the moderation scores."""
    return None if scores is None else int(cut([fixed_signal(scores)], FIXED_THRESHOLDS)[0])


def calibrated_level(schema_level: int, mod_level: int | None) -> int:
    """Rule-based ordinal calibration of the profile level by the moderation level.

    The clinical profile sets the level. The moderation signal is coarse (it separates
    low from high severity but over-calls Attempt), so it can only *corroborate*: when
    it sits two or more tiers away from the profile level, the level moves one tier
    towards it; nearer disagreement leaves the profile level unchanged. Without scores
    the profile level stands.
    """
    if mod_level is None or abs(mod_level - schema_level) < 2:
        return schema_level
    return schema_level + (1 if mod_level > schema_level else -1)


# -- methods ----------------------------------------------------------------------------
class _Ensemble:
    needs_model = True
    name = "ensemble"
    uses: ClassVar[dict[str, bool]] = {"votes": True, "schema": True, "moderation": True}

    def __init__(self, voters: str | Sequence[str] | None = None,
                 variants: Sequence[str] | None = None, name: str | None = None,
                 models: dict[str, str] | None = None, decoding: str = "plain"):
        """``voters``: ``models`` (default: the run's voter models), ``variants`` (the
        prompt-variant panel on one model) or a list of roles. ``models`` maps extra roles
        to model specs (e.g. ``{"voter1": "openai:gpt-4o-mini", ..., "adjudicator": ...}``)
        for configs that name the ensemble's models inline. ``decoding`` as for ``llm``."""
        from carebench.models.base import parse_spec

        if name:
            self.name = name
        if variants is not None and voters not in (None, "variants"):
            raise CarebenchError(f"{self.name}: give either voters (roles) or variants, not both")
        if variants is not None and len(variants) < 1:
            raise CarebenchError(f"{self.name}: variants must not be empty")
        if isinstance(voters, str) and voters not in PANELS:
            voters = [voters]
        for v in variants or ():
            system_prompt(v)  # an unknown variant fails before any call
        self.decoding = check_decoding(decoding)
        self.components = Components(voters=voters, variants=variants, decoding=decoding,
                                     method=self.name, **self.uses)
        self.model_specs = {str(r): parse_spec(str(s)) for r, s in (models or {}).items()}
        self._built: dict[str, Any] = {}

    def _with_models(self, ctx: MethodContext) -> MethodContext:
        if not self.model_specs:
            return ctx
        get = ctx.get_model or (ctx.run.model if ctx.run is not None else None)
        if get is not None:  # the run owns (and closes) the models
            return replace(ctx, models={**ctx.models, **{r: get(s) for r, s in self.model_specs.items()}})
        from carebench.models import get_model

        for role, spec in self.model_specs.items():
            if role not in self._built:
                self._built[role] = get_model(spec)
        return replace(ctx, models={**ctx.models, **self._built})

    def _close(self) -> None:
        import asyncio
        import contextlib

        for m in self._built.values():
            with contextlib.suppress(Exception):  # best effort: the results already exist
                asyncio.run(m.aclose())
        self._built.clear()

    def check(self, ctx: MethodContext) -> None:
        """Fail before any model call when the voter panel cannot be formed."""
        if self.components.want_votes:
            c = self.components
            voter_methods(self._with_models(ctx), c.voters, c.variants, c.decoding, c.method)

    def calls(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[Call]:
        return self._calls(list(items), self._with_models(ctx))

    def _calls(self, items: list[RiskItem], ctx: MethodContext) -> list[Call]:
        return self.components.calls(items, ctx)

    def predict(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        try:
            preds = self._predict(list(items), self._with_models(ctx))
        finally:
            self._close()
        for p in preds:  # the report says which panel voted and how answers were read
            p.detail["panel"] = self.components.panel
            p.detail["decoding"] = self.decoding
        return preds

    def _predict(self, items: list[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        raise NotImplementedError


@register("vote")
class VoteMethod(_Ensemble):
    """Majority of three classifiers, ties to the higher level (§4.3)."""

    name = "vote"
    uses: ClassVar[dict[str, bool]] = {"votes": True, "schema": False, "moderation": False}

    def _predict(self, items: list[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        out = []
        for it, ev in zip(items, self.components.gather(items, ctx), strict=True):
            level = majority_vote([p.level for p in ev.votes])
            raw = " ".join(LETTERS[p.level] if p.level is not None else "-" for p in ev.votes)
            if level is None:
                pred = RiskPrediction(it.id, self.name, None, status=_failure_status(ev.votes), raw=raw)
                pred.detail["error"] = "no voter gave a level"
            else:
                pred = RiskPrediction(it.id, self.name, level, raw=raw)
            out.append(_finish(pred, ev))
        return out


@register("schema-calibrated")
class SchemaCalibratedMethod(_Ensemble):
    """Profile level, corroborated by the moderation scores (``calibrated_level``)."""

    name = "schema-calibrated"
    uses: ClassVar[dict[str, bool]] = {"votes": False, "schema": True, "moderation": True}

    def _predict(self, items: list[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        out = []
        for it, ev in zip(items, self.components.gather(items, ctx), strict=True):
            sp = ev.schema
            assert sp is not None
            if sp.level is None:
                pred = RiskPrediction(it.id, self.name, None, status=sp.status, raw=sp.raw)
                pred.detail["error"] = f"schema: {sp.detail.get('error')}"
            else:
                m = moderation_level(ev.moderation)
                level = calibrated_level(sp.level, m)
                pred = RiskPrediction(it.id, self.name, level, raw=sp.raw)
                pred.detail.update(schema_level=sp.level, moderation_level=m)
                if ev.moderation is None:
                    warn(pred, NO_SCORES_CALIBRATED)
            out.append(_finish(pred, ev))
        return out


def _fmt_profile(ev: Evidence) -> str:
    sp = ev.schema
    if sp is None or sp.profile is None:
        return f"not available ({sp.status if sp else 'not requested'})"
    return json.dumps({d: sp.profile[d] for d in DIMENSIONS}, separators=(", ", ": "))


def _fmt_moderation(ev: Evidence) -> str:
    if ev.moderation is None:
        return "not available"
    return ", ".join(f"{c} {ev.moderation[c]:.3f}" for c in CHANNELS)


def _fmt_votes(ev: Evidence) -> str:
    parts = []
    for i, p in enumerate(ev.votes, 1):
        said = f"{LETTERS[p.level]} ({LEVEL_NAMES[p.level]})" if p.level is not None else "no answer"
        parts.append(f"classifier {i}: {said}")
    return "; ".join(parts) if parts else "none"


def adjudicator_request(item: RiskItem, ev: Evidence, decoding: str = "plain"):
    user = render("adjudicator_user", post=item.text, profile=_fmt_profile(ev),
                  moderation=_fmt_moderation(ev), votes=_fmt_votes(ev))
    return letter_request((Message("system", load_prompt("adjudicator")), Message("user", user)),
                          decoding=decoding)


@register("adjudicated")
class AdjudicatedMethod(_Ensemble):
    """Full pipeline: components, then an adjudicator (role ``adjudicator``) decides."""

    name = "adjudicated"
    uses: ClassVar[dict[str, bool]] = {"votes": True, "schema": True, "moderation": True}
    plan_is_estimate = True  # adjudicator prompts depend on the components' answers

    def _calls(self, items: list[RiskItem], ctx: MethodContext) -> list[Call]:
        """Component calls plus placeholder adjudicator calls (their prompts depend on the
        components' answers, so these only size the cost estimate of a dry run)."""
        model = ctx.model("adjudicator")
        blank = Evidence()
        return self.components.calls(items, ctx) + [
            Call(model, adjudicator_request(it, blank, self.decoding), (self.name, it.id, "estimate")) for it in items
        ]

    def _predict(self, items: list[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        evidence = self.components.gather(items, ctx)
        model = ctx.model("adjudicator")
        calls = [Call(model, adjudicator_request(it, ev, self.decoding), (self.name, it.id)) for it, ev in
                 zip(items, evidence, strict=True)]
        comps = run_calls(ctx, calls)
        preds = []
        for it, comp in zip(items, comps, strict=True):
            letter, err = (None, None)
            if comp is not None and comp.ok:
                letter, err = parse_level_answer(comp.text)
            preds.append(letter_prediction(it, self.name, comp, letter, err))
        # exact level probabilities from in-process adjudicators, as for any letter method
        LetterMethod(role="adjudicator")._add_choice_probs(calls, comps, preds, ctx)
        if self.decoding == "logits":
            for pred, comp in zip(preds, comps, strict=True):
                by_logits(pred, comp)
        out = []
        for pred, ev, comp in zip(preds, evidence, comps, strict=True):
            if ev.moderation is None:
                warn(pred, NO_SCORES_ADJUDICATOR)
            if ev.schema is None or ev.schema.profile is None:
                warn(pred, NO_PROFILE_ADJUDICATOR)
            lat = comp.latency_s if comp is not None else 0.0
            pred = _finish(pred, ev, extra=[comp], extra_latency=lat)
            pred.detail["adjudicator"] = str(model.spec)
            out.append(pred)
        return out


# -- stacking -----------------------------------------------------------------------------
def features(ev: Evidence) -> np.ndarray:
    """Component outputs as one numeric row; failures are zeros plus a flag, not gaps."""
    row: list[float] = []
    for p in ev.votes:
        onehot = [0.0] * K
        if p.level is not None:
            onehot[p.level] = 1.0
        probs = p.probs or p.detail.get("probs") or onehot
        row += onehot + [float(x) for x in probs] + [float(p.level is None)]
    sp = ev.schema
    if sp is not None and sp.profile is not None:
        row += [float(sp.profile[d]) for d in DIMENSIONS] + [0.0]
    else:
        row += [0.0] * len(DIMENSIONS) + [1.0]
    if ev.moderation is not None:
        row += [float(ev.moderation[c]) for c in CHANNELS] + [0.0]
    else:
        row += [0.0] * len(CHANNELS) + [1.0]
    return np.asarray(row, dtype=float)


def _all_failed(ev: Evidence) -> bool:
    return all(p.level is None for p in ev.preds()) and ev.moderation is None


@register("stacked")
class StackedMethod(_Ensemble):
    """Learned combiner over the components, fitted out-of-fold (Appendix I's next step).

    ``C`` is the inverse L2 strength; classes are balanced as in the supervised baselines.
    """

    name = "stacked"
    uses: ClassVar[dict[str, bool]] = {"votes": True, "schema": True, "moderation": True}

    def __init__(self, C: float = 1.0, class_weight: str | None = "balanced", **options: Any):
        super().__init__(**options)
        self.C = float(C)
        self.class_weight = class_weight

    def _calls(self, items: list[RiskItem], ctx: MethodContext) -> list[Call]:
        extra = list(ctx.train) if ctx.train is not None else []
        return self.components.calls(items + extra, ctx)

    def _fit_predict(self, X_tr: np.ndarray, y_tr: np.ndarray, X_te: np.ndarray, seed: int) -> np.ndarray:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        clf = make_pipeline(
            StandardScaler(),
            LogisticRegression(C=self.C, class_weight=self.class_weight, max_iter=2000,
                               random_state=seed),
        )
        clf.fit(X_tr, y_tr)
        out = np.zeros((len(X_te), K))
        out[:, clf.classes_] = clf.predict_proba(X_te)
        return out

    def _predict(self, items: list[RiskItem], ctx: MethodContext) -> list[RiskPrediction]:
        train = list(ctx.train) if ctx.train is not None else []
        evidence = self.components.gather(items + train, ctx)
        ev_items, ev_train = evidence[: len(items)], evidence[len(items):]
        X = np.vstack([features(e) for e in ev_items])
        X_train = np.vstack([features(e) for e in ev_train]) if train else X
        row_of_train = {id(it): i for i, it in enumerate(train)}
        row_of_item = {id(it): i for i, it in enumerate(items)}

        def fit_predict(tr: list[RiskItem], te: list[RiskItem], fold: int) -> np.ndarray:
            rows = [row_of_train[id(t)] for t in tr] if train else [row_of_item[id(t)] for t in tr]
            y = np.array([t.level for t in tr])
            return self._fit_predict(X_train[rows], y, X[[row_of_item[id(t)] for t in te]], ctx.seed)

        probs, fold_of, _ = fit_predict_oof(items, ctx, fit_predict)
        out = []
        for i, (it, ev) in enumerate(zip(items, ev_items, strict=True)):
            if _all_failed(ev):
                pred = RiskPrediction(it.id, self.name, None, status=_failure_status(ev.preds()))
                pred.detail["error"] = "every component failed"
            else:
                p = [float(x) for x in probs[i]]
                pred = RiskPrediction(it.id, self.name, int(np.argmax(probs[i])), probs=p,
                                  raw=json.dumps([round(x, 4) for x in p]))
            pred.detail["fold"] = int(fold_of[i])
            out.append(_finish(pred, ev))
        return out


__all__ = [
    "AdjudicatedMethod",
    "Components",
    "Evidence",
    "SchemaCalibratedMethod",
    "StackedMethod",
    "VoteMethod",
    "calibrated_level",
    "features",
    "majority_vote",
    "moderation_level",
    "voter_methods",
]
