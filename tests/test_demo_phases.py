"""``carebench demo``: each part is scored and drawn once, and every phase is measured."""

from __future__ import annotations

import json

from carebench import suites as suite_table
from carebench.demo import machine, run_demo
from carebench.engine import skeleton as experiment
from stub_server import StubReply, StubServer


def test_demo_scores_each_part_once_and_reports_its_phases(tmp_path, monkeypatch):
    rendered: list[str] = []
    real = experiment.rerender

    def counting(run_dir, *a, **k):
        rendered.append(str(run_dir))
        return real(run_dir, *a, **k)

    monkeypatch.setattr(experiment, "rerender", counting)
    monkeypatch.setattr(suite_table, "SUITES", {"support": suite_table.SUITES["support"]})
    with StubServer() as stub:
        stub.handler = lambda req: StubReply(content='{"met": true, "rationale": "stub"}')
        out = run_demo(out=tmp_path / "demo", model_spec=f"openai:m@{stub.base_url}",
                       cache_path=tmp_path / "cache.sqlite")
    # the part's run scored and rendered it; the demo's index did not do it again
    assert rendered == [str(out / "support")]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["parts"] == ["support"]
    phases = metrics["phases"]
    assert {"model load", "imports", "probe", "support"} <= set(phases)
    pngs = sorted((out / "support" / "figures").glob("*.png"))
    assert phases["support"]["charts_drawn"] == len(pngs) > 0
    assert all(p["cpu_s"] >= 0 and p["wall_s"] >= 0 for p in phases.values())
    assert phases["support"]["prompt_tokens"] == 0  # no in-process model: nothing counted
    assert metrics["machine"]["cores"] >= 1 and metrics["machine"]["cpu"]


def test_machine_reads_cpu_model_and_instruction_set(tmp_path, monkeypatch):
    from carebench import demo

    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse2 avx avx2 fma f16c\n\n"
                    "processor\t: 1\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse2 avx avx2 fma f16c\n")
    real_path = demo.Path
    monkeypatch.setattr(demo, "Path", lambda p: fake if str(p) == "/proc/cpuinfo" else real_path(p))
    info = machine()
    assert info["cpu"] == "Test CPU 9000"
    assert info["isa"] == ["avx2", "fma", "f16c"]  # no AVX-512 named when the CPU lacks it
