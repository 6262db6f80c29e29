"""Two independent ways to ask whether a text is a sentence of a GBNF grammar (test helpers).

``gbnf_to_regex`` is a tiny GBNF reader of our own for the non-recursive grammars
carebench generates; ``LlamaGrammarCheck`` asks llama.cpp's own grammar sampler,
token by token, the way it constrains decoding. Neither uses the converter under test.
"""

from __future__ import annotations

import ctypes
import math
import re
from typing import Any

_TOKEN = re.compile(
    r'\s*(?:(?P<lit>"(?:[^"\\]|\\.)*")|(?P<cls>\[(?:[^\]\\]|\\.)*\])'
    r"|(?P<name>[a-zA-Z][a-zA-Z0-9-]*)|(?P<op>[()|?*+]|\{\d+(?:,\d*)?\}))"
)
_ESC = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}


def _unescape(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\":
            nxt = body[i + 1]
            if nxt == "x":
                out.append(chr(int(body[i + 2 : i + 4], 16)))
                i += 4
                continue
            out.append(_ESC[nxt])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def gbnf_to_regex(grammar: str) -> re.Pattern[str]:
    """Regex equivalent of a non-recursive GBNF grammar (test helper, independent code)."""
    rules = {}
    for line in grammar.strip().splitlines():
        name, body = line.split("::=", 1)
        rules[name.strip()] = body.strip()

    def conv(name: str, depth: int = 0) -> str:
        assert depth < 50, "grammar recursion"
        body, pos, out = rules[name], 0, []
        while pos < len(body):
            m = _TOKEN.match(body, pos)
            assert m, f"cannot read {body[pos:]!r}"
            pos = m.end()
            if m["lit"]:
                out.append(re.escape(_unescape(m["lit"][1:-1])))
            elif m["cls"]:
                out.append(m["cls"])
            elif m["name"]:
                out.append("(?:" + conv(m["name"], depth + 1) + ")")
            else:
                out.append({"(": "(?:"}.get(m["op"], m["op"]))
            if body[pos:].strip() == "":
                break
        return "".join(out)

    return re.compile(conv("root"), re.DOTALL)


class LlamaGrammarCheck:
    """Accept or reject texts with llama.cpp's grammar sampler over a loaded model's vocabulary.

    A text is accepted when every one of its tokens survives the sampler's filter in turn
    and the end-of-sequence token is allowed after the last one (the grammar is complete).
    """

    def __init__(self, llama: Any) -> None:
        import llama_cpp

        self.lib = llama_cpp
        self.llama = llama
        self.vocab = llama._model.vocab
        self.data = (llama_cpp.llama_token_data * 1)()
        self.array = llama_cpp.llama_token_data_array(self.data, 1, -1, False)

    def _allowed(self, sampler: Any, token: int) -> bool:
        self.data[0].id, self.data[0].logit, self.data[0].p = token, 0.0, 0.0
        self.array.size, self.array.selected = 1, -1
        self.lib.llama_sampler_apply(sampler, ctypes.byref(self.array))
        return math.isfinite(self.data[0].logit)

    def accepts(self, grammar: str, text: str) -> bool:
        sampler = self.lib.llama_sampler_init_grammar(self.vocab, grammar.encode("utf-8"), b"root")
        assert sampler, "llama.cpp rejected the grammar"
        try:
            for token in self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=False):
                if not self._allowed(sampler, token):
                    return False
                self.lib.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, self.lib.llama_vocab_eos(self.vocab))
        finally:
            self.lib.llama_sampler_free(sampler)
