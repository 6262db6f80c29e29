"""Single-stage runs (``carebench construct screen|route|rewrite|judge|select|anonymize|
review-sample|review-stats``): each reads rows, writes its output rows and a run
directory whose report shows counts in and out. They chain by file: the output
of one is the ``--rows`` of the next, and ``build`` runs them all at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from carebench.construct import anonymize as anon
from carebench.construct import rewriting as rw
from carebench.construct.command import ConstructCommand, ConstructOptions, Stages, run_command
from carebench.construct.io import load_models
from carebench.construct.pipeline import (
    _anonymize,
    classifier_verdicts,
    get_embedder,
    load_expressions,
)
from carebench.construct.quality import ConstructionVerdict, Outcome, row_passes, selection
from carebench.construct.sources import SourceRow, WorkRow
from carebench.engine.run import Run
from carebench.engine.rundir import data_sha256, read_jsonl, write_json, write_jsonl
from carebench.types import CarebenchError


def run_stage(kind: str, opts: ConstructOptions, config: dict[str, Any], rows_in: list[Any], body,
              *, calls: bool = True) -> Path:
    """One stage command: its input's digest in the manifest, then :func:`run_command`."""
    dataset = {"rows": len(rows_in), "sha256": data_sha256(
        r.model_dump(mode="json") if hasattr(r, "model_dump") else r for r in rows_in)}
    return run_command(ConstructCommand(kind, config, dataset, body), opts, calls=calls)


def load_rows(path: str, unique: bool = True) -> list[WorkRow]:
    return load_models(path, WorkRow, unique="id" if unique else None)


def screen_stage(sources: str, lexicon: list[str], lexicon_replace: bool, classifier: str, threshold: float,
                 uncertain_low: float, keep_share: float, seed: int, opts: ConstructOptions) -> Path:
    from carebench.construct.lexicon import load_lexicon
    from carebench.construct.screening import ScreenConfig, screen

    rows = load_models(sources, SourceRow)
    lex = load_lexicon(lexicon, lexicon_replace)
    cfg = ScreenConfig(classifier, threshold, uncertain_low, keep_share, seed)
    cfg.validate()

    def body(run: Run, stages: Stages) -> None:
        verdicts = classifier_verdicts(classifier, rows, run)
        kept, rep = screen(rows, lex, verdicts, cfg)
        stages.add("screen", len(rows), len(kept), f"classifier {classifier}", **rep)
        stages.output("screened.jsonl", kept)

    return run_stage("screen", opts, {"sources": sources, "lexicon": lexicon, "classifier": classifier,
                                      "threshold": threshold, "uncertain_low": uncertain_low,
                                      "keep_share": keep_share, "seed": seed}, rows, body,
                     calls=classifier.startswith("llm:"))


def route_stage(rows_path: str, personas: str, model: str, embedder: str, k: int, attributes: str,
                opts: ConstructOptions, id_field: str = "id", text_field: str = "text") -> Path:
    from carebench.construct.personas import load_personas
    from carebench.construct.routing import route

    rows = load_rows(rows_path)
    table = load_personas(personas, id_field, text_field)

    def body(run: Run, stages: Stages) -> None:
        emb = get_embedder(embedder, run)
        routed, rep = route(rows, table, emb, run.model(model), run, k=k, attributes=attributes,
                            cache_dir=opts.embedding_cache)
        stages.add("route", len(rows), len(routed), f"attributes {attributes}", **rep)
        stages.output("routed.jsonl", routed)

    return run_stage("route", opts, {"rows": rows_path, "personas": personas, "model": model, "k": k,
                                     "attributes": attributes, "embedder": embedder}, rows, body)


