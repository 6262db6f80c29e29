"""A small document model that every suite builds and every writer renders.

Suites describe *what* a report says (sections, tables, figures) and never emit
markup themselves: all escaping lives in the renderers, so dataset and model text
can never inject HTML or break a markdown table.  All text fields are plain text;
there is no inline markup.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "MISSING",
    "PNG_SIGNATURE",
    "Block",
    "Callout",
    "Details",
    "Figure",
    "Headline",
    "Interval",
    "KeyValue",
    "Links",
    "Paragraph",
    "Pre",
    "Report",
    "Section",
    "ShownTable",
    "Table",
    "figure_name",
    "format_number",
    "format_value",
    "is_numeric",
    "iter_blocks",
    "map_texts",
    "slugify",
    "sort_key",
]

#: Shown for a missing value (``None`` or NaN): an en dash, so "no value" never reads as 0.
MISSING = "\u2013"

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

_FIGURE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_ANCHOR = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_NEG_ZERO = re.compile(r"^-(0[.,]?0*)(%?)$")


def format_number(value: float, fmt: str = ".3f") -> str:
    """Format one number; ints stay exact, NaN becomes :data:`MISSING`, ``-0.000`` loses its sign."""
    if type(value) is not float:  # the common case skips the abstract-class checks
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, numbers.Integral):
            return str(int(value))
    x = float(value)
    if math.isnan(x):
        return MISSING
    text = format(x, fmt)
    m = _NEG_ZERO.match(text)
    return m.group(1) + m.group(2) if m else text


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with its interval, e.g. a metric and its bootstrap CI.

    ``lo``/``hi`` may be ``None`` when no interval could be computed; the value is then
    shown alone rather than with an invented interval.
    """

    value: float
    lo: float | None = None
    hi: float | None = None

    @classmethod
    def of(cls, value: Any, ci: Any) -> Interval | None:
        """A stored value and its ``[lo, hi]`` as an Interval: None without a value, the value
        alone without both bounds (how metrics.json files keep them)."""
        if value is None:
            return None
        if isinstance(ci, list | tuple) and len(ci) == 2 and None not in ci:
            return cls(float(value), float(ci[0]), float(ci[1]))
        return cls(float(value))

    def format(self, fmt: str = ".3f") -> str:
        """Render as ``"0.562 [0.519, 0.599]"``."""
        head = format_number(self.value, fmt)
        if self.lo is None or self.hi is None:
            return head
        return f"{head} [{format_number(self.lo, fmt)}, {format_number(self.hi, fmt)}]"


def format_value(value: Any, fmt: str = ".3f") -> str:
    """Format one table cell or key-value value as plain (unescaped) text."""
    if value is None:
        return MISSING
    kind = type(value)
    if kind is str:
        return value
    if kind is float or kind is int:
        return format_number(value, fmt)
    if isinstance(value, Interval):
        return value.format(fmt)
    if isinstance(value, str):
        return value
    if isinstance(value, numbers.Real):  # covers bool, int, float and numpy scalars
        return format_number(value, fmt)
    return str(value)


def is_numeric(value: Any) -> bool:
    """True for the cells that should be right-aligned and can be highlighted."""
    kind = type(value)
    if kind is float or kind is int:
        return True
    if kind is str or value is None:
        return False
    return isinstance(value, Interval) or (
        isinstance(value, numbers.Real) and not isinstance(value, bool)
    )


def sort_key(value: Any) -> float:
    """The number a cell is compared by when highlighting its column's best value."""
    return float(value.value if isinstance(value, Interval) else value)


def slugify(text: str) -> str:
    """Turn free text into an anchor or file stem made of ``[a-z0-9-]``."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "section"


def figure_name(text: str) -> str:
    """Turn free text (e.g. a model spec like ``llamacpp:/x.gguf``) into a safe figure name."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-._")
    return (slug or "figure")[:128]


@dataclass(slots=True)
class Paragraph:
    text: str


