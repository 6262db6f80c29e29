"""``carebench construct build``: screen -> route -> assign -> select -> rewrite -> judge
-> anonymize -> prompts, in one run directory.

Selection follows VEILED-SH §4.3: every rewriter configuration rewrites the same
seeded sample of rows (``selection_sample``) and is judged; gate-first selection
keeps the passing configurations; then every rewrite row gets a round-robin
configuration among them (rows from the sample reuse their cached calls) and is
judged; a rewrite failing any gate is not released (``drop_gate_failures``).
Nothing is written to ``prompts.jsonl`` unless every step finished.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from carebench.construct import anonymize as anon
from carebench.construct.calls import HARNESS_FAILURE, embedding_calls
from carebench.construct.command import ConstructCommand, ConstructOptions, Stages, run_command
from carebench.construct.config import BuildConfig
from carebench.construct.io import load_models, resolve
from carebench.construct.judge import judge
from carebench.construct.lexicon import load_lexicon
from carebench.construct.personas import get_embedder as load
from carebench.construct.personas import load_personas
from carebench.construct.plan import PlanningEmbedder, PlanningRun, most_calls
from carebench.construct.quality import GATE_NAMES, GATES, Outcome, row_passes, selection
from carebench.construct.rewriting import (
    FORUM,
    assign,
    forum_sample,
    parse_config,
    rewrite,
    rewrite_report,
    round_robin,
)
from carebench.construct.routing import route
from carebench.construct.screening import (
    ScreenConfig,
    Verdict,
    classify_llm,
    scores_from_file,
    screen,
)
from carebench.construct.sources import SourceRow, WorkRow
from carebench.datasets.prompts import Persona as PromptPersona
from carebench.datasets.prompts import PromptRecord
from carebench.engine.run import Run
from carebench.engine.rundir import data_sha256
from carebench.engine.skeleton import Plan
from carebench.models.embed import APIEmbedder
from carebench.taxonomy import load_contexts, load_taxonomy
from carebench.types import CarebenchError


def load_expressions(spec: str | None) -> list[str]:
    if not spec:
        return []
    from carebench.datasets.files import format_from_suffix, read_rows

    p = resolve(spec)
    out = []
    for loc, raw in read_rows(p, format_from_suffix(p) or "jsonl"):
        expr = raw.get("expression")
        if not isinstance(expr, str) or not expr.strip():
            raise CarebenchError(f"{p}:{loc.split()[-1]}: field 'expression': missing")
        out.append(f"{expr} ({raw['meaning']})" if raw.get("meaning") else expr)
    return out


def classifier_verdicts(spec: str, rows: list[SourceRow], run: Run) -> list[Verdict] | None:
    if spec == "none":
        return None
    kind, _, arg = spec.partition(":")
    if kind == "scores" and arg:
        return scores_from_file(arg, rows)
    if kind == "llm" and arg:
        return classify_llm(rows, run.model(arg), run, load_taxonomy())
    raise CarebenchError(f"unknown classifier {spec!r} (use none, llm:SPEC or scores:PATH)")


def get_embedder(spec: str, run: Run) -> Any:
    """The configured embedder; API embeddings go through the run (stage ``embeddings``)."""
    embedder = load(spec, run=run, calls=embedding_calls(run, "embeddings"))
    if isinstance(run, PlanningRun) and isinstance(embedder, APIEmbedder):
        return PlanningEmbedder(embedder)  # its vectors may be placeholders: kept out of the cache
    return embedder


def build(cfg: BuildConfig, opts: ConstructOptions) -> Path | Plan:
    """Run the whole chain; returns the run directory (or the plan for a dry run)."""
    cfg = cfg.with_model(opts.model)
    cfg.check_models()
    sources = load_models(cfg.sources, SourceRow)  # every input validated before any call
    if cfg.limit is not None:
        sources = sources[: cfg.limit]
    personas = load_personas(cfg.personas, cfg.persona_id_field, cfg.persona_text_field)
    lexicon = load_lexicon(cfg.lexicon, cfg.lexicon_replace)
    contexts = load_contexts(cfg.contexts)
    unknown = [c for c in cfg.rewrite_contexts if c not in contexts]
    if unknown:
        raise CarebenchError(f"rewrite context {unknown[0]!r} is not defined (known: {', '.join(contexts)})")
    contracts = {name: c.contract_text() for name, c in contexts.items()}
    expressions = load_expressions(cfg.expressions)
    reversals = anon.load_phrase_list(cfg.reversals)
    literals = anon.load_phrase_list(cfg.literals)
    names = anon.load_phrase_list(cfg.names)
    backend = anon.make_backend(cfg.anonymizer, names=names)

    def models(run: Run) -> tuple[list[Any], Any, Any]:
        """The rewriter configurations, router and judge (checked before any call and before
        the run directory exists; the run builds each model once)."""
        return ([parse_config(s, run.model) for s in dict.fromkeys(cfg.rewriters)],
                run.model(cfg.router), run.model(cfg.judge))  # type: ignore[arg-type]

    dataset = {"source": cfg.sources, "rows": len(sources),
               "sha256": data_sha256(s.model_dump(mode="json") for s in sources),
               "illustrative": all(s.illustrative for s in sources)}

    def body(run: Run, stages: Stages) -> None:
        configs, router, judge_model = models(run)
        embedder = get_embedder(cfg.embedder, run)
        final, rows = _chain(cfg, opts, sources, personas, lexicon, contracts, expressions, reversals, literals,
                             backend, configs, router, judge_model, embedder, run, stages)
        if cfg.figures and len(final) >= 2:
            stages.begin("figures")  # the topic figure (VEILED-SH, Appendix A.3) embeds the released prompts
            from carebench.construct.figures import topic_clusters

            vectors = embedder.encode([p.text for p in final])
            if isinstance(run, PlanningRun):
                return  # a dry run only counts the embedding calls
            clusters = topic_clusters(vectors, k=cfg.topics, seed=cfg.seed)
            for p, c in zip(final, clusters, strict=True):
                stages.record("topic", id=p.id, cluster=c)  # so the report re-renders without an embedder
        stages.output("rows.jsonl", rows)
        stages.output("prompts.jsonl", final)

    return run_command(ConstructCommand("build", cfg.model_dump(mode="json"), dataset, body, check=models, manifest_extra={
        "attributes_mode": cfg.attributes, "budget_usd": opts.options.budget_usd}), opts)


def _chain(cfg, opts, sources, personas, lexicon, contracts, expressions, reversals, literals, backend, configs,
           router, judge_model, embedder, run, stages):
    stages.begin("screen")
    verdicts = classifier_verdicts(cfg.classifier, sources, run)
    retained, screen_rep = screen(sources, lexicon, verdicts,
                                  ScreenConfig(cfg.classifier, cfg.threshold, cfg.uncertain_low, cfg.keep_share, cfg.seed))
    stages.add("screen", len(sources), len(retained), f"classifier {cfg.classifier}", **screen_rep)
    if not retained:
        raise CarebenchError("screening retained no rows")
    stages.begin("route")
    routed, route_rep = route(retained, personas, embedder, router, run, k=cfg.k, attributes=cfg.attributes,
                              cache_dir=opts.embedding_cache)
    lost = [r for r in routed if r.route_status == HARNESS_FAILURE]  # the server failed: left out, counted
    routed = [r for r in routed if r.route_status != HARNESS_FAILURE]
    stages.add("route", len(retained), len(routed), f"attributes {cfg.attributes}"
               + (f"; {len(lost)} rows left out: their calls failed after every retry" if lost else ""),
               harness_failures=len(lost), **route_rep)
    forum_ids = forum_sample(routed, cfg.forum_share, cfg.seed)
    assign(routed, tuple(cfg.rewrite_contexts), cfg.seed, forum_ids)
    to_rewrite = [r for r in routed if r.context != FORUM]
    stages.add("assign", len(routed), len(routed), f"{len(forum_ids)} forum kept as written, "
               f"{len(to_rewrite)} to rewrite", forum_kept=len(forum_ids))
    passing = _select(cfg, to_rewrite, configs, contracts, expressions, judge_model, run, stages)["selected"]
    if isinstance(run, PlanningRun) and not run.selection_known():
        passing = most_calls(configs)  # a dry run's worst case: the most calls per row
    by_name = {c.name: c for c in configs}
    released: list[WorkRow] = [r for r in routed if r.context == FORUM]
    if passing and to_rewrite:
        round_robin(to_rewrite, passing)
        jobs = [(r, by_name[r.rewriter]) for r in to_rewrite]  # type: ignore[index]
        stages.begin("rewrite")
        outs = rewrite(jobs, contracts, run, expressions, stage="rewrites")
        for r, (text, status) in zip(to_rewrite, outs, strict=True):
            r.output, r.rewrite_status = text, status
        ok = [r for r in to_rewrite if r.output]
        failed = sum(r.rewrite_status == HARNESS_FAILURE for r in to_rewrite)
        stages.add("rewrite", len(to_rewrite), len(ok), "round-robin over " + ", ".join(passing),
                   harness_failures=failed, **rewrite_report(to_rewrite))
        stages.begin("judge")
        verdicts_j = judge([(r, r.output) for r in ok], contracts, judge_model, run)  # type: ignore[misc]
        dropped: dict[str, int] = {}
        kept = []
        for r, (v, status) in zip(ok, verdicts_j, strict=True):
            r.verdict = v.model_dump() if v is not None else {"status": status}
            if row_passes(v) or not cfg.drop_gate_failures:
                kept.append(r)
                continue
            why = (HARNESS_FAILURE if status == HARNESS_FAILURE else "unjudged") if v is None \
                else "+".join(GATE_NAMES[g] for g in GATES if not getattr(v, g))
            dropped[why] = dropped.get(why, 0) + 1
        stages.add("judge", len(ok), len(kept), "rewrites failing a gate are not released"
                   if cfg.drop_gate_failures else "gate failures kept (drop_gate_failures: false)", dropped=dropped)
        released += kept
    else:
        for r in to_rewrite:
            r.rewrite_status = "no_configuration_passed"
        stages.add("rewrite", len(to_rewrite), 0, "no rewriter configuration passed the gates" if to_rewrite
                   else "nothing to rewrite")
    stages.begin("anonymize")
    final = _anonymize(cfg, released, backend, reversals, literals, stages)
    return final, routed


def _select(cfg, to_rewrite, configs, contracts, expressions, judge_model, run, stages) -> dict[str, Any]:
    stages.begin("select")
    limits = cfg.gate_limits.as_gates()
    if not to_rewrite:
        stages.record("selection", sample=0, limits=cfg.gate_limits.model_dump(), outcomes=[])
        return selection([], limits, 0)
    rng = np.random.default_rng(cfg.seed)
    pick = sorted(int(i) for i in rng.permutation(len(to_rewrite))[: cfg.selection_sample])
    pilot = [to_rewrite[i] for i in pick]
    jobs = [(r, c) for c in configs for r in pilot]
    outs = rewrite(jobs, contracts, run, expressions, stage="selection rewrites")
    done = [((r, c), text) for (r, c), (text, _) in zip(jobs, outs, strict=True) if text]
    verdicts = iter(judge([(r, text) for (r, _), text in done], contracts, judge_model, run,
                          stage="selection judge"))  # the judge never sees which configuration wrote it
    # a configuration is judged only on the rewrites that were made and judged: a call that
    # failed after every retry (the server, not the rewriter or the judge) is left out and counted
    outcomes, harness_failures = [], 0
    for (_, c), (text, status) in zip(jobs, outs, strict=True):
        if not text:
            if status == HARNESS_FAILURE:
                harness_failures += 1
            else:
                outcomes.append(Outcome(c.name, None, rewrite_ok=False))
            continue
        v, vstatus = next(verdicts)
        if vstatus == HARNESS_FAILURE:
            harness_failures += 1
        else:
            outcomes.append(Outcome(c.name, v))
    result = selection(outcomes, limits, len(pilot))
    stages.record("selection", sample=len(pilot), limits=cfg.gate_limits.model_dump(),
                  outcomes=[o.to_dict() for o in outcomes])
    stages.add("select", len(configs), len(result["selected"]),
               f"gate-first over {len(pilot)} sample rows per configuration"
               + (f"; {harness_failures} rewrites left out: their calls failed after every retry"
                  if harness_failures else ""), harness_failures=harness_failures)
    return result


def _anonymize(cfg, released: list[WorkRow], backend, reversals, literals, stages) -> list[PromptRecord]:
    res = anon.anonymize_rows([(r.id, r.output or r.text, r.deidentified) for r in released], backend, reversals,
                              literals)
    summary = res.summary()
    bad = {h["id"] for h in res.residual_hits}
    if bad and cfg.on_residual == "error":
        stages.add("anonymize", len(released), 0, f"{len(bad)} rows with residual identifiers", **summary)
        raise CarebenchError(
            f"anonymization left {len(res.residual_hits)} residual hits in {len(bad)} rows "
            f"(first: {res.residual_hits[0]['id']}: {res.residual_hits[0]['what']}; all are listed in the "
            "report); fix the lists or set on_residual: drop"
        )
    final = []
    for r, out in zip(released, res.rows, strict=True):
        r.anonymized = out.text
        if r.id in bad:
            continue
        persona = PromptPersona(text=r.persona.text, attributes=dict(r.persona.attributes)) if r.persona else PromptPersona()
        final.append(PromptRecord(id=f"{r.id}-{r.context}", source_id=r.post_id, source_group=r.source,
                                  row_id=r.id, context=r.context, persona=persona, text=out.text,
                                  rewriter=r.rewriter))
    stages.add("anonymize", len(released), len(final), ("pattern recognizers only (no NER model)" if not backend.ner
               else f"with NER ({backend.name})") + (f"; {len(bad)} rows dropped for residual hits" if bad else ""),
               **summary)
    return final