def rewrite_stage(rows_path: str, rewriters: list[str], contexts_path: str | None, rewrite_contexts: list[str],
                  forum_share: float, all_configs: bool, expressions: str | None, seed: int,
                  opts: ConstructOptions) -> Path:
    from carebench.taxonomy import load_contexts

    rows = load_rows(rows_path)
    if not rewriters:
        raise CarebenchError("give at least one --rewriter")
    contexts = load_contexts(contexts_path)
    contracts = {n: c.contract_text() for n, c in contexts.items()}
    for c in rewrite_contexts:
        if c not in contexts or c == rw.FORUM:
            raise CarebenchError(f"rewrite context {c!r} is not a known non-forum context")
    exprs = load_expressions(expressions)

    def body(run: Run, stages: Stages) -> None:
        configs = [rw.parse_config(s, run.model) for s in dict.fromkeys(rewriters)]
        if any(r.persona is None for r in rows):
            raise CarebenchError(f"{rows_path}: rows need a persona (run `construct route` first)")
        forum_ids = rw.forum_sample(rows, forum_share, seed)
        rw.assign(rows, tuple(rewrite_contexts), seed, forum_ids)
        todo = [r for r in rows if r.context != rw.FORUM]
        out_rows = [r for r in rows if r.context == rw.FORUM]
        if all_configs:
            jobs = [(r.model_copy(deep=True), c) for c in configs for r in todo]
        else:
            rw.round_robin(todo, [c.name for c in configs])
            by = {c.name: c for c in configs}
            jobs = [(r, by[r.rewriter]) for r in todo]  # type: ignore[index]
        outs = rw.rewrite(jobs, contracts, run, exprs)
        for (r, c), (text, status) in zip(jobs, outs, strict=True):
            r.rewriter, r.output, r.rewrite_status = c.name, text, status
            out_rows.append(r)
        stages.add("rewrite", len(rows), sum(bool(r.output) for r in out_rows),
                   "every configuration on every row" if all_configs else "round-robin", **rw.rewrite_report(out_rows))
        stages.output("rewrites.jsonl", out_rows)

    return run_stage("rewrite", opts, {"rows": rows_path, "rewriters": rewriters, "forum_share": forum_share,
                                       "all_configs": all_configs, "seed": seed,
                                       "rewrite_contexts": rewrite_contexts}, rows, body)


def judge_stage(rows_path: str, judge_spec: str, contexts_path: str | None, opts: ConstructOptions) -> Path:
    from carebench.construct.judge import judge
    from carebench.taxonomy import load_contexts

    rows = load_rows(rows_path, unique=False)
    contracts = {n: c.contract_text() for n, c in load_contexts(contexts_path).items()}
    todo = [r for r in rows if r.rewriter and r.output]

    def body(run: Run, stages: Stages) -> None:
        res = judge([(r, r.output) for r in todo], contracts, run.model(judge_spec), run)  # type: ignore[misc]
        for r, (v, status) in zip(todo, res, strict=True):
            r.verdict = v.model_dump() if v is not None else {"status": status}
        stages.add("judge", len(todo), sum(v is not None for v, _ in res), "verdicts parsed")
        stages.output("judged.jsonl", rows)

    return run_stage("judge", opts, {"rows": rows_path, "judge": judge_spec}, rows, body)


def outcomes_from_rows(rows: list[WorkRow]) -> list[Outcome]:
    out = []
    for r in rows:
        if not r.rewriter:
            continue
        if not r.output:
            out.append(Outcome(r.rewriter, None, rewrite_ok=False))
        elif r.verdict and "severity_preserved" in r.verdict:
            out.append(Outcome(r.rewriter, ConstructionVerdict.model_validate(r.verdict)))
        else:
            out.append(Outcome(r.rewriter, None))
    return out


def select_stage(rows_path: str, limits: dict[str, float], opts: ConstructOptions) -> Path:
    rows = load_rows(rows_path, unique=False)
    outcomes = outcomes_from_rows(rows)
    if not outcomes:
        raise CarebenchError(f"{rows_path}: no rewrites with a rewriter to select from")

    def body(run: Run, stages: Stages) -> None:
        sel = selection(outcomes, limits)
        stages.record("selection", limits=sel["limits"], outcomes=[o.to_dict() for o in outcomes])
        stages.add("select", len({o.config for o in outcomes}), len(sel["selected"]), "gate-first, then by Q")
        stages.output("selection.json", sel, write_json)

    return run_stage("select", opts, {"rows": rows_path, "limits": limits}, rows, body, calls=False)


