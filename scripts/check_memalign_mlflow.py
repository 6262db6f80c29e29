"""End-to-end check of ``--memalign-backend mlflow`` against the loopback stub.

MLflow's MemAlign needs MLflow and DSPy (LiteLLM, boto3 ...: several hundred MB),
which the test extra does not install, so this check is a script, not a CI test.
Run it where ``carebench[mlflow]`` is installed, from the repository root:

    PYTHONPATH=src python scripts/check_memalign_mlflow.py

It freezes E4 (peer) and E5 (clinician) profiles on the built-in illustrative data
with MLflow distilling the guidelines, and checks, independently of the code under
test, that: every distillation MLflow asked for reached the stub through the run
(one ``distill-mlflow`` row in calls.jsonl per stub request); a re-run makes no stub
request (all from the run's cache); the guidelines the stub scripted, and the case
each came from, are in the frozen, hash-checked profiles; ``plural label`` uses
them; no connection left the machine; nothing was written to the working directory
or the home directory; MLflow telemetry stayed off; the OpenAI variables were
restored; a budget stop inside MLflow stops the command, marks the method
incomplete and resumes from the cache; and a failed distillation call stops the
command with one error line.
Prints each figure; exits 1 when a check fails.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "plural")]

from labelling_stub import Labeller

from carebench.cli import main
from carebench.datasets.prompts import load_annotations, load_prompts
from carebench.plural.data import builtin_path
from stub_server import StubReply, StubServer

PROMPTS = load_prompts(builtin_path("prompts.jsonl"))
ANNOTATIONS = load_annotations(builtin_path("annotations.jsonl"))
SCRIPTED = [("Ask what the words mean to the person before labelling intent.", [0, 2]),
            ("Treat dark humour as figurative unless a plan is stated.", [1])]
_RECORD = re.compile(r'"id": (\d+),.*?"inputs": "(.*?)",\s*\n\s*\n?\}', re.DOTALL)
_MESSAGE = re.compile(r"Message:\n<<<\n(.*?)\n>>>", re.DOTALL)

failures: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


outside: list[object] = []
_connect = socket.socket.connect


def _loopback_only(self: socket.socket, addr: object) -> None:
    if self.family in (socket.AF_INET, socket.AF_INET6) and addr[0] not in ("127.0.0.1", "::1"):  # type: ignore[index]
        outside.append(addr)
        raise OSError(f"check_memalign_mlflow: blocked a connection to {addr}")
    return _connect(self, addr)


def main_check() -> int:
    socket.socket.connect = _loopback_only  # type: ignore[method-assign]
    labeller = Labeller(PROMPTS, ANNOTATIONS)
    distill_bodies: list[dict] = []
    fail_distill = {"on": False}

    def handler(req):
        if (req.body.get("response_format") or {}).get("json_schema", {}).get("name") == "Guidelines" or (
                "distill a list of guidelines" in req.body["messages"][-1]["content"]):
            distill_bodies.append(req.body)
            if fail_distill["on"]:
                return StubReply(status=400, content="scripted failure")
            return StubReply(content=json.dumps({"guidelines": [
                {"guideline_text": t, "source_trace_ids": ids} for t, ids in SCRIPTED]}))
        return labeller(req)

    home_before = set(os.listdir(Path.home()))
    env_before = {k: os.environ.get(k) for k in ("OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL")}
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as cwd, StubServer() as stub:
        stub.handler = handler
        os.chdir(cwd)
        spec = f"openai:labeller@{stub.base_url}"
        common = ["--model", spec, "--method", "peer=E4", "--method", "clinician=E5",
                  "--memalign-backend", "mlflow", "--cache", f"{tmp}/cache.sqlite"]
        t0 = time.perf_counter()
        rc = main(["plural", "freeze", "--out", f"{tmp}/freeze", *common])
        print(f"freeze: exit {rc}, {time.perf_counter() - t0:.1f} s, {len(stub.requests)} stub requests, "
              f"{len(distill_bodies)} of them MLflow distillations")
        check(rc == 0, "freeze with --memalign-backend mlflow exits 0")
        calls = [json.loads(x) for x in Path(f"{tmp}/freeze/calls.jsonl").read_text().splitlines()]
        rows = [c for c in calls if (c.get("tag") or {}).get("stage") == "distill-mlflow"]
        # 3 peer E4 fits (one alignment each) + 3 clinician E5 fits (two each)
        check(len(distill_bodies) == 9, f"9 MLflow alignments reached the stub (got {len(distill_bodies)})")
        check(len(rows) == len(distill_bodies), f"calls.jsonl has one distill-mlflow row per request ({len(rows)})")
        check(all(r["request"]["structured"]["name"] == "Guidelines" and r["request"]["temperature"] == 0.0
                  and r["request"]["max_tokens"] == 4000 for r in rows),
              "each distillation ran at temperature 0 with the 4,000-token cap and MLflow's JSON schema")

        profiles = {p.stem: json.loads(p.read_text()) for p in Path(f"{tmp}/freeze/profiles").glob("*.json")}
        check(sorted(profiles) == ["C1", "C2", "C3", "P1", "P2", "P3"], f"six profiles ({sorted(profiles)})")
        for alias, pr in sorted(profiles.items()):
            want = [t for t, _ in SCRIPTED]
            check(pr["guidelines"] == want, f"{alias}: the stub's guidelines are frozen")
            if pr["method"] == "E5":
                check(pr["guidelines_interpret"] == want, f"{alias}: judge A's guidelines too")
            check(pr["extra"].get("backend", {}).get("name") == "mlflow", f"{alias}: records the mlflow backend")
        # MLflow numbers the examples in its prompt; the stub cited numbers 0-2, so each
        # fit's sources are the cases shown under those numbers in that fit's request
        texts = {p.text: p.id for p in PROMPTS}
        expected = []
        for b in distill_bodies:
            index_case = {int(i): texts[_MESSAGE.search(inp).group(1)]
                          for i, inp in _RECORD.findall(b["messages"][-1]["content"])}
            expected.append([sorted(index_case[i] for i in ids) for _, ids in SCRIPTED])
        frozen = [v for pr in profiles.values() for k, v in pr["extra"].items() if k.startswith("guideline_sources")]
        check(sorted(map(str, frozen)) == sorted(map(str, expected)),
              "guideline sources map MLflow's example numbers back to the calibration cases")

        before = len(stub.requests)
        rc = main(["plural", "freeze", "--out", f"{tmp}/freeze2", *common])
        check(rc == 0 and len(stub.requests) == before, f"re-run: {len(stub.requests) - before} stub requests")
        same = all(json.loads(Path(f"{tmp}/freeze2/profiles/{a}.json").read_text())["hash"] == pr["hash"]
                   for a, pr in profiles.items())
        check(same, "re-run freezes the same profile hashes")

        before = len(stub.requests)
        rc = main(["plural", "label", "--profiles", f"{tmp}/freeze", "--out", f"{tmp}/label",
                   "--cache", f"{tmp}/cache.sqlite"])
        shown = [b for b in stub.requests[before:] if SCRIPTED[0][0] in json.dumps(b.body)]
        check(rc == 0 and shown, f"label exits {rc}; {len(shown)} label requests carry the guidelines")

        # a budget stop inside MLflow: $1 a call, --budget 2, one call at a time
        from carebench.models.pricing import price_table

        Path(f"{tmp}/prices.toml").write_text('[models]\n"labeller" = [0.0, 0.0, 1.0]\n')
        os.environ["CAREBENCH_PRICES"] = f"{tmp}/prices.toml"
        price_table.cache_clear()
        budget = [*common[:-1], f"{tmp}/budget.sqlite", "--concurrency", "1"]
        before, err = len(stub.requests), io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(["plural", "freeze", "--out", f"{tmp}/freeze-budget", *budget, "--budget", "2"])
        made = len(stub.requests) - before
        man = json.loads(Path(f"{tmp}/freeze-budget/manifest.json").read_text())
        print(f"budget stop: exit {rc}, {made} stub requests, incomplete {man.get('incomplete')}")
        check(rc == 3 and made == 2 and man.get("incomplete") == ["E4", "E5"]
              and not Path(f"{tmp}/freeze-budget/profiles").exists(),
              "--budget 2 stops after 2 distillations, marks E4 and E5 incomplete, freezes nothing")
        before = len(stub.requests)
        rc = main(["plural", "freeze", "--out", f"{tmp}/freeze-resumed", *budget])
        check(rc == 0 and len(stub.requests) - before == 7,
              f"resuming makes only the 7 calls left ({len(stub.requests) - before})")
        del os.environ["CAREBENCH_PRICES"]
        price_table.cache_clear()

        fail_distill["on"] = True
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main(["plural", "freeze", "--out", f"{tmp}/freeze3", *common[:-2], "--no-cache"])
        lines = [x for x in err.getvalue().splitlines() if x.strip() and "━" not in x]  # not progress bars
        print(f"failed distillation: exit {rc}; {lines}")
        check(rc == 2 and len(lines) == 1 and lines[0].startswith("carebench: error:"),
              "a failed distillation call stops the command with one error line")
        check(not Path(f"{tmp}/freeze3/profiles").exists(), "and freezes no profile")

        check(os.listdir(cwd) == [], f"nothing written to the working directory ({os.listdir(cwd)})")
        os.chdir(ROOT)
    from mlflow.telemetry.client import get_telemetry_client

    check(get_telemetry_client() is None, "MLflow telemetry client is off")
    check(outside == [], f"no connection left the machine ({outside})")
    check(set(os.listdir(Path.home())) - home_before == set(), "nothing new in the home directory")
    env_after = {k: os.environ.get(k) for k in env_before}
    check(env_after == env_before, "OpenAI variables restored")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main_check())