@dataclass(slots=True)
class Callout:
    """A highlighted remark, e.g. that the embedded model demonstrates the pipeline only."""

    text: str
    kind: Literal["info", "warning"] = "info"

    def __post_init__(self) -> None:
        if self.kind not in ("info", "warning"):
            raise ValueError(f"Callout kind must be 'info' or 'warning', got {self.kind!r}")


_RELATIVE_HREF = re.compile(r"^(?![A-Za-z][A-Za-z0-9+.-]*:)(?!/)(?!.*(?:^|/)\.\.(?:/|$))[^\s\\?#]+$")


@dataclass(slots=True)
class Links:
    """A list of links to files beside the report (e.g. a demo's suite reports).

    Only relative paths inside the run directory are allowed (no scheme, no leading ``/``,
    no ``..``): a report stays self-contained and can never point a reader off the machine.
    """

    items: list[tuple[str, str]]  # (text, relative path)

    def __post_init__(self) -> None:
        self.items = [(str(t), str(h)) for t, h in self.items]
        for _, href in self.items:
            if not _RELATIVE_HREF.match(href):
                raise ValueError(f"Links: {href!r} is not a relative path inside the run directory")


@dataclass(slots=True)
class Pre:
    """Preformatted text (a prompt, a raw model reply) shown verbatim."""

    text: str


@dataclass(slots=True)
class KeyValue:
    """Labelled values, e.g. run settings; values are formatted like table cells."""

    pairs: list[tuple[str, Any]]
    number_format: str = ".3f"

    def __post_init__(self) -> None:
        if isinstance(self.pairs, Mapping):
            self.pairs = list(self.pairs.items())
        else:
            self.pairs = [(str(k), v) for k, v in self.pairs]


Align = Literal["left", "right", "center"]
_ALIGN_ALIASES = {"l": "left", "r": "right", "c": "center",
                  "left": "left", "right": "right", "center": "center"}


