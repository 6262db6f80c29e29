"""The view's one HTML page: runs table, leaderboards, text search.

Like the reports (:mod:`carebench.report.html`), every text from a run passes through
``markupsafe.escape`` before it meets markup, CSS is inline, and a Content-Security-Policy
admits only carebench's own two scripts by their hashes (the report's table sorter and
the view's filter and search). The data the scripts read sits in inert blocks: the runs
list as ``application/json`` with ``<``, ``>`` and ``&`` written as JSON escapes, each
run's records as ``application/x-ndjson`` with ``<`` so written (:mod:`carebench.view.search`),
so no dataset text can close them; the script puts results on the page with ``textContent``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import string
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from markupsafe import escape

from carebench.view.leaderboards import SuiteBoards
from carebench.view.runs import RunSummary
from carebench.view.search import MAX_BYTES, TOTAL_BYTES, safe_json

DASH = "\u2013"
FLAG_TEXT = {
    "embedded model": "use the small embedded model: their numbers demonstrate the pipeline only",
    "illustrative data": "use illustrative or synthetic data: their numbers say nothing about real performance",
    "flagged results": "have flagged results (failed calls, or a system over its failure limit)",
}


#: what markupsafe.escape rewrites; most cells hold none of it and are used as they are
_SPECIAL = re.compile("[&<>\"']").search


def _e(x: object) -> str:
    s = str(x)
    return str(escape(s)) if _SPECIAL(s) else s


@lru_cache(maxsize=4)
def _asset(package: str, name: str) -> str:
    return (resources.files(package) / "templates" / name).read_text("utf-8")


def _hash(js: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii") + "'"


def href_to(target: str | Path, out_dir: Path, memo: dict[str, str] | None = None) -> str:
    """A relative URL from the page's folder to ``target`` (works from file:// and when served);
    ``memo`` keeps the relative path of each folder holding runs (runs share a few)."""
    parent, name = os.path.split(os.fspath(target))
    above, run = os.path.split(parent)
    rel = memo.get(above) if memo is not None else None
    if rel is None:
        rel = os.path.relpath(os.path.abspath(above), os.path.abspath(out_dir)).replace(os.sep, "/")
        if memo is not None:
            memo[above] = rel
    return quote(f"{rel}/{run}/{name}", safe="/")


def run_name(s: RunSummary, roots: Sequence[Path]) -> str:
    """The run's path below the folder it was found in (its folder name when it is one)."""
    for root in roots:
        try:
            rel = s.path.relative_to(root)
        except ValueError:
            continue
        if str(rel) != ".":
            return rel.as_posix()
    return s.path.name or str(s.path)


