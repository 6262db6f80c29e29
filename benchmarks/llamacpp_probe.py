"""Probe the embedded llama.cpp model on one short classification prompt.

Prints load time, prompt-evaluation and generation speed (from llama.cpp's own
per-context timings, so Python overhead is excluded from the rates but included in
the wall times), the latency of a first-token label scoring and of a choice-grammar
answer, the per-item time of the risk suite's letter prompt (long rubric first, post
last) with a cold and a warm prefix, the instruction set llama.cpp runs with, and the
process's peak RSS. Run it alone: other CPU load on a 2-core machine changes every
figure.

    python benchmarks/llamacpp_probe.py [--model llamacpp:builtin] [--threads 1] [--reps 10]
        [--items 8] [--n-batch 64 --n-batch 512]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time

from carebench.models.llamacpp import LlamaCppModel, runtime_info
from carebench.types import ChatRequest, StructuredSpec, messages

LABELS = ("a", "b", "c", "d")
PROMPT = messages(
    (
        "system",
        (
            "You grade how severe the suicide or self-harm risk in a post is. Levels: "
            "a = indicator (distress, no thoughts of dying), b = ideation (thoughts or "
            "wishes of dying), c = behavior (plans, preparations, self-harm acts), "
            "d = attempt (a past attempt). Answer with the letter only."
        ),
    ),
    (
        "user",
        "Post: I've been giving my things away and I wrote letters to my family this week.",
    ),
)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def perf(model: LlamaCppModel) -> tuple[float, int, float, int]:
    import llama_cpp

    d = llama_cpp.llama_perf_context(model._llama().ctx)
    return d.t_p_eval_ms, d.n_p_eval, d.t_eval_ms, d.n_eval


def reset_perf(model: LlamaCppModel) -> None:
    import llama_cpp

    llama_cpp.llama_perf_context_reset(model._llama().ctx)


def summary(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.3f}  min {min(xs):.3f}  max {max(xs):.3f}"


def risk_requests(n: int) -> list[ChatRequest]:
    """The risk suite's own ``llm`` letter requests for the first ``n`` built-in posts."""
    from carebench.risk.data import load_builtin
    from carebench.risk.methods import MethodContext, make_method

    method = make_method("llm")
    ctx = MethodContext(run=None, models={})
    return [method.request(it, ctx) for it in list(load_builtin("sample").items)[:n]]


async def prefix_reuse(args: argparse.Namespace) -> None:
    """Per-item time of the risk letter prompt: every prompt from scratch (cold) vs the
    shared rubric kept from the previous item (warm; the first item is left out)."""
    reqs = risk_requests(args.items)
    print(f"\nrisk letter prompt, {len(reqs)} built-in posts (rubric first, post last)")
    for n_batch in args.n_batch:
        for reuse in (False, True):
            model = LlamaCppModel(args.model, n_threads=args.threads, n_ctx=args.n_ctx,
                                  n_batch=n_batch, reuse_prefix=reuse)
            model.warm_up()
            llama = model._llama()
            llama.reset()
            times, prompt, kept = [], [], []
            for i, req in enumerate(reqs):
                c = await model.complete(req)
                if reuse and i == 0:
                    continue  # nothing to reuse yet
                times.append(c.latency_s)
                prompt.append(c.usage.prompt_tokens)
                kept.append(llama.prefix_reused)
            label = "warm" if reuse else "cold"
            print(f"  n_batch {n_batch:4d} {label}  per item {summary(times)} s   "
                  f"prompt {statistics.median(prompt):.0f} tok, "
                  f"reused {statistics.median(kept):.0f} tok (median)")


async def main(args: argparse.Namespace) -> None:
    rss0 = peak_rss_mb()
    model = LlamaCppModel(args.model, n_threads=args.threads, n_ctx=args.n_ctx, reuse_prefix=False)
    t0 = time.perf_counter()
    model.warm_up()
    load = time.perf_counter() - t0
    print(
        f"model            {model.spec} ({model.path.name}, {model.path.stat().st_size / 1e6:.0f} MB)"
    )
    print(f"threads / n_ctx  {args.threads} / {model.n_ctx}")
    print(f"runtime          {runtime_info()}")
    print(f"load             {load:.3f} s   (peak RSS before load {rss0:.0f} MB)")

    gen_req = ChatRequest(PROMPT, max_tokens=args.max_tokens, temperature=0.0)
    first = await model.complete(ChatRequest(PROMPT, max_tokens=2))  # first-call warm-up
    print(f"first call       {first.latency_s:.3f} s   (2 tokens; includes one-off setup)")
    p_rates, g_rates, walls, p_tokens, g_tokens = [], [], [], 0, 0
    for _ in range(args.reps):
        reset_perf(model)
        c = await model.complete(gen_req)
        tp, np_, tg, ng = perf(model)
        p_rates.append(np_ / (tp / 1000) if tp else float("nan"))
        if ng:
            g_rates.append(ng / (tg / 1000))
        walls.append(c.latency_s)
        p_tokens, g_tokens = c.usage.prompt_tokens, c.usage.completion_tokens
    print(
        f"prompt / gen     {p_tokens} prompt tokens, {g_tokens} generated (max {args.max_tokens})"
    )
    print(f"prompt tok/s     {summary(p_rates)}")
    if g_rates:
        print(f"generation tok/s {summary(g_rates)}")
    print(f"completion wall  {summary(walls)} s")

    scores = []
    for _ in range(args.reps):
        cc = await model.complete_choice(ChatRequest(PROMPT), LABELS)
        scores.append(cc.latency_s)
    print(f"label scoring    {summary(scores)} s   (first-token logits, no generation)")
    print(f"                 probabilities {cc.extra['probabilities']}")
    spec = StructuredSpec(kind="choice", labels=LABELS)
    gram = []
    for _ in range(args.reps):
        c = await model.complete(ChatRequest(PROMPT, max_tokens=4, structured=spec))
        gram.append(c.latency_s)
    print(f"choice grammar   {summary(gram)} s   (answer {c.text!r})")
    await prefix_reuse(args)
    print(f"peak RSS         {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llamacpp:builtin")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--items", type=int, default=8, help="risk posts for the prefix comparison")
    ap.add_argument("--n-batch", type=int, action="append",
                    help="prompt batch sizes to compare (default: 32)")
    a = ap.parse_args()
    a.n_batch = a.n_batch or [32]
    asyncio.run(main(a))
