"""The support report names what its records store: a reply's status by its name with the
code beside it, attempts counted from 1, subcategories by name in the figures as in the
tables, a setting the run did not record said so (never Python's ``None``), and a count
with its noun in the right number.

Expected names come from ``wording.CODE_NAMES`` (the package's table of status names) and
from the task file's own subcategory spellings; which reply had which status and attempt is
recounted from ``records.jsonl``, not from the report code.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from run_dirs import JUDGES, support_tasks, write_support_run

import carebench.support.report as support_report
from carebench.cli import main
from carebench.engine.skeleton import write_records
from carebench.support.records import PARQUET_COLUMNS
from carebench.wording import CODE_NAMES

SMALL = "vllm:meta-llama/Llama-3.1-8B-Instruct"
OTHER = "openai:gpt-x"
#: the task file's subcategories as a reader spells them; the loader stores each as a code
SUBCATEGORY_NAMES = ["Self worth", "Eating disorder", "Social isolation"]
#: (task, responder, attempt index) -> the final turn's status written into records.jsonl
STATUSES = {("t00", SMALL, 0): "empty", ("t00", SMALL, 1): "content_filter", ("t01", SMALL, 1): "truncated"}
#: one judge verdict that failed to parse: (task, responder, attempt, criterion, judge)
PARSE_ERROR = ("t02", OTHER, 0, "c0", JUDGES[0])
#: stored codes with an underscore: never shown bare, only as "name (code)"
SNAKE_CODES = [c for c in CODE_NAMES if "_" in c] + ["not_judged_empty", "not_met"]


class _Text(HTMLParser):
    """Every text node of a page, and the text of each <summary> (a reply's heading)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.summaries: list[str] = []
        self._in_summary = 0

    def handle_starttag(self, tag, attrs):
        if tag == "summary":
            self._in_summary += 1
            self.summaries.append("")

    def handle_endtag(self, tag):
        if tag == "summary":
            self._in_summary -= 1

    def handle_data(self, data):
        self.texts.append(data)
        if self._in_summary:
            self.summaries[-1] += data


def _html(run_dir: Path) -> _Text:
    p = _Text()
    p.feed((run_dir / "report.html").read_text("utf-8"))
    return p


def _md(run_dir: Path) -> str:
    """report.md with markdown's escapes undone (``content\\_filter`` -> ``content_filter``)."""
    return re.sub(r"\\([_\[\]*$&<>|-])", r"\1", (run_dir / "report.md").read_text("utf-8"))


def _write_run(run_dir: Path) -> Path:
    """Four tasks, two responders, two attempts; an empty, a content-filtered and a truncated
    final turn, and one verdict that failed to parse. No run config in the manifest."""
    tasks = support_tasks(4)
    for t, name in zip(tasks, [*SUBCATEGORY_NAMES, SUBCATEGORY_NAMES[0]], strict=True):
        t["subcategory"] = name
    write_support_run(run_dir, tasks, [SMALL, OTHER], lambda r, t, a, c, j: (int(t[1:]) + a + int(c[1:])) % 2 == 0,
                      attempts=2, reply=lambda r, t, a: f"A reply to task {t}.")
    rows = [json.loads(line) for line in (run_dir / "records.jsonl").read_text("utf-8").splitlines()]
    for row in rows:
        status = STATUSES.get((row["task_id"], row["responder"], row["attempt"]))
        if row["kind"] == "response" and status:
            row["status"] = row["turns"][-1]["status"] = status
            if status != "truncated":
                row["final_reply"] = row["turns"][-1]["content"] = ""
        elif row["kind"] == "verdict" and status and status != "truncated":
            row.update(status="not_judged_empty", met=None)
        elif row["kind"] == "verdict" and (row["task_id"], row["responder"], row["attempt"], row["criterion_id"],
                                           row["judge"]) == PARSE_ERROR:
            row.update(status="parse_error", met=None)
    write_records(run_dir, rows, PARQUET_COLUMNS)
    return run_dir


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, list[tuple[list[str], list[str]]]]:
    """The run re-rendered by ``carebench report DIR``, and the (row, column) labels of every
    heatmap the report drew."""
    run_dir = _write_run(tmp_path_factory.mktemp("names") / "run")
    drawn: list[tuple[list[str], list[str]]] = []
    real = support_report.heatmap

    def recording(matrix, rows, cols, *args, **kwargs):
        drawn.append((list(rows), list(cols)))
        return real(matrix, rows, cols, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(support_report, "heatmap", recording)
        assert main(["report", str(run_dir)]) == 0
    return run_dir, drawn


def _responses(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "records.jsonl").read_text("utf-8").splitlines()]
    return [r for r in rows if r["kind"] == "response"]


def _expected_headings(run_dir: Path) -> Counter:
    """(responder, attempt as a reader counts it, status as shown) per reply, from the records."""
    return Counter((r["responder"], r["attempt"] + 1,
                    None if r["status"] == "ok" else f"{CODE_NAMES[r['status']]} ({r['status']})")
                   for r in _responses(run_dir))


