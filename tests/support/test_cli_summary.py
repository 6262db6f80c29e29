"""The leaderboard `support run` prints: a header row, and every row's columns under it."""

from __future__ import annotations

from pathlib import Path

from carebench.support.cli import _summary


def test_leaderboard_has_a_header_and_aligned_rows(capsys):
    metrics = {"leaderboard": {"rows": [
        {"rank": 1, "score": 0.8125, "ci": [0.7, 0.9], "band": 1, "responder": "openai:a@http://h/v1"},
        {"rank": 2, "score": 0.5, "ci": [0.41, 0.62], "band": 2, "responder": "openai:b@http://h/v1"}]},
        "reference": {"score": 0.9}}
    _summary(Path("/tmp/run"), metrics)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["rank", "score", "[95%", "CI]", "band", "responder"]
    col = lines[0].index("responder")
    assert [ln[col:] for ln in lines[1:4]] == ["openai:a@http://h/v1", "openai:b@http://h/v1",
                                                 "reference ceiling"]
    assert lines[1].split()[:5] == ["1", "0.812", "[0.700,", "0.900]", "1"]
    assert lines[3].split()[:2] == ["-", "0.900"]
    assert lines[4] == "wrote /tmp/run/report.html"
