"""Progress away from a terminal: plain lines on stderr while calls finish (not one
line at the very end), and "unpriced" rather than "$0.0000" for models without a price."""

from __future__ import annotations

import re

from carebench.engine.cache import CompletionCache
from carebench.engine.runner import Call, Runner, RunnerConfig
from carebench.models import get_model
from carebench.types import ChatRequest, messages
from stub_server import StubReply, StubServer

N = 6


def _run(tmp_path, spec_name):
    with StubServer() as stub:
        stub.handler = lambda req: StubReply(content="ok", usage=(1000, 10))
        model = get_model(f"openai:{spec_name}@{stub.base_url}")
        calls = [Call(model, ChatRequest(messages(("user", f"q{i}")))) for i in range(N)]
        runner = Runner(RunnerConfig(progress=True, description="judging", concurrency=1),
                        cache=CompletionCache(tmp_path / "c.sqlite"))
        return runner.run_sync(calls)


def test_lines_while_calls_finish_and_unpriced_spend(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("CAREBENCH_PROGRESS_EVERY", "0")  # a line for every finished call
    _run(tmp_path, "my-local-model")
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("judging: ")]
    done = [int(re.match(r"judging: (\d+)/6 ", ln).group(1)) for ln in lines]
    assert done == [0, 1, 2, 3, 4, 5, 6]  # start, each call but the last, the end
    assert all(ln.endswith(", unpriced") for ln in lines[1:]), lines
    assert "$0.0000" not in err


def test_priced_spend_and_default_interval(tmp_path, capfd, price_per_call):
    price_per_call(0.5, "priced-model")
    _run(tmp_path, "priced-model")
    lines = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("judging: ")]
    # a fast batch within the default 30 s: the start and the end only
    assert [ln.split(" ", 2)[1] for ln in lines] == ["0/6", "6/6"]
    assert lines[-1].endswith(f", ${N * 0.5:.4f}")
