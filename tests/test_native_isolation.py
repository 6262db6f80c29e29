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


FIXTURES = '''
import os

import pytest

LOG = os.environ["TEARDOWN_LOG"]


@pytest.fixture(scope="module")
def shared():
    yield os.getpid()
    with open(LOG, "a") as fh:
        fh.write(f"{__name__} {os.getpid()}\\n")


def test_plain_first(shared):
    assert shared == os.getpid()


@pytest.mark.llamacpp
def test_forked_last(shared):
    assert shared != os.getpid()  # the session's value, inherited by the child
'''


def test_forked_test_last_in_module_leaves_the_session_consistent(pytester, monkeypatch,
                                                                   tmp_path):
    """A forked test that ends a module must not leave that module half set up (the
    next module's tests then error), and wider fixtures are torn down once, in the
    session process."""
    log = tmp_path / "teardowns.txt"
    monkeypatch.setenv("TEARDOWN_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    pytester.makeini("[pytest]\nmarkers =\n    llamacpp: embedded model\n")
    pytester.makeconftest("import os\npytest_plugins = ('native_isolation',)\n"
                          "os.environ['SESSION_PID'] = str(os.getpid())\n")
    pytester.makepyfile(test_a=FIXTURES, test_b="def test_after():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    lines = log.read_text().splitlines()
    assert len(lines) == 1  # torn down once, not again in the child
    assert lines[0].startswith("test_a ")
