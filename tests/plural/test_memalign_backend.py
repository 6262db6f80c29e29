"""``--memalign-backend``: choosing E4/E5's distillation backend.

MLflow and DSPy are not in the test extra (several hundred MB, and LiteLLM's boto3
pins python-dateutil below 3), so CI checks the option and the missing-package error
line; the backend itself is checked end to end by scripts/check_memalign_mlflow.py
where ``carebench[mlflow]`` is installed. Absence is simulated by blocking the
imports, so these tests hold whether or not MLflow happens to be installed.
"""

from __future__ import annotations

import json
import sys

import pytest

from carebench.cli import main
from carebench.plural.profiles import memalign_mlflow

SPEC = "openai:judge@http://127.0.0.1:9/v1"  # never called: every case here stops before a call


@pytest.fixture
def no_mlflow(monkeypatch):
    for name in ("mlflow", "dspy"):
        monkeypatch.setitem(sys.modules, name, None)  # `import mlflow` now raises ImportError
    memalign_mlflow._modules.cache_clear()
    yield
    memalign_mlflow._modules.cache_clear()


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_mlflow_backend_without_mlflow_is_one_error_line(no_mlflow, capsys, tmp_path):
    out = tmp_path / "cal"
    rc = main(["plural", "calibrate", "--model", SPEC, "--method", "E0", "--method", "E4",
               "--memalign-backend", "mlflow", "--out", str(out)])
    line = _one_error_line(capsys)
    assert rc == 2
    assert line.startswith("carebench: error: --memalign-backend mlflow")
    assert line.endswith("pip install 'carebench[mlflow]'")
    assert not out.exists()  # refused before any run directory or call


def test_the_error_applies_only_when_e4_or_e5_runs(no_mlflow, capsys):
    rc = main(["plural", "calibrate", "--model", SPEC, "--method", "E0", "--method", "E1",
               "--memalign-backend", "mlflow", "--dry-run", "--json"])
    assert rc == 0, capsys.readouterr().err
    plan = json.loads(capsys.readouterr().out)
    assert plan["suite"] == "plural" and plan["calls"] == 30  # E1's zero-shot round over the 30 cases


def test_unknown_backend_is_one_error_line(capsys):
    rc = main(["plural", "calibrate", "--model", SPEC, "--memalign-backend", "dspy", "--dry-run", "--json"])
    assert rc == 2
    assert _one_error_line(capsys) == ("carebench: error: unknown --memalign-backend 'dspy' "
                                       "(choose from native, mlflow)")


def _calibration_dir(tmp_path, backend: str):
    """The two files freeze reads from a calibrate run, as calibrate writes them."""
    d = tmp_path / f"cal-{backend}"
    d.mkdir()
    (d / "manifest.json").write_text(json.dumps({
        "suite": "plural", "kind": "calibrate", "models": [SPEC],
        "config": {"prompts": "builtin", "annotations": "builtin", "memalign_backend": backend}}))
    (d / "metrics.json").write_text(json.dumps({"selection": {
        "peer": {"method": "E5"}, "clinician": {"method": "E4"}}}))
    return d


def test_freeze_keeps_the_calibration_runs_backend(no_mlflow, capsys, tmp_path):
    cal = _calibration_dir(tmp_path, "mlflow")
    rc = main(["plural", "freeze", "--calibration", str(cal), "--dry-run", "--json"])
    assert rc == 2
    assert _one_error_line(capsys).endswith("pip install 'carebench[mlflow]'")
    # an explicit --memalign-backend overrides it
    rc = main(["plural", "freeze", "--calibration", str(cal), "--memalign-backend", "native", "--dry-run", "--json"])
    assert rc == 0, capsys.readouterr().err
    plan = json.loads(capsys.readouterr().out)
    assert "profiles: clinician=E4, peer=E5" in plan["notes"]
    # a native calibration run freezes natively without MLflow
    rc = main(["plural", "freeze", "--calibration", str(_calibration_dir(tmp_path, "native")), "--dry-run", "--json"])
    assert rc == 0, capsys.readouterr().err