HEADING = re.compile(r"^(?P<who>\S+), attempt (?P<n>\d+): score [\d.]+(?:, (?P<status>.+))?$")


def _headings(lines) -> Counter:
    out = Counter()
    for line in lines:
        m = HEADING.match(line.strip())
        if m:
            out[(m["who"], int(m["n"]), m["status"])] += 1
    return out


def test_reply_headings_count_attempts_from_one_and_name_the_status(run):
    run_dir, _ = run
    expected = _expected_headings(run_dir)
    assert {s for *_, s in expected} == {None, "empty reply (empty)", "blocked by a content filter (content_filter)",
                                         "cut at the token limit (truncated)"}  # the statuses written above
    md_lines = [m[1] for m in re.finditer(r"^\s*- \*\*(.+?)\*\*\s*$", _md(run_dir), re.MULTILINE)]
    assert _headings(md_lines) == expected
    assert _headings(_html(run_dir).summaries) == expected


def test_transcripts_name_a_turn_status_with_its_code(run):
    run_dir, _ = run
    for text in (_md(run_dir), "".join(_html(run_dir).texts)):
        shown = Counter(re.findall(r"\[assistant - ([^\]]+)\]", text))
        assert shown == Counter(f"{CODE_NAMES[s]} ({s})" for s in STATUSES.values())


def test_a_judge_failure_is_shown_by_its_name(run):
    run_dir, _ = run
    assert CODE_NAMES["parse_error"] in _md(run_dir)
    assert CODE_NAMES["parse_error"] in "".join(_html(run_dir).texts)


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_no_status_code_stands_alone(run, fmt):
    """A stored code with an underscore appears only as "name (code)" (a code with no name in
    the table, such as the panel's own states, not at all); no attempt is shown as index 0."""
    run_dir, _ = run
    texts = _md(run_dir).splitlines() if fmt == "md" else _html(run_dir).texts
    bare = []
    for text in texts:
        for code in SNAKE_CODES:
            for m in re.finditer(rf"(?<![\w/.-]){code}(?![\w-])", text):
                name = CODE_NAMES.get(code)
                if not (name and text[:m.start()].endswith(f"{name} (") and text[m.end():].startswith(")")):
                    bare.append((code, text.strip()[:100]))
        if re.search(r"\battempt 0\b", text):
            bare.append(("attempt 0", text.strip()[:100]))
    assert not bare, bare[:5]


def test_replicate_table_heads_attempts_from_one(run):
    run_dir, _ = run
    attempts = sorted({r["attempt"] for r in _responses(run_dir)})
    header = "| responder | " + " | ".join(f"attempt {a + 1}" for a in attempts) + " | range |"
    md = _md(run_dir)
    assert header in md
    pairs = md[md.index("| attempt a | attempt b | Spearman rho |"):].splitlines()[2]
    assert [c.strip() for c in pairs.strip("|").split("|")][:2] == ["1", "2"]


def test_figures_label_subcategories_by_name(run):
    """Figure 6's rows are the task file's subcategory names, as the slice tables say them;
    no heatmap label is a stored subcategory code."""
    run_dir, drawn = run
    metrics = json.loads((run_dir / "metrics.json").read_text("utf-8"))
    codes = set(metrics["slices"]["subcategory"]["values"])
    assert codes == {n.lower().replace(" ", "_") for n in SUBCATEGORY_NAMES}  # stored as codes
    assert drawn, "no heatmap was drawn"
    assert any(set(rows) == set(SUBCATEGORY_NAMES) for rows, _ in drawn), [rows for rows, _ in drawn]
    assert not [lab for rows, cols in drawn for lab in (*rows, *cols) if lab in codes]
    for name in SUBCATEGORY_NAMES:  # the tables use the same names
        assert f"| {name} |" in _md(run_dir)


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_no_none_as_a_value(run, fmt):
    """The manifest holds no run config: the generation settings are said to be not recorded."""
    run_dir, _ = run
    assert "config" not in json.loads((run_dir / "manifest.json").read_text("utf-8"))
    text = _md(run_dir) if fmt == "md" else "\n".join(_html(run_dir).texts)
    assert not re.search(r"\bNone\b", text), re.search(r".{0,60}\bNone\b.{0,20}", text)[0]
    assert "temperature not recorded, output cap not recorded" in text


def test_counts_of_one_take_the_singular(tmp_path):
    """A run of one task, judged by one judge: no "1 tasks" or "1 judges" anywhere."""
    run_dir = write_support_run(tmp_path / "one", support_tasks(1), [OTHER], lambda *a: True,
                                judges=JUDGES[:1], rerender=True)
    plural = re.compile(r"\b1 (?:[a-z]+ )?(?:tasks|judges|bands|conversations|times|criterions|tokens|attempts)\b")
    for text in (_md(run_dir), "\n".join(_html(run_dir).texts)):
        assert "1 task" in text and "1 judge" in text
        assert not plural.search(text), plural.search(text)[0]
