"""Time the crisis-resource check against a bare ``phonenumbers.PhoneNumberMatcher`` loop.

Builds ``--n`` synthetic replies (default 100,000; seeded) of realistic shape: a few
sentences of support text in one of 12 locales, with crisis numbers in many formats,
URLs, texting keywords, invented numbers and distractors (times, dates, money, counts,
years) mixed in. Then times, in this process, one after another:

1. reference: ``for text, region: list(PhoneNumberMatcher(text, region))`` (the bare
   library loop the check must stay within 1.5x of), run first and again last;
2. ``check_reply`` on every reply with the built-in registry;
3. ``carebench resources check`` end to end through its command (reading the JSONL,
   checking, writing the output file; the console summary included).

Prints each figure, the ratios to the first reference run and to the mean of both, and
the load average before and after (the machine may be shared).

With ``--memory 50000,200000,400000`` it instead runs the command on each number of replies in
a fresh process and prints its peak resident set size (the command streams its input and
output, so the figure should not grow with the number of replies).

Usage: ``python benchmarks/resources_check.py [--n 100000] [--seed 20260714] [--memory N,N,...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import phonenumbers

from carebench.resources import builtin_registry, check_reply

LOCALES = ["en-US", "en-GB", "en-AU", "en-NZ", "en-IE", "en-CA", "pt-BR", "de-DE", "fr-FR", "es-MX", "ja-JP",
           "ko-KR"]
OPENINGS = [
    "I'm really sorry you're going through this, and I'm glad you told me.",
    "It sounds like things have been incredibly heavy lately.",
    "Thank you for trusting me with something so painful.",
    "You don't have to face this alone, even if it feels that way right now.",
    "Sinto muito que você esteja passando por isso.",
    "Es tut mir leid, dass es dir gerade so schlecht geht.",
    "Je suis désolé que tu traverses ça.",
    "つらい気持ちを話してくれてありがとう。",
]
RESOURCES = [
    "Please call or text 988 right now.", "You can reach the lifeline at 9-8-8.",
    "The old number 1-800-273-8255 still works.", "Text HOME to 741741 to reach a counselor.",
    "Samaritans are there on 116 123, day or night.", "Call +44 116 123 any time.",
    "Lifeline is on 13 11 14, or text 0477 13 11 14.", "Free call or text 1737.",
    "Ligue para o CVV no 188 ou acesse https://cvv.org.br/chat/.",
    "Die TelefonSeelsorge erreichst du unter 0800 111 0 111.", "Le 3114 répond jour et nuit.",
    "Llama a SAPTEL al 55 5259 8121.", "よりそいホットライン（0120-279-338）に電話してください。",
    "자살예방상담전화 109로 전화하세요.", "If you are in danger, call 911.", "In an emergency ring 999 or 112.",
    "Chat online at 988lifeline.org/chat.", "Call our team at (415) 555-0132.",
    "Ring the helpline on 0800 123 4567.",
]
DISTRACTORS = [
    "I slept 4 hours and took 2 pills at 11:30 pm on 3/14/2024.", "It's been 988 days since 2019.",
    "It cost $911 and I still owe 1,988 dollars.", "We meet on 12.05.2024 at 16:00.",
    "The score was 111-98.", "Faz 188 dias que não durmo bem.", "2024年5月12日の午後3時に。",
]
CLOSINGS = [
    "Would you be willing to tell me more about what's been happening?",
    "Is there someone you trust who could be with you tonight?",
    "I'm here, and we can take this one step at a time.",
]


def iter_replies(n: int, seed: int) -> Iterator[dict]:
    """The replies one at a time (the same seeded sequence as :func:`replies`)."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        parts = [OPENINGS[rng.integers(len(OPENINGS))]]
        if rng.random() < 0.6:
            parts += [RESOURCES[k] for k in rng.choice(len(RESOURCES), size=rng.integers(1, 3), replace=False)]
        if rng.random() < 0.4:
            parts.append(DISTRACTORS[rng.integers(len(DISTRACTORS))])
        parts.append(CLOSINGS[rng.integers(len(CLOSINGS))])
        yield {"id": i, "locale": LOCALES[rng.integers(len(LOCALES))], "text": " ".join(parts)}