def render_page(summaries: Sequence[RunSummary], names: Sequence[str], boards: Sequence[SuiteBoards] | None,
                records: Sequence[bytes], cut: Sequence[str], out_dir: Path, generator: str,
                problems: Sequence[str] = ()) -> list[bytes]:
    """The page as pieces of UTF-8 to write one after another; ``records`` are the runs' records
    as :func:`~carebench.view.search.run_records` gives them (bytes, so megabytes of records are
    copied once into the file, never decoded, encoded or joined); ``boards`` None: not built."""
    out: list[str] = []
    put = out.append
    memo: dict[str, str] = {}
    hrefs = [href_to(os.path.join(s.path, "report.html"), out_dir, memo) if s.has_report else None
             for s in summaries]
    suites = sorted({s.suite for s in summaries})
    flagged = [s for s in summaries if s.flags]
    put('<header>\n<h1>carebench view</h1>')
    put('\n<section class="headline" id="headline" aria-label="Headline">')
    put(f'\n<p class="big">{len(summaries)} run(s) in {len(suites)} suite(s)'
        + (f": {_e(', '.join(suites))}" if suites else "") + "</p>")
    for suite in suites:
        newest = max((s for s in summaries if s.suite == suite), key=lambda s: s.created)
        put(f"\n<p>{_e(suite)}, newest run ({_e(newest.created[:10] or 'undated')}): {_e(newest.headline.text())}</p>")
    if not summaries:
        put("\n<p>No run directory (a folder with a manifest.json) was found.</p>")
    put("\n</section>")
    if flagged:
        counts: dict[str, int] = {}
        for s in flagged:
            for f in s.flags:
                counts[f] = counts.get(f, 0) + 1
        for f, n in sorted(counts.items()):
            put(f'\n<div class="banner" role="note"><strong>Warning:</strong> {n} run(s) '
                f'{_e(FLAG_TEXT.get(f, f))}: see the banners column.</div>')
    for p in problems:
        put(f'\n<div class="banner" role="note"><strong>Note:</strong> {_e(p)}</div>')
    put('\n<nav aria-label="Contents"><a href="#runs-section">Runs</a> \u00b7 <a href="#leaderboards">Leaderboards</a>'
        ' \u00b7 <a href="#search">Search texts</a></nav>\n</header>\n<main>')

    # ---- runs table
    put('\n<section id="runs-section">\n<h2>Runs</h2>\n<div class="controls" role="search">')
    put('\n<label>suite<select id="f-suite"><option value="">all</option>'
        + "".join(f'<option value="{_e(x)}">{_e(x)}</option>' for x in suites) + "</select></label>")
    all_flags = sorted({f for s in summaries for f in s.flags})
    put('\n<label>banner<select id="f-flag"><option value="">any</option>'
        + "".join(f'<option value="{_e(x)}">{_e(x)}</option>' for x in all_flags) + "</select></label>")
    statuses = sorted({s.status for s in summaries})
    put('\n<label>status<select id="f-status"><option value="">any</option>'
        + "".join(f'<option value="{_e(x)}">{_e(x)}</option>' for x in statuses) + "</select></label>")
    put('\n<label>filter<input id="f-text" type="search" placeholder="run, system, model\u2026"></label>'
        '\n<span id="runs-shown" aria-live="polite"></span>\n</div>')
    put('\n<div class="table-wrap">\n<table class="data sortable cards" id="runs">\n<thead><tr>')
    for col, kind in (("run", "text"), ("suite", "text"), ("date", "text"), ("systems", "text"),
                      ("headline [95% CI]", "number"), ("status", "text"), ("banners", "text")):
        put(f'<th scope="col" data-sort-type="{kind}">{_e(col)}</th>')
    put("</tr></thead>\n<tbody>")
    for s, name, href in zip(summaries, names, hrefs, strict=True):
        link = f'<a href="{_e(href)}">{_e(name)}</a>' if href else f"{_e(name)} <span class=muted>(no report)</span>"
        if s.parent:
            link += f' <span class="muted">part of {_e(s.parent)}</span>'
        systems = ", ".join(s.systems[:8]) + (f" and {len(s.systems) - 8} more" if len(s.systems) > 8 else "")
        value = "" if s.headline.value is None else repr(s.headline.value)
        flags = "".join(f'<span class="flag">{_e(f)}</span>' for f in s.flags)
        put(f'\n<tr data-suite="{_e(s.suite)}" data-status="{_e(s.status)}" data-flags="{_e("|".join(s.flags))}">'
            f'<td data-label="run" data-sort="{_e(name)}">{link}</td>'
            f'<td data-label="suite" data-sort="{_e(s.suite)}">{_e(s.suite)}</td>'
            f'<td data-label="date" data-sort="{_e(s.created)}">{_e(s.created[:16].replace("T", " "))}</td>'
            f'<td data-label="systems" data-sort="{_e(systems)}">{_e(systems) or DASH}</td>'
            f'<td data-label="headline" class="num" data-sort="{_e(value)}">{_e(s.headline.text())}</td>'
            f'<td data-label="status" data-sort="{_e(s.status)}">{_e(s.status)}</td>'
            f'<td data-label="banners" data-sort="{_e(" ".join(s.flags))}">{flags or DASH}</td></tr>')
    put("\n</tbody>\n</table>\n</div>\n</section>")

    # ---- leaderboards
    by_path = {str(s.path): (n, h) for s, n, h in zip(summaries, names, hrefs, strict=True)}
    put('\n<section id="leaderboards">\n<h2>Leaderboards</h2>')
    put("\n<p>Per suite, runs whose comparability keys (data set, units, panel, scoring settings) are all "
        "equal share one leaderboard, built as carebench leaderboard builds it: systems scored on the units all "
        "of them share, with 95% paired-bootstrap intervals and bands. A system found in several runs is taken "
        "from the newest (never averaged).</p>")
    any_board = False
    for sb in boards or ():
        if not (sb.boards or sb.unreadable or sb.alone):
            continue
        put(f"\n<h3>{_e(sb.suite)}</h3>")
        for k, lb in enumerate(sb.boards):
            any_board = True
            _leaderboard(put, lb, by_path, k + 1)
        if sb.alone:
            put(f'\n<p class="muted">{len(sb.alone)} run(s) whose comparable runs hold a single system between '
                "them: no leaderboard.</p>")
        for path, why in sb.unreadable:
            put(f'\n<p class="muted">{_e(by_path.get(path, (path, None))[0])}: not read ({_e(why)})</p>')
    if boards is None:
        put("\n<p>Not built (--no-leaderboards).</p>")
    elif not any_board:
        put("\n<p>No two comparable systems: no leaderboard.</p>")
    put("\n</section>")

    # ---- search
    put('\n<section id="search">\n<h2>Search texts</h2>'
        "\n<p>Items, replies and transcripts of every run (records.jsonl); a result opens its run's report.</p>"
        '\n<form id="search-form" role="search"><input id="q" type="search" aria-label="Search texts" '
        'placeholder="a word from an item, a reply or a transcript"><button type="submit">Search</button></form>'
        '\n<p id="results-summary" aria-live="polite">Searching needs scripts enabled.</p>\n<ol id="results"></ol>')
    if cut:
        put(f'\n<p class="muted">Only the first records of {len(cut)} large run(s) are searchable (a page carries '
            f"at most {MAX_BYTES // 1_000_000} MB of a run's records and {TOTAL_BYTES // 1_000_000} MB in all): "
            f"{_e(', '.join(cut))}.</p>")
    put("\n</section>\n</main>")
    put(f"\n<footer>{_e(generator)}</footer>")
    runs = [{"name": n, "suite": s.suite, "href": h} for s, n, h in zip(summaries, names, hrefs, strict=True)]
    put(f'\n<script type="application/json" id="view-data">{{"runs":{safe_json(runs)}}}</script>')
    sorter, view_js = _asset("carebench.report", "sort_table.js"), _asset("carebench.view", "view.js")
    tail = f"\n<script>{sorter}</script>\n<script>{view_js}</script>"
    shell = string.Template(_asset("carebench.view", "view.html"))
    pre, post = shell.substitute(script_hashes=f"{_hash(sorter)} {_hash(view_js)}", generator=_e(generator),
                                 body="\x00body\x00").split("\x00body\x00")
    chunks = [(pre + "".join(out)).encode("utf-8")]
    for i, raw in enumerate(records):
        if raw:  # an inert data block the script parses when a reader first searches
            chunks += [b'\n<script type="application/x-ndjson" class="run-records" data-run="%d">' % i, raw,
                       b"</script>"]
    chunks.append((tail + post).encode("utf-8"))
    return chunks