@dataclass(slots=True)
class Table:
    """A table of cells: floats (formatted), ints, str, None (shown as an en dash) or Interval.

    ``number_format`` is one format spec or one per column.  ``highlight_max_cols`` /
    ``highlight_min_cols`` name columns (by name or index) whose best value is emphasised
    (all tied values are; a column where every competing value ties, or with one
    competitor, emphasises none); with ``highlight_second`` the second-best value is underlined,
    as in the papers' result tables. Rows in ``exclude_rows`` (reference rows such as
    chance, or flagged methods) never compete. ``bold_cells`` emphasises given (row,
    column) cells, e.g. a selection. ``align`` defaults to right for numeric columns,
    left otherwise. A ``sortable`` table can be sorted by any column in the HTML report
    (a small inline script; without scripts the table reads as it is): numeric columns
    sort by the full-precision value, not the formatted text. Left as ``None``, a table is
    sortable when it has two rows or more (every data table of every report sorts; a
    one-row table has nothing to order); ``False`` keeps a table's order fixed.
    """

    columns: list[str]
    rows: list[list[Any]]
    caption: str | None = None
    number_format: str | Sequence[str] = ".3f"
    highlight_max_cols: Sequence[str | int] = ()
    highlight_min_cols: Sequence[str | int] = ()
    align: Sequence[str] | None = None
    bold_cells: Sequence[tuple[int, int]] = ()  # (row, column) shown emphasised, e.g. a selection
    highlight_second: bool = False
    exclude_rows: Sequence[int] = ()
    sortable: bool | None = None

    def __post_init__(self) -> None:
        self.columns = [str(c) for c in self.columns]
        self.rows = [list(r) for r in self.rows]
        self._check_rows()
        n = len(self.columns)
        if not isinstance(self.number_format, str) and len(self.number_format) != n:
            raise ValueError(f"Table: number_format needs one spec per column ({n})")
        if self.align is not None:
            if len(self.align) != n:
                raise ValueError(f"Table: align needs one entry per column ({n})")
            try:
                self.align = [_ALIGN_ALIASES[a] for a in self.align]
            except KeyError as exc:
                raise ValueError(f"Table: unknown alignment {exc.args[0]!r}") from None
        for c in (*self.highlight_max_cols, *self.highlight_min_cols):
            self._column_index(c)

    def _check_rows(self) -> None:
        n = len(self.columns)
        for i, row in enumerate(self.rows):
            if len(row) != n:
                raise ValueError(
                    f"Table {self.caption or self.columns!r}: row {i} has {len(row)} cells, "
                    f"expected {n}"
                )

    def _column_index(self, col: str | int) -> int:
        if isinstance(col, int) and not isinstance(col, bool):
            if not -len(self.columns) <= col < len(self.columns):
                raise ValueError(f"Table: highlight column {col} out of range")
            return col % len(self.columns)
        try:
            return self.columns.index(col)
        except ValueError:
            raise ValueError(f"Table: no column named {col!r} to highlight") from None

    def sorts(self) -> bool:
        """Whether the HTML report lets a reader sort this table (see ``sortable``)."""
        return len(self.rows) >= 2 if self.sortable is None else bool(self.sortable)

    def column_format(self, j: int) -> str:
        return self.number_format if isinstance(self.number_format, str) else self.number_format[j]

    def shown(self) -> ShownTable:
        """Every cell's text and kind in one pass per column (see :class:`ShownTable`)."""
        self._check_rows()  # rows are a public list: checked again after any change
        n = len(self.columns)
        rows = self.rows
        values = list(zip(*rows, strict=True)) if rows else [() for _ in range(n)]
        texts: list[list[str]] = []
        plain: list[list[bool]] = []
        numeric: list[bool] = []
        align: list[Align] = []
        for j, column in enumerate(values):
            column_texts, flags, filled = _shown_column(column, self.column_format(j))
            texts.append(column_texts)
            plain.append(flags)
            numeric.append(all(flags))
            align.append("right" if filled and numeric[-1] else "left")
        if self.align is not None:
            align = list(self.align)  # type: ignore[arg-type]
        return ShownTable(texts, plain, numeric, align, len(rows))

    def alignments(self) -> list[Align]:
        """Per-column alignment: explicit, else right for all-numeric columns."""
        if self.align is not None:
            return list(self.align)  # type: ignore[arg-type]
        return self.shown().align

    def ranks(self) -> dict[tuple[int, int], int]:
        """(row, column) -> 1 for each highlighted column's best value, 2 for the second
        best (only with ``highlight_second``); ties share a rank. A column whose competing
        values are all equal (or that has a single one) marks nothing: no value is best."""
        out: dict[tuple[int, int], int] = {(int(i), int(j)): 1 for i, j in self.bold_cells}
        skip = set(self.exclude_rows)
        for cols, lower in ((self.highlight_max_cols, False), (self.highlight_min_cols, True)):
            for col in cols:
                j = self._column_index(col)
                scored = []
                for i, r in enumerate(self.rows):
                    if i not in skip and is_numeric(r[j]):
                        v = sort_key(r[j])
                        if not math.isnan(v):
                            scored.append((i, v))
                order = sorted({v for _, v in scored}, reverse=not lower)
                if len(order) < 2:  # one competitor, or all tied: nothing is best
                    continue
                for rank, value in enumerate(order[: 2 if self.highlight_second else 1], 1):
                    out.update(((i, j), rank) for i, v in scored if v == value)
        return out

    def sort_key_columns(self, shown: ShownTable) -> list[list[str]]:
        """Per cell, column by column, the text a sortable table compares: the
        full-precision number of a numeric column (``repr``, so the order is the values'
        order), the formatted text otherwise, and "" for an empty cell (NaN or None),
        which always sorts last."""
        columns = []
        for j, numeric in enumerate(shown.numeric):
            if numeric:
                keys = []
                for row in self.rows:
                    c = row[j]
                    if c is None:
                        keys.append("")
                    else:
                        v = sort_key(c)
                        keys.append("" if math.isnan(v) else repr(v))
            else:
                keys = ["" if row[j] is None else text
                        for row, text in zip(self.rows, shown.texts[j], strict=True)]
            columns.append(keys)
        return columns

    def highlighted(self) -> set[tuple[int, int]]:
        """(row, column) positions of each highlighted column's best value, ties included."""
        return {pos for pos, rank in self.ranks().items() if rank == 1}

    def formatted_rows(self) -> list[list[str]]:
        """Cells as plain (unescaped) text; the renderers escape them."""
        shown = self.shown()
        return shown.rows_of(shown.texts)