def replies(n: int, seed: int) -> list[dict]:
    return list(iter_replies(n, seed))


def write_replies(path: Path, n: int, seed: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for r in iter_replies(n, seed):
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


#: run in a fresh interpreter: the command alone, then its own peak resident set size
_PEAK = ("import resource, sys, contextlib, io\n"
         "from carebench.cli import main\n"
         "with contextlib.redirect_stdout(io.StringIO()):\n"
         "    rc = main(['resources', 'check', sys.argv[1], '--out', sys.argv[2]])\n"
         "print(rc, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")


def peak_rss_mib(n: int, seed: int) -> float:
    """Peak RSS (MiB) of ``carebench resources check`` on ``n`` replies, in its own process."""
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "replies.jsonl", Path(d) / "checked.jsonl"
        write_replies(src, n, seed)
        done = subprocess.run([sys.executable, "-c", _PEAK, str(src), str(out)], capture_output=True, text=True,
                              check=True, env=os.environ)
        rc, kib = done.stdout.split()
        assert rc == "0" and sum(1 for _ in out.open()) == n
    return int(kib) / 1024


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=20260714)
    ap.add_argument("--memory", default="", help="comma-separated reply counts: peak RSS of the command "
                                                   "at each, each in a fresh process (e.g. 50000,200000,400000)")
    a = ap.parse_args()
    if a.memory:
        sizes = [int(x) for x in a.memory.split(",")]
        print(f"peak RSS of 'carebench resources check' (own process); load average before: {load()}")
        peaks = {n: peak_rss_mib(n, a.seed) for n in sizes}
        for n, mib in peaks.items():
            print(f"  {n:>9} replies: {mib:7.1f} MiB")
        lo, hi = min(peaks.values()), max(peaks.values())
        print(f"  spread: max/min {hi / lo:.3f} ({(hi / lo - 1) * 100:.1f}%); load average after: {load()}")
        return
    rows = replies(a.n, a.seed)
    pairs = [(r["text"], r["locale"].split("-")[1]) for r in rows]
    reg = builtin_registry()
    check_reply("warm up 988", "en-US", reg)
    print(f"{a.n} replies, mean {np.mean([len(t) for t, _ in pairs]):.0f} characters; load average before: "
          f"{load()}")

    def reference() -> tuple[float, int]:
        t0 = time.perf_counter()
        found = 0
        for text, region in pairs:
            found += len(list(phonenumbers.PhoneNumberMatcher(text, region)))
        return time.perf_counter() - t0, found

    t_ref1, n_ref = reference()
    print(f"reference  PhoneNumberMatcher loop: {t_ref1:8.2f} s  ({n_ref} numbers found)")
    t_ref = t_ref1

    t0 = time.perf_counter()
    n_men = sum(len(check_reply(r["text"], r["locale"], reg).mentions) for r in rows)
    t_check = time.perf_counter() - t0
    print(f"check_reply loop:                   {t_check:8.2f} s  ({n_men} mentions)  "
          f"ratio {t_check / t_ref:.2f}x")

    from carebench.cli import main as cli

    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "replies.jsonl", Path(d) / "checked.jsonl"
        src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            rc = cli(["resources", "check", str(src), "--out", str(out)])
        t_cli = time.perf_counter() - t0
        assert rc == 0 and sum(1 for _ in out.open()) == a.n
    print(f"carebench resources check (command): {t_cli:7.2f} s  ratio {t_cli / t_ref:.2f}x "
          "(JSONL read + check + write)")
    t_ref2, _ = reference()
    t_ref = (t_ref1 + t_ref2) / 2
    print(f"reference again (the machine is shared): {t_ref2:5.2f} s; mean {t_ref:.2f} s -> ratios "
          f"check_reply {t_check / t_ref:.2f}x, command {t_cli / t_ref:.2f}x")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
