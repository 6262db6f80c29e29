"""Pytest plugin: tests that load a native library run in a forked child process.

A llama.cpp build that uses an instruction the machine does not allow dies with
SIGILL, and a native bug with SIGSEGV; in the test process itself either would end
the whole run with no report. Run in a forked child, such a crash is one failed test
that names the signal and its likely cause, and every other test still runs.

Reports cross the process boundary through pytest's own serialization hooks (the
ones pytest-xdist uses). pytest-forked does the same job but, at 1.7.5, cannot
serialize pytest 9's reports, so every forked test fails there.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import traceback

import pytest
from _pytest.reports import TestReport
from _pytest.runner import runtestprotocol

#: markers of tests whose code runs a native runtime in-process
NATIVE_MARKERS = ("llamacpp",)

SIGNAL_CAUSES = {
    signal.SIGILL: "an illegal instruction: this llama-cpp-python build uses CPU instructions "
    "this machine does not allow; rebuild it portably (README, 'Set up')",
    signal.SIGSEGV: "a segmentation fault inside native code",
    signal.SIGABRT: "native code aborted (a failed assertion in the library)",
    signal.SIGBUS: "a bus error inside native code",
}


def _isolated(item: pytest.Item) -> bool:
    return hasattr(os, "fork") and any(item.get_closest_marker(m) for m in NATIVE_MARKERS)


def _child(item: pytest.Item, out_path: str) -> None:
    """Run the test's setup/call/teardown; write the serialized reports; never return.

    Teardown in the child stops at the test's own fixtures (``nextitem`` is the test's
    parent collector): wider fixtures belong to the session process, which tears them
    down itself, once, as usual (a session fixture's teardown run in a child could, for
    example, delete files the session still uses).
    """
    code = 0
    try:
        reports = runtestprotocol(item, log=False, nextitem=item.parent)
        hook = item.config.hook
        data = [hook.pytest_report_to_serializable(config=item.config, report=r) for r in reports]
        with open(out_path, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
    except BaseException:  # noqa: BLE001 - anything here must still end the child
        with open(out_path + ".err", "w", encoding="utf-8") as fh:
            fh.write(traceback.format_exc())
        code = 3
    finally:
        os._exit(code)


def _crash_report(item: pytest.Item, message: str, details: str = "") -> TestReport:
    path, lineno, _ = item.location
    sections = [("Captured stderr call", details)] if details else []
    return TestReport(
        nodeid=item.nodeid, location=item.location, keywords={k: 1 for k in item.keywords},
        outcome="failed", longrepr=f"{path}:{(lineno or 0) + 1}: {message}", when="call",
        sections=sections,
    )


def run_forked(item: pytest.Item) -> list[TestReport]:
    with tempfile.TemporaryDirectory(prefix="cb-forked-") as tmp:
        out_path = os.path.join(tmp, "reports.json")
        pid = os.fork()
        if pid == 0:
            _child(item, out_path)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
            cause = SIGNAL_CAUSES.get(sig, "a fatal signal")
            return [_crash_report(item, f"the test process CRASHED with signal {sig} ({name}): "
                                        f"{cause}")]
        if os.path.exists(out_path):
            with open(out_path, encoding="utf-8") as fh:
                data = json.load(fh)
            hook = item.config.hook
            return [hook.pytest_report_from_serializable(config=item.config, data=d) for d in data]
        details = ""
        if os.path.exists(out_path + ".err"):
            with open(out_path + ".err", encoding="utf-8") as fh:
                details = fh.read()
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        return [_crash_report(item, f"the test process EXITED with status {code}", details)]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if not _isolated(item):
        return None
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for rep in run_forked(item):
        ihook.pytest_runtest_logreport(report=rep)
    item.session._setupstate.teardown_exact(nextitem)  # the session's own fixtures
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
