"""Risk corpora: validated loaders for generic files and the two named formats.

Every row is validated (pydantic) before anything else happens, so a bad file stops
the run with its file, line and field before a single model call is made.

- generic JSONL / CSV / Parquet: ``id``, ``text``, ``level`` (0-3, a level name, or
  ``negative`` for an item with no suicide-related content), optional ``group`` and
  moderation score columns ``self_harm``, ``self_harm_intent``, ``self_harm_instructions``,
  and the sampling design: ``stratum`` and ``inclusion_probability`` or ``weight`` (each
  on every row or on none);
- ``gaur``: the Reddit C-SSRS CSV of Gaur et al. (2019) (``User``, ``Post`` as a
  stringified Python list, ``Label`` in 5 levels; Supportive -> Indicator; one item per
  user; rows cut at 32,759 characters are recovered and flagged);
- ``clinician-sentences``: ``Safety type`` + ``statement`` mapped to 4 levels as in
  Beyond the Flag, Appendix H (the ambiguous category dropped);
- ``builtin:sample``: a small illustrative corpus shipped with the package;
  ``builtin:sample-with-negatives`` adds an illustrative negative stratum to it.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from carebench.datasets.builtin import builtin_file, package_file
from carebench.datasets.columns import parse_columns, rename_rows
from carebench.datasets.files import csv_rows, format_from_suffix, read_rows, read_text
from carebench.engine.rundir import data_sha256, file_sha256
from carebench.risk.methods.base import RiskItem
from carebench.risk.scale import LEVEL_NAMES, NEGATIVE_NAME, to_gold
from carebench.types import CarebenchError

FORMATS = ("jsonl", "csv", "parquet", "gaur", "clinician-sentences")
SCORE_COLUMNS = ("self_harm", "self_harm_intent", "self_harm_instructions")
#: the sampling-design columns: given on every row of a file or on none
DESIGN_COLUMNS = ("stratum", "inclusion_probability", "weight")
BUILTIN = ("sample", "sample-with-negatives")

#: Gaur et al. (2019) labels -> the 4-level scale (Supportive is absorbed into Indicator)
GAUR_LABELS = {"supportive": 0, "indicator": 0, "ideation": 1, "behavior": 2, "attempt": 3}
#: length at which 28 rows of the Gaur CSV are cut (a spreadsheet cell limit)
GAUR_CUT_LENGTH = 32_759

#: Beyond the Flag, Appendix H: the clinician taxonomy -> 4 levels; None = dropped
CLINICIAN_CATEGORIES: dict[str, int | None] = {
    "clearly_happy": 0,
    "clearly_neutral": 0,
    "clearly_sad": 0,
    "clearly_angry": 0,
    "ambiguous_emotional": None,
    "passive_si": 1,
    "active_si_no_plan": 1,
    "active_si_plan_no_intent": 2,
    "active_si_plan_with_intent": 2,
    "active_si_plan_with_intent_prep": 3,
}


class RiskRow(BaseModel):
    """One generic input row; unknown extra columns are ignored."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    level: int
    group: str | None = None
    self_harm: float | None = Field(default=None, ge=0.0, le=1.0)
    self_harm_intent: float | None = Field(default=None, ge=0.0, le=1.0)
    self_harm_instructions: float | None = Field(default=None, ge=0.0, le=1.0)
    stratum: str | None = None
    inclusion_probability: float | None = Field(default=None, gt=0.0, le=1.0)
    weight: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)

    @field_validator("id", "group", "stratum", mode="before")
    @classmethod
    def _str(cls, v: Any) -> Any:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return None
        if isinstance(v, str) and not v.strip():
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        return str(v)

    @field_validator("level", mode="before")
    @classmethod
    def _level(cls, v: Any) -> int:
        try:
            return to_gold(v)
        except CarebenchError as e:
            raise ValueError(str(e)) from None

    @field_validator(*SCORE_COLUMNS, "inclusion_probability", "weight", mode="before")
    @classmethod
    def _blank_score(cls, v: Any) -> Any:
        if v is None or (isinstance(v, str) and not v.strip()) or (isinstance(v, float) and math.isnan(v)):
            return None
        return v


