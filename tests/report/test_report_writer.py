"""write_report: the files a run directory gets, written atomically."""

from __future__ import annotations

import os

import pytest

from carebench.report import Figure, Paragraph, Report, Section, atomic_write_bytes, write_report
from carebench.report.markdown import render_markdown


def listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_writes_figures_markdown_and_html(tmp_path, payload_report, png, make_png):
    run = tmp_path / "runs" / "risk-1"
    write_report(payload_report, run)
    assert listing(run) == ["figures", "figures/inner.png", "figures/per-class-f1.png",
                            "report.html", "report.md"]
    assert (run / "figures" / "per-class-f1.png").read_bytes() == png
    assert (run / "figures" / "inner.png").read_bytes() == make_png(0, 0, 255)
    assert (run / "report.md").read_text(encoding="utf-8") == render_markdown(payload_report)
    html = (run / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html


def test_rewrite_replaces_content_and_leaves_no_temp_files(tmp_path, payload_report):
    write_report(payload_report, tmp_path)
    write_report(Report("second version", sections=[Section("s", [Paragraph("new")])]), tmp_path)
    assert "second version" in (tmp_path / "report.md").read_text()
    assert "second version" in (tmp_path / "report.html").read_text()
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".")]


def test_crash_during_replace_keeps_the_previous_report(tmp_path, payload_report, monkeypatch):
    write_report(payload_report, tmp_path)
    old_html = (tmp_path / "report.html").read_bytes()
    real_replace = os.replace

    def crash_on_html(src, dst):
        if str(dst).endswith("report.html"):
            raise KeyboardInterrupt("simulated crash")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_html)
    with pytest.raises(KeyboardInterrupt):
        write_report(Report("new", sections=[Section("s", [Paragraph("x")])]), tmp_path)
    assert (tmp_path / "report.html").read_bytes() == old_html  # whole old file, not half a new one
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_crash_while_writing_leaves_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "report.md"
    target.write_bytes(b"complete old report")

    def failing_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_bytes(target, b"half")
    assert target.read_bytes() == b"complete old report"
    assert listing(tmp_path) == ["report.md"]


def test_render_error_writes_nothing(tmp_path, make_png):
    broken = Report("t", sections=[Section("s", [Figure("f", make_png(1, 1, 1), "a"),
                                                 Figure("f", make_png(2, 2, 2), "b")])])
    with pytest.raises(ValueError):
        write_report(broken, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_report_without_figures_creates_no_figures_dir(tmp_path):
    write_report(Report("t", sections=[Section("s", [Paragraph("x")])]), tmp_path)
    assert listing(tmp_path) == ["report.html", "report.md"]
