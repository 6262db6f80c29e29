"""Anonymization chain (VEILED-SH §4.4, Appendix A.4).

1. named-entity replacement by a pluggable backend (default: Presidio pattern
   recognizers for Singapore NRIC/FIN, phone numbers, e-mail, URLs and handles;
   with ``spacy=NAME`` also person/place names from an installed spaCy pipeline);
2. reversal of known over-replacements (a user-editable list: lexicon words an
   NER model takes for names, local acronyms);
3. literal residual checks (user strings such as platform or user names, and
   every identifier replaced elsewhere in the set);
4. regex residual checks (identifier shapes the backend should have caught);
5. restoration of rows whose source was de-identified upstream.

Residual hits are listed in the report and, by default, stop the stage (they
"fail loudly"); ``on_residual="drop"`` removes the rows instead. Nothing is
downloaded: the backend never loads a model that is not installed.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from carebench.types import CarebenchError

#: replacement text per entity type (anything else becomes ``[ENTITY_TYPE]``)
PLACEHOLDERS = {
    "PERSON": "[NAME]",
    "LOCATION": "[PLACE]",
    "GPE": "[PLACE]",
    "ORGANIZATION": "[ORG]",
    "SG_NRIC_FIN": "[NRIC]",
    "PHONE_NUMBER": "[PHONE]",
    "EMAIL_ADDRESS": "[EMAIL]",
    "URL": "[URL]",
    "HANDLE": "[HANDLE]",
}
PATTERN_ENTITIES = ("SG_NRIC_FIN", "PHONE_NUMBER", "EMAIL_ADDRESS", "URL", "HANDLE")
NER_ENTITIES = ("PERSON", "LOCATION", "ORGANIZATION")

#: identifier shapes that must not survive (step 4); names are the entity they indicate
RESIDUAL_PATTERNS: dict[str, str] = {
    "SG_NRIC_FIN": r"(?i)\b[STFGM]\d{7}[A-Z]\b",
    "PHONE_NUMBER": r"(?<!\d)(?:\+?65[\s-]?)?[689]\d{3}[\s-]?\d{4}(?!\d)",
    "EMAIL_ADDRESS": r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b",
    "URL": r"(?i)\b(?:https?://|www\.)\S+",
    "HANDLE": r"(?<![\w@])@[A-Za-z0-9_]{3,}\b",
}
_HANDLE = r"(?<![\w@.])@[A-Za-z0-9_](?:[A-Za-z0-9_.]{1,28}[A-Za-z0-9_])?(?![\w@])"
_SG_PHONE = r"(?<!\d)(?:\+65[\s-]?)?[689]\d{3}[\s-]?\d{4}(?!\d)"


@dataclass(frozen=True)
class Span:
    entity: str
    start: int
    end: int
    score: float
    text: str


class Backend(Protocol):
    name: str
    ner: bool

    def detect(self, text: str) -> list[Span]: ...


class PresidioBackend:
    """Presidio's analyzer with a registry built here (no default model loading).

    ``spacy_model`` names an installed spaCy pipeline package or a pipeline
    directory; it is never downloaded. Without one the NLP engine is Presidio's
    no-op engine and only pattern recognizers run.
    """

    def __init__(
        self,
        spacy_model: str | None = None,
        names: list[str] | None = None,
        threshold: float = 0.3,
        regions: tuple[str, ...] = ("SG",),
    ):
        _import_presidio()
        try:
            from presidio_analyzer import (
                AnalyzerEngine,
                Pattern,
                PatternRecognizer,
                RecognizerRegistry,
            )
            from presidio_analyzer.predefined_recognizers import (
                PhoneRecognizer,
                SgFinRecognizer,
                UrlRecognizer,
            )
        except ImportError:
            raise CarebenchError(
                "the Presidio anonymizer needs the 'construct' extra: pip install 'carebench[construct]'"
            ) from None
        self.threshold = threshold
        self.ner = spacy_model is not None
        self.name = f"presidio:spacy={spacy_model}" if spacy_model else "presidio"
        nlp_engine = _nlp_engine(spacy_model)
        registry = RecognizerRegistry(supported_languages=["en"])
        registry.add_recognizer(SgFinRecognizer())
        registry.add_recognizer(PhoneRecognizer(supported_regions=regions))
        registry.add_recognizer(PatternRecognizer("PHONE_NUMBER", name="SgPhone",
                                                  patterns=[Pattern("sg phone", _SG_PHONE, 0.6)]))
        registry.add_recognizer(_offline_email_recognizer())
        registry.add_recognizer(UrlRecognizer())
        registry.add_recognizer(PatternRecognizer("HANDLE", name="Handle", patterns=[Pattern("handle", _HANDLE, 0.6)]))
        if names:  # a known-name list (forum user names, people in the data) works without NER
            registry.add_recognizer(PatternRecognizer("PERSON", name="KnownNames", deny_list=list(names)))
        if self.ner:
            from presidio_analyzer.predefined_recognizers import SpacyRecognizer

            registry.add_recognizer(SpacyRecognizer(supported_entities=list(NER_ENTITIES)))
        self.entities = list(PATTERN_ENTITIES) + (list(NER_ENTITIES) if self.ner else ["PERSON"] if names else [])
        self._engine = AnalyzerEngine(registry=registry, nlp_engine=nlp_engine, supported_languages=["en"])

    def detect(self, text: str) -> list[Span]:
        results = self._engine.analyze(text=text, language="en", entities=self.entities,
                                       score_threshold=self.threshold)
        return [Span(r.entity_type, r.start, r.end, float(r.score), text[r.start : r.end]) for r in results]


def _import_presidio() -> None:
    """Import Presidio without its optional Hugging Face engine: that import pulls in
    transformers (seconds of start-up) for an engine carebench never uses."""
    import sys

    if "presidio_analyzer" in sys.modules:
        return
    masked = "transformers" not in sys.modules
    if masked:
        sys.modules["transformers"] = None  # type: ignore[assignment]  # presidio treats it as absent
    try:
        import presidio_analyzer  # noqa: F401
    except ImportError:
        pass  # reported by the caller with the extra to install
    finally:
        if masked and sys.modules.get("transformers", 0) is None:
            del sys.modules["transformers"]


def _nlp_engine(spacy_model: str | None) -> Any:
    if spacy_model is None:
        from presidio_analyzer.nlp_engine import NoOpNlpEngine

        return NoOpNlpEngine(models=[{"lang_code": "en", "model_name": "none"}])
    import spacy
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    if not (spacy.util.is_package(spacy_model) or Path(spacy_model).is_dir()):
        raise CarebenchError(
            f"spaCy pipeline {spacy_model!r} is not installed (install it from PyPI or give a pipeline "
            "directory; carebench never downloads models at run time)"
        )
    return SpacyNlpEngine(models=[{"lang_code": "en", "model_name": spacy_model}])


def _offline_email_recognizer() -> Any:
    """Presidio's e-mail recognizer checks domains with tldextract, which fetches the
    public-suffix list over the network by default; use its bundled snapshot only."""
    import tldextract
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    class OfflineEmailRecognizer(EmailRecognizer):
        def validate_result(self, pattern_text: str) -> bool:
            return extract(pattern_text).fqdn != ""

    return OfflineEmailRecognizer()


def make_backend(spec: str, names: list[str] | None = None) -> Backend:
    """``presidio`` (patterns only) or ``presidio:spacy=NAME_OR_DIR`` (adds NER);
    ``names`` is an optional list of known names replaced as PERSON either way."""
    name, _, opt = spec.partition(":")
    if name != "presidio":
        raise CarebenchError(f"unknown anonymizer backend {spec!r} (use presidio or presidio:spacy=NAME)")
    if not opt:
        return PresidioBackend(names=names)
    key, _, val = opt.partition("=")
    if key != "spacy" or not val:
        raise CarebenchError(f"anonymizer option {opt!r} not understood (use spacy=NAME_OR_DIR)")
    return PresidioBackend(spacy_model=val, names=names)


def load_phrase_list(path: str | Path | None) -> list[str]:
    """One entry per line; blank lines and ``#`` comments skipped."""
    if path is None:
        return []
    from carebench.construct.io import resolve

    p = resolve(path)
    try:
        lines = p.read_text("utf-8").splitlines()
    except OSError as e:
        raise CarebenchError(f"cannot read {p}: {e.strerror}") from None
    return [s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#")]


@dataclass
class RowResult:
    id: str
    text: str  # the released text
    replaced: list[Span] = field(default_factory=list)
    reversed: list[Span] = field(default_factory=list)
    residual: list[dict[str, str]] = field(default_factory=list)
    restored: bool = False


@dataclass
class ChainResult:
    rows: list[RowResult]
    backend: str
    ner: bool
    counts: dict[str, dict[str, int]]  # step -> entity -> count
    residual_hits: list[dict[str, str]]

    def summary(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "ner": self.ner,
            "ner_note": None if self.ner else "no NER model: pattern recognizers only (names are not detected)",
            "rows": len(self.rows),
            "counts": self.counts,
            "residual_hits": self.residual_hits,
            "restored_rows": sum(r.restored for r in self.rows),
        }


def _apply(text: str, spans: list[Span]) -> str:
    out, pos = [], 0
    for s in sorted(spans, key=lambda s: s.start):
        out.append(text[pos : s.start])
        out.append(PLACEHOLDERS.get(s.entity, f"[{s.entity}]"))
        pos = s.end
    out.append(text[pos:])
    return "".join(out)


def _non_overlapping(spans: list[Span]) -> list[Span]:
    """Highest score first, then longest; a span overlapping a kept one is dropped."""
    kept: list[Span] = []
    for s in sorted(spans, key=lambda s: (-s.score, -(s.end - s.start), s.start)):
        if all(s.end <= k.start or s.start >= k.end for k in kept):
            kept.append(s)
    return sorted(kept, key=lambda s: s.start)


def anonymize_rows(
    rows: list[tuple[str, str, bool]],
    backend: Backend,
    reversals: list[str],
    literals: list[str],
    residual_patterns: dict[str, str] | None = None,
) -> ChainResult:
    """Run the chain over ``(id, text, deidentified_upstream)`` rows."""
    rev = {r.casefold() for r in reversals}
    pats = {k: re.compile(v) for k, v in (RESIDUAL_PATTERNS if residual_patterns is None else residual_patterns).items()}
    counts: dict[str, Counter] = {"1_replaced": Counter(), "2_reversed": Counter(), "3_literal_hits": Counter(),
                                  "4_regex_hits": Counter(), "5_restored": Counter()}
    results: list[RowResult] = []
    seen_identifiers: set[str] = set()
    for rid, text, _ in rows:
        spans = _non_overlapping(backend.detect(text))
        keep = [s for s in spans if s.text.strip().casefold() not in rev]
        back = [s for s in spans if s.text.strip().casefold() in rev]
        counts["1_replaced"].update(s.entity for s in spans)
        counts["2_reversed"].update(s.entity for s in back)
        seen_identifiers.update(s.text for s in keep if len(s.text.strip()) >= 3)
        results.append(RowResult(rid, _apply(text, keep), keep, back))
    lits = sorted(set(literals) | seen_identifiers, key=lambda x: (-len(x), x))
    by_fold = {lit.casefold(): lit for lit in reversed(lits)}
    one = re.compile("(?<!\\w)(?:" + "|".join(re.escape(x) for x in lits) + ")(?!\\w)", re.IGNORECASE) if lits else None
    hits: list[dict[str, str]] = []
    for res in results:
        found = sorted({by_fold.get(m.group(0).casefold(), m.group(0)) for m in one.finditer(res.text)}) if one else []
        for lit in found:
            res.residual.append({"id": res.id, "check": "literal", "what": lit})
            counts["3_literal_hits"]["literal"] += 1
        for name, pat in pats.items():
            for m in pat.finditer(res.text):
                res.residual.append({"id": res.id, "check": "regex", "what": f"{name}: {m.group(0)}"})
                counts["4_regex_hits"][name] += 1
        hits.extend(res.residual)
    for res, (_, text, deid) in zip(results, rows, strict=True):
        if deid:
            res.text, res.restored = text, True
            counts["5_restored"]["rows"] += 1
    return ChainResult(results, backend.name, backend.ner, {k: dict(v) for k, v in counts.items()}, hits)