@dataclass
class RiskDataset:
    """Validated items plus what a report must say about where they came from."""

    name: str
    items: list[RiskItem]
    source: str  # file path or builtin:NAME
    format: str
    sha256: str
    illustrative: bool = False
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def label_counts(self) -> dict[str, int]:
        c = Counter(it.level for it in self.items)
        counts = {name: int(c.get(i, 0)) for i, name in enumerate(LEVEL_NAMES)}
        if self.has_negatives:  # only then, so a data set without them describes itself as before
            counts[NEGATIVE_NAME] = sum(it.negative for it in self.items)
        return counts

    @property
    def has_negatives(self) -> bool:
        return any(it.negative for it in self.items)

    @property
    def groups(self) -> list[str] | None:
        if all(it.group is None for it in self.items):
            return None
        return [it.group if it.group is not None else f"item:{it.id}" for it in self.items]

    @property
    def design(self) -> dict[str, Any]:
        """The sampling design the items carry (strata, weights), {} for a simple sample."""
        out: dict[str, Any] = {}
        if any(it.stratum is not None for it in self.items):
            out["strata"] = dict(Counter(str(it.stratum) for it in self.items))
        if any(it.weight is not None for it in self.items):
            out["weighted"] = True
            out["weight_sum"] = float(sum(it.weight or 1.0 for it in self.items))
        if out and self.meta.get("population"):
            out["population"] = self.meta["population"]
        return out

    def describe(self) -> dict[str, Any]:
        design = self.design
        return {**({"design": design} if design else {}),
            "name": self.name,
            "source": self.source,
            "format": self.format,
            "sha256": self.sha256,
            "n": len(self.items),
            "label_counts": self.label_counts,
            "illustrative": self.illustrative,
            "notes": list(self.notes),
            **self.meta,
        }


# ----------------------------------------------------------------------------- entry point


#: fields a ``--columns`` mapping may point at a user's columns
MAPPABLE = ("id", "text", "level", "group", *SCORE_COLUMNS, *DESIGN_COLUMNS)


def load_dataset(spec: str | Path, fmt: str | None = None,
                 columns: str | dict[str, Any] | None = None) -> RiskDataset:
    """Load ``builtin:NAME`` or a file; ``fmt`` defaults to detection from name and header.

    ``columns`` maps fields to the file's column names (``text=post,level=label``) for
    the generic formats; see :mod:`carebench.datasets.columns`.
    """
    s = str(spec)
    mapping = parse_columns(columns, MAPPABLE)
    if s.startswith("builtin:"):
        if mapping:
            raise CarebenchError("--columns applies to data files, not builtin corpora")
        return load_builtin(s.split(":", 1)[1])
    path = Path(s)
    if not path.is_file():
        raise CarebenchError(f"data file not found: {path}")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise CarebenchError(f"unknown data format {fmt!r}; known: {', '.join(FORMATS)}")
    if mapping and fmt not in ("jsonl", "csv", "parquet"):
        raise CarebenchError(f"--columns applies to jsonl, csv and parquet files, not {fmt!r}")
    if fmt == "gaur":
        items, meta, notes = _load_gaur(path)
    elif fmt == "clinician-sentences":
        items, meta, notes = _load_clinician(path)
    else:
        items, meta, notes = _load_generic(path, fmt, mapping), {}, []
        if mapping:
            meta["columns"] = mapping
    if not items:
        raise CarebenchError(f"{path}: no items")
    _check_unique(items, path)
    _check_design(items, path)
    side = sidecar_meta(path)
    if side.get("description"):
        notes = [*notes, str(side["description"])]
    if side.get("derived_from"):
        meta["derived_from"] = side["derived_from"]
    if side.get("population"):  # what the inclusion probabilities were drawn from
        meta["population"] = str(side["population"])
    return RiskDataset(
        name=path.stem, items=items, source=str(path), format=fmt, sha256=file_sha256(path),
        illustrative=bool(side.get("illustrative", False)), notes=notes, meta=meta,
    )


def sidecar_meta(path: Path) -> dict[str, Any]:
    """``NAME.meta.json`` beside a data file ``NAME.EXT``, as the built-in corpora have: what a
    copy of illustrative data (e.g. the demo's subset of the built-in sample) must keep saying."""
    side = path.with_name(f"{path.stem}.meta.json")
    if not side.is_file():
        return {}
    try:
        data = json.loads(side.read_text("utf-8"))
    except (OSError, ValueError) as e:
        raise CarebenchError(f"{side}: not valid JSON ({e})") from None
    return data if isinstance(data, dict) else {}


