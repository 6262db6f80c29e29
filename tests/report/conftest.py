"""Shared fixtures for the report tests: a tiny valid PNG and a payload-laden report."""

from __future__ import annotations

import struct
import zlib

import pytest

#: Text that must never reach an HTML or markdown reader as markup.
PAYLOAD = "<script>alert(\"x\")</script> A&B it's \"quoted\" | pipe"


def tiny_png(r: int = 255, g: int = 0, b: int = 0) -> bytes:
    """A 1x1 RGB PNG built by hand (independent of matplotlib)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    raw = b"\x00" + bytes([r, g, b])
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


@pytest.fixture
def png() -> bytes:
    return tiny_png()


@pytest.fixture
def make_png():
    return tiny_png


@pytest.fixture
def payload() -> str:
    return PAYLOAD


@pytest.fixture
def payload_report(png):
    """A report that puts the payload into every text field a suite can fill."""
    from carebench.report import (
        Callout,
        Details,
        Figure,
        Interval,
        KeyValue,
        Paragraph,
        Pre,
        Report,
        Section,
        Table,
    )

    return Report(
        title=f"Title {PAYLOAD}",
        subtitle=f"Subtitle {PAYLOAD}",
        notes=[f"Note {PAYLOAD}"],
        sections=[
            Section(f"Section {PAYLOAD}", [
                Paragraph(f"Para {PAYLOAD}\nsecond line"),
                Callout(f"Callout {PAYLOAD}", kind="warning"),
                Pre(f"Pre {PAYLOAD}"),
                KeyValue([(f"Key {PAYLOAD}", f"Value {PAYLOAD}"), ("seed", 42)]),
                Table(
                    columns=[f"Col {PAYLOAD}", "Macro F1", "n"],
                    rows=[[f"Cell {PAYLOAD}", Interval(0.5623, 0.519, 0.599), 452],
                          ["plain", 0.61, None]],
                    caption=f"Caption {PAYLOAD}",
                    highlight_max_cols=["Macro F1"],
                ),
                Figure("per-class-f1", png, f"Figure {PAYLOAD}"),
                Details(f"Summary {PAYLOAD}", [Paragraph(f"Inner {PAYLOAD}"),
                                              Figure("inner", tiny_png(0, 0, 255), "inner fig")]),
            ]),
            Section("Second", [Paragraph("plain text")], anchor="second"),
        ],
    )