@dataclass(frozen=True, slots=True)
class ShownTable:
    """A table's cells as both renderers show them, column by column.

    Why one pass: a report can hold tables of 100,000 cells, and formatting, alignment
    and the markdown escaping decision all look at the same cell; doing it once per
    column (the format spec is per column) keeps rendering a large report fast.
    """

    texts: list[list[str]]  # per column: each cell's plain (unescaped) text
    plain: list[list[bool]]  # per column: the cell is a number or empty (shown as formatted)
    numeric: list[bool]  # per column: every non-empty cell is a number
    align: list[Align]  # per column: explicit, else right for an all-numeric column with a value
    n_rows: int

    def rows_of(self, columns: list[list[str]]) -> list[list[str]]:
        """Column lists turned into row lists."""
        if not columns:
            return [[] for _ in range(self.n_rows)]
        return [list(r) for r in zip(*columns, strict=True)]


def map_texts(fn: Callable[[str], str], texts: list[str], memo: dict[str, str]) -> list[str]:
    """``[fn(x) for x in texts]``, calling ``fn`` once per distinct text across a rendering.

    Table cells repeat ("met", "yes", task ids), so the renderers escape each distinct
    cell once. Only exact ``str`` is remembered: a ``str`` subclass equal to a remembered
    text may escape differently (``markupsafe.Markup`` does)."""
    if not set(map(type, texts)) <= {str}:
        return [fn(x) for x in texts]
    for x in set(texts).difference(memo):
        memo[x] = fn(x)
    return list(map(memo.__getitem__, texts))


def _shown_column(values: Sequence[Any], fmt: str) -> tuple[list[str], list[bool], bool]:
    """One column's texts (as :func:`format_value`), plain flags (as :func:`is_numeric`
    or None) and whether any cell has a value; the common cell types are inlined."""
    if set(map(type, values)) == {str}:  # a text column: shown as it is
        return list(values), [False] * len(values), True
    texts: list[str] = []
    plain: list[bool] = []
    text, flag = texts.append, plain.append
    filled = False
    for v in values:
        kind = type(v)
        if kind is str:
            text(v)
            flag(False)
            filled = True
        elif kind is float:
            if math.isnan(v):
                text(MISSING)
            else:
                s = format(v, fmt)
                if s[0] == "-" and (m := _NEG_ZERO.match(s)):
                    s = m.group(1) + m.group(2)
                text(s)
            flag(True)
            filled = True
        elif kind is int:
            text(str(v))
            flag(True)
            filled = True
        elif v is None:
            text(MISSING)
            flag(True)
        else:
            text(format_value(v, fmt))
            flag(is_numeric(v))
            filled = True
    return texts, plain, filled


@dataclass(slots=True)
class Figure:
    """A PNG figure, written to ``figures/<name>.png`` and inlined in the HTML report."""

    name: str
    png: bytes
    caption: str

    def __post_init__(self) -> None:
        if self.name.lower().endswith(".png"):
            self.name = self.name[:-4]
        if not _FIGURE_NAME.match(self.name) or ".." in self.name:
            raise ValueError(
                f"Figure name {self.name!r} is not a safe file stem "
                "([A-Za-z0-9_.-], no '..'); use carebench.report.figure_name() on free text"
            )
        if not bytes(self.png[:8]) == PNG_SIGNATURE:
            raise ValueError(f"Figure {self.name!r}: png does not start with the PNG signature")
        self.png = bytes(self.png)

    @property
    def filename(self) -> str:
        return f"{self.name}.png"


@dataclass(slots=True)
class Details:
    """Collapsible content: ``<details>`` in HTML, a sub-list in markdown."""

    summary: str
    blocks: list[Block] = field(default_factory=list)
    open: bool = False