def detect_format(path: Path) -> str:
    fmt = format_from_suffix(path) or ("jsonl" if path.suffix.lower() == ".json" else None)
    if fmt in ("jsonl", "parquet"):
        return fmt
    if fmt == "csv":
        header = _csv_header(path)
        if {"User", "Post", "Label"} <= set(header):
            return "gaur"
        if {"Safety type", "statement"} <= set(header):
            return "clinician-sentences"
        return "csv"
    raise CarebenchError(f"{path}: cannot tell the format from the extension; pass --format")


def _csv_header(path: Path) -> list[str]:
    with io.StringIO(read_text(path), newline="") as fh:
        return next(csv.reader(fh), [])


def _check_design(items: list[RiskItem], path: Path | str) -> None:
    """A stratum or weight on some items but not others is refused: a missing weight read
    as 1 beside weights of 50 would silently make those items fifty times rarer."""
    for what, present in (("a stratum", [it.stratum is not None for it in items]),
                          ("an inclusion_probability or weight", [it.weight is not None for it in items])):
        if any(present) and not all(present):
            first = items[present.index(False)].id
            raise CarebenchError(f"{path}: {sum(present)} of {len(items)} items have {what} and "
                                 f"the others do not (first without: item {first!r}); give it on every "
                                 "row or on none")


def _check_unique(items: list[RiskItem], path: Path | str) -> None:
    seen: set[str] = set()
    for it in items:
        if it.id in seen:
            raise CarebenchError(f"{path}: duplicate id {it.id!r}")
        seen.add(it.id)


# ----------------------------------------------------------------------------- generic


def _load_generic(path: Path, fmt: str, mapping: dict[str, str] | None = None) -> list[RiskItem]:
    items = []
    header = _csv_header(path) if fmt == "csv" else None  # named in a missing-field error
    for loc, raw in rename_rows(read_rows(path, fmt), mapping or {}, str(path)):
        if "level" not in raw and "label" in raw:
            raw = {**raw, "level": raw["label"]}
        items.append(_validate(raw, path, loc, columns=header))
    return items


def _validate(raw: dict[str, Any], path: Path | str, loc: str, *, columns: list[str] | None = None,
              **meta: Any) -> RiskItem:
    try:
        row = RiskRow.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        fld = ".".join(str(p) for p in err["loc"]) or "row"
        msg = err["msg"].removeprefix("Value error, ")
        if err.get("type") == "missing" and len(err["loc"]) == 1:  # a column under another name?
            msg += (f"; name the column that holds it with --columns {fld}=COLUMN "
                    f"(this file's columns: {', '.join(map(str, columns if columns is not None else raw)) or 'none'})")
        raise CarebenchError(f"{path}: {loc}: field {fld!r}: {msg}") from None
    scores = {c: float(getattr(row, c)) for c in SCORE_COLUMNS if getattr(row, c) is not None}
    if row.inclusion_probability is not None and row.weight is not None:
        raise CarebenchError(f"{path}: {loc}: give inclusion_probability or weight, not both")
    weight = 1.0 / row.inclusion_probability if row.inclusion_probability is not None else row.weight
    return RiskItem(id=row.id, text=row.text, level=row.level, group=row.group, scores=scores,
                    meta=dict(meta), stratum=row.stratum, weight=weight)


# ----------------------------------------------------------------------------- gaur


def recover_post_list(literal: str) -> tuple[list[str], bool]:
    """Parse a stringified list of posts; recover the complete posts of a truncated one.

    Returns ``(posts, recovered)``. A literal cut mid-way does not parse; every post
    that ended before the cut is kept and the partial last one is dropped (we cannot
    know how it ended). Raises ValueError if not even one complete post is present.
    """
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        value = None
    if isinstance(value, list):
        return [str(p) for p in value], False
    text = literal.rstrip()
    try:  # cut right after a post's closing quote
        value = ast.literal_eval(text.rstrip(", ") + "]")
        if isinstance(value, list) and value:
            return [str(p) for p in value], True
    except (ValueError, SyntaxError):
        pass
    # candidate cut points: a closing quote followed by the ", " that starts the next post
    pos = len(text)
    while True:
        cut = max(text.rfind("', ", 0, pos), text.rfind('", ', 0, pos))
        if cut <= 0:
            raise ValueError("no complete post could be recovered")
        try:
            value = ast.literal_eval(text[: cut + 1] + "]")
        except (ValueError, SyntaxError):
            pos = cut
            continue
        if isinstance(value, list) and value:
            return [str(p) for p in value], True
        pos = cut


