"""A fatal signal in an embedded-model test fails that test only; the run goes on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

INNER = '''
import os
import signal

import pytest


@pytest.mark.llamacpp
def test_native_crash():
    os.kill(os.getpid(), signal.{sig})


@pytest.mark.llamacpp
def test_native_ok():
    assert os.getpid() != int(os.environ["SESSION_PID"])  # ran in a child


def test_plain_runs_in_the_session_process():
    assert os.getpid() == int(os.environ["SESSION_PID"])
'''


@pytest.mark.parametrize(("sig", "cause"), [("SIGILL", "illegal instruction"),
                                            ("SIGSEGV", "segmentation fault")])
def test_fatal_signal_is_one_failed_test(pytester, monkeypatch, sig, cause):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    pytester.makeini("[pytest]\nmarkers =\n    llamacpp: embedded model\n")
    # the inner session records its own pid; forked children inherit the variable
    pytester.makeconftest(
        "import os\npytest_plugins = ('native_isolation',)\n"
        "os.environ['SESSION_PID'] = str(os.getpid())\n"
    )
    pytester.makepyfile(test_inner=INNER.replace("{sig}", sig))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "FAILED test_inner.py::test_native_crash" in out
    assert "CRASHED with signal" in out and f"({sig}): " in out and cause in out