Block: TypeAlias = Paragraph | Callout | Table | Figure | Details | Pre | KeyValue | Links
_BLOCK_TYPES = (Paragraph, Callout, Table, Figure, Details, Pre, KeyValue, Links)


@dataclass(slots=True)
class Headline:
    """The answer first: the box at the very top of a report, before any section.

    ``verdict`` names the best system or the decision (e.g. "Gate passed");
    ``measure`` the main measure with its scale; ``value`` its estimate and interval over
    ``n`` ``unit`` (tasks, items, personas). ``caveats`` say what limits the number (a
    small n, an interval collapsed to a point, flagged or incomplete systems). ``rows``
    are further (label, text) lines, e.g. each part of a demo. All fields are plain text,
    escaped by the renderers like every other block. Built per suite by
    :mod:`carebench.report.headline`'s helpers; rendered first by both writers.
    """

    verdict: str
    measure: str | None = None
    value: Interval | None = None
    n: int | None = None
    unit: str = ""
    caveats: list[str] = field(default_factory=list)
    rows: list[tuple[str, str]] = field(default_factory=list)
    number_format: str = ".3f"

    def __post_init__(self) -> None:
        self.caveats = [str(c) for c in self.caveats]
        self.rows = [(str(k), str(v)) for k, v in self.rows]

    def measure_text(self) -> str:
        """``"macro-F1 0.481 [0.30, 0.66] (n = 12 items)"`` as plain text ('' without a measure)."""
        if self.measure is None:
            return ""
        out = self.measure
        if self.value is not None:
            out += " " + self.value.format(self.number_format)
        if self.n is not None:
            unit = self.unit[:-1] if self.n == 1 and self.unit.endswith("s") else self.unit
            out += f" (n = {self.n}{' ' + unit if unit else ''})"
        return out


@dataclass(slots=True)
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    anchor: str | None = None

    def __post_init__(self) -> None:
        if self.anchor is not None and not _ANCHOR.match(self.anchor):
            raise ValueError(f"Section anchor {self.anchor!r} must match {_ANCHOR.pattern}")
        _check_blocks(self.blocks, self.title)


def _check_blocks(blocks: Sequence[Any], where: str) -> None:
    for b in blocks:
        if not isinstance(b, _BLOCK_TYPES):
            raise TypeError(f"{where!r}: {type(b).__name__} is not a report block")
        if isinstance(b, Details):
            _check_blocks(b.blocks, b.summary)


def iter_blocks(blocks: Sequence[Block]) -> Iterator[Block]:
    """All blocks depth-first, including those nested in :class:`Details`."""
    for b in blocks:
        yield b
        if isinstance(b, Details):
            yield from iter_blocks(b.blocks)


@dataclass(slots=True)
class Report:
    title: str
    subtitle: str | None = None
    notes: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    #: warnings shown at the very top, before anything else, in one style in every report
    #: (see :mod:`carebench.report.banners`): the embedded model, illustrative data, flagged results
    banners: list[str] = field(default_factory=list)
    #: the answer first (:class:`Headline`), shown right after the banners
    headline: Headline | None = None
    #: extra text files written beside the report (e.g. a CSV of a table too long to sort in
    #: a script-free page): file name -> content
    attachments: dict[str, str] = field(default_factory=dict)

    def anchors(self) -> list[str]:
        """One unique anchor per section (explicit, else slug of the title, deduplicated)."""
        seen: set[str] = set()
        out = []
        for s in self.sections:
            base = s.anchor or slugify(s.title)
            a, k = base, 2
            while a in seen:
                a, k = f"{base}-{k}", k + 1
            seen.add(a)
            out.append(a)
        return out

    def figures(self) -> list[Figure]:
        """Every figure once, in document order; two different figures sharing a name is an error."""
        by_name: dict[str, Figure] = {}
        for s in self.sections:
            for b in iter_blocks(s.blocks):
                if isinstance(b, Figure):
                    prev = by_name.get(b.name)
                    if prev is not None and prev.png != b.png:
                        raise ValueError(f"Two different figures are named {b.name!r}")
                    by_name.setdefault(b.name, b)
        return list(by_name.values())