def _load_gaur(path: Path) -> tuple[list[RiskItem], dict[str, Any], list[str]]:
    items: list[RiskItem] = []
    recovered: list[str] = []
    for line, row in csv_rows(path):
        for col in ("User", "Post", "Label"):
            if not (row.get(col) or "").strip():
                raise CarebenchError(f"{path}: line {line}: field {col!r}: missing")
        label = row["Label"].strip()
        if label.lower() not in GAUR_LABELS:
            raise CarebenchError(
                f"{path}: line {line}: field 'Label': unknown label {label!r} "
                f"(expected one of Supportive, Indicator, Ideation, Behavior, Attempt)"
            )
        try:
            posts, was_cut = recover_post_list(row["Post"])
        except ValueError as e:
            raise CarebenchError(f"{path}: line {line}: field 'Post': {e}") from None
        posts = [p.strip() for p in posts if p.strip()]
        if not posts:
            raise CarebenchError(f"{path}: line {line}: field 'Post': no post text")
        user = row["User"].strip()
        meta: dict[str, Any] = {"source_label": label, "n_posts": len(posts)}
        if was_cut:
            meta.update(recovered=True, truncated_at=len(row["Post"]))
            recovered.append(user)
        items.append(
            _validate(
                {"id": user, "text": "\n\n".join(posts), "level": GAUR_LABELS[label.lower()],
                 "group": user},
                path, f"line {line}", **meta,
            )
        )
    notes = [(
        "Gaur et al. (2019) Reddit C-SSRS corpus: one item per user (all of the user's posts "
        "joined); labels are user-level; Supportive is mapped to Indicator."
    )]
    if recovered:
        notes.append(
            f"{len(recovered)} rows were cut in the source file (at about {GAUR_CUT_LENGTH:,} "
            "characters); their complete posts were recovered and the partial last post dropped "
            "(flagged 'recovered' in the records)."
        )
    return items, {"recovered_rows": len(recovered), "recovered_ids": recovered}, notes


# ----------------------------------------------------------------------------- clinician


def _load_clinician(path: Path) -> tuple[list[RiskItem], dict[str, Any], list[str]]:
    items: list[RiskItem] = []
    dropped = 0
    for line, row in csv_rows(path):
        cat = (row.get("Safety type") or "").strip()
        text = (row.get("statement") or "").strip()
        if not cat:
            raise CarebenchError(f"{path}: line {line}: field 'Safety type': missing")
        key = cat.lower()
        if key not in CLINICIAN_CATEGORIES:
            raise CarebenchError(
                f"{path}: line {line}: field 'Safety type': unknown category {cat!r} "
                f"(known: {', '.join(CLINICIAN_CATEGORIES)})"
            )
        level = CLINICIAN_CATEGORIES[key]
        if level is None:
            dropped += 1
            continue
        ident = (row.get("id") or row.get("ID") or "").strip() or f"line-{line}"
        items.append(
            _validate({"id": ident, "text": text, "level": level}, path, f"line {line}",
                      source_category=key)
        )
    notes = [(
        "Clinician-authored single sentences; categories mapped to the 4 levels as in "
        f"Beyond the Flag, Appendix H; {dropped} 'ambiguous_emotional' statements dropped."
    )]
    return items, {"dropped_ambiguous": dropped}, notes


# ----------------------------------------------------------------------------- builtin


def load_builtin(name: str) -> RiskDataset:
    """A built-in corpus; a sidecar's ``bases`` are read first (``sample-with-negatives`` is
    the built-in sample followed by its file's negative stratum, so the 48 posts live in one
    file only)."""
    path = builtin_file("risk", name, {n: f"{n}.jsonl" for n in BUILTIN}, "built-in dataset")
    meta = json.loads(package_file("risk", f"{name}.meta.json").read_text("utf-8"))
    items = []
    rows = []
    for base in [*meta.get("bases", []), name]:
        for loc, raw in read_rows(package_file("risk", f"{base}.jsonl") if base != name else path, "jsonl"):
            rows.append(raw)
            items.append(_validate(raw, f"builtin:{base}", loc))
    _check_unique(items, f"builtin:{name}")
    _check_design(items, f"builtin:{name}")
    return RiskDataset(
        name=name, items=items, source=f"builtin:{name}", format="jsonl",
        sha256=data_sha256(rows), illustrative=bool(meta.get("illustrative", True)),
        notes=[meta["description"]], meta={"license": meta.get("license"),
                                           **({"population": meta["population"]} if meta.get("population") else {})},
    )