def _iv(value: Any, ci: Sequence[Any]) -> str:
    if value is None:
        return "\u2013"
    lo, hi = ci if ci else (None, None)
    return f"{value:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "")


def _leaderboard(put: Any, lb: Mapping[str, Any], by_path: Mapping[str, tuple[str, str | None]], k: int) -> None:
    included = [r for r in lb["runs"] if r["included"]]
    put(f'\n<p>Group {k}: {len(included)} run(s), {len({s for r in included for s in r["systems"]})} system(s), '
        f'{_e(lb["unit"])}s as units.</p>')
    if lb.get("duplicates"):
        put('\n<p class="muted">Found in several runs, taken from the newest: '
            + _e("; ".join(f"{d['system']} ({len(d['runs'])} runs)" for d in lb["duplicates"])) + "</p>")
    for j, b in enumerate(lb["boards"]):
        if not b["rows"]:
            continue
        table = [f'\n<div class="table-wrap"><table class="data cards"><caption>{_e(b["label"])}'
                 + ("" if b["higher_is_better"] else " (lower is better)")
                 + f' on {b["n_common_units"]} shared {_e(lb["unit"])}s</caption>'
                 '<thead><tr><th scope="col">rank</th><th scope="col">band</th><th scope="col">system</th>'
                 f'<th scope="col">{_e(b["label"])} [95% CI]</th><th scope="col">run</th></tr></thead><tbody>']
        for r in b["rows"]:
            name, href = by_path.get(r["run"], (r["run"], None))
            run = f'<a href="{_e(href)}">{_e(name)}</a>' if href else _e(name)
            table.append(f'<tr><td data-label="rank">{r["rank"]}</td><td data-label="band">{r["band"]}</td>'
                         f'<td data-label="system">{_e(r["system"])}</td>'
                         f'<td data-label="{_e(b["label"])}" class="num">{_e(_iv(r["value"], r["ci"]))}</td>'
                         f'<td data-label="run">{run}</td></tr>')
        table.append("</tbody></table></div>")
        if j == 0:
            put("".join(table))
        else:
            put(f"\n<details><summary>{_e(b['label'])}</summary>{''.join(table)}</details>")
