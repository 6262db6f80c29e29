"""The headline box of a run's ``report.md``, read back as a reader sees it.

The box is the GitHub "important" alert right under the title and banners: a bold
``Headline: VERDICT`` line, then optionally the measure line, ``- label: text`` rows and
``- Caveat: text`` lines. Tests recompute the numbers it states from the run's own
records, so this reads the rendered text, not the function that built it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

NUMBER = r"-?\d+(?:\.\d+)?"


@dataclass
class Box:
    verdict: str
    measure: str = ""
    rows: dict[str, str] = field(default_factory=dict)
    caveats: list[str] = field(default_factory=list)

    def interval(self) -> tuple[float, float, float]:
        """The measure line's ``value [lo, hi]``."""
        m = re.search(rf"({NUMBER}) \[({NUMBER}), ({NUMBER})\]", self.measure)
        assert m, f"no interval in {self.measure!r}"
        return float(m[1]), float(m[2]), float(m[3])

    def n(self) -> int:
        m = re.search(r"\(n = (\d+)", self.measure)
        assert m, f"no n in {self.measure!r}"
        return int(m[1])


def headline_box(run_dir: Path) -> Box:
    md = (Path(run_dir) / "report.md").read_text("utf-8")
    start = md.index("> [!IMPORTANT]\n")
    lines = []
    for line in md[start:].split("\n")[1:]:
        if not line.startswith(">"):
            break
        lines.append(re.sub(r"\\(.)", r"\1", line[1:].strip()))  # markdown's escapes undone
    m = re.fullmatch(r"\*\*Headline: (.*)\*\*", lines[0])
    assert m, lines[0]
    box = Box(m[1])
    for line in lines[1:]:
        if line.startswith("- Caveat: "):
            box.caveats.append(line[len("- Caveat: "):])
        elif line.startswith("- "):
            key, _, text = line[2:].partition(": ")
            box.rows[key] = text
        elif line:
            box.measure = line
    return box