def anonymize_stage(rows_path: str, backend_spec: str, names: str | None, reversals: str | None,
                    literals: str | None, on_residual: str, drop_gate_failures: bool, opts: ConstructOptions) -> Path:
    from carebench.construct.config import BuildConfig

    rows = load_rows(rows_path)
    backend = anon.make_backend(backend_spec, names=anon.load_phrase_list(names))
    rev, lits = anon.load_phrase_list(reversals), anon.load_phrase_list(literals)
    if on_residual not in ("error", "drop"):
        raise CarebenchError("--on-residual must be error or drop")

    def body(run: Run, stages: Stages) -> None:
        released = []
        for r in rows:
            if not r.context:
                raise CarebenchError(f"{rows_path}: row {r.id} has no context (run `construct rewrite` first)")
            if r.context != "forum" and not r.output:
                continue
            if r.rewriter and drop_gate_failures and r.verdict is not None and not row_passes(
                    ConstructionVerdict.model_validate(r.verdict) if "severity_preserved" in r.verdict else None):
                continue
            released.append(r)
        cfg = BuildConfig(on_residual=on_residual)  # type: ignore[arg-type]
        stages.output("prompts.jsonl", _anonymize(cfg, released, backend, rev, lits, stages))

    return run_stage("anonymize", opts, {"rows": rows_path, "backend": backend_spec, "on_residual": on_residual},
                     rows, body, calls=False)


def review_sample_stage(rows_path: str, total: int, per_reviewer: int, shared: int, reviewers: tuple[str, str],
                        seed: int, opts: ConstructOptions) -> Path:
    from carebench.construct.review import ReviewSampleConfig, draw_sample, sheet_rows
    from carebench.datasets.sheets import ReviewItem

    rows = load_rows(rows_path)
    cfg = ReviewSampleConfig(total, per_reviewer, shared, reviewers, seed)
    cfg.validate()

    def body(run: Run, stages: Stages) -> None:
        key, design = draw_sample(rows, cfg)
        by_id = {r.id: r for r in rows}
        both = []
        for who in reviewers:
            sheet = [ReviewItem.model_validate(s) for s in sheet_rows(key, by_id, who)]
            stages.output(f"review_{who}.jsonl", sheet)
            both += sheet
        # one file for `carebench annotate load`: each row goes to the reviewer it names
        stages.output("review_sheet.jsonl", sorted(both, key=lambda r: (r.item_id, r.reviewer)))
        stages.output("review_key.private.jsonl", key, write_jsonl)
        stages.add("review sample", len(rows), len(key), f"{len(design['cells'])} context x rewriter cells", **design)

    return run_stage("review-sample", opts, {"rows": rows_path, "total": total, "per_reviewer": per_reviewer,
                                             "shared": shared, "reviewers": list(reviewers), "seed": seed},
                     rows, body, calls=False)


def review_stats_stage(key_path: str, reviews: list[str], B: int, seed: int, opts: ConstructOptions) -> Path:
    from carebench.construct.review import review_stats
    from carebench.datasets.sheets import load_reviews

    key = read_jsonl(Path(key_path))
    if not reviews:
        raise CarebenchError("give at least one --reviews file")
    rows = [r.model_dump() for path in reviews for r in load_reviews(path)]

    def body(run: Run, stages: Stages) -> None:
        stats = review_stats(key, rows, B=B, seed=seed)
        stages.add("review stats", len(rows), stats["items_reviewed"], "reviews in, distinct items out")
        stages.record("review_stats", stats=stats)

    return run_stage("review-stats", opts, {"key": key_path, "reviews": reviews, "B": B, "seed": seed}, rows, body,
                     calls=False)
