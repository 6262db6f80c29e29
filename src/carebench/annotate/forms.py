"""Reading a submitted form strictly: a body that is too large, not URL-encoded,
repeats a single-valued field, names a field the form does not have, or carries a
value outside its choices is rejected whole (HTTP 400) and nothing is stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl


class FormError(Exception):
    """A submission that cannot be stored; ``messages`` are shown to the annotator."""

    def __init__(self, *messages: str):
        super().__init__("; ".join(messages))
        self.messages = list(messages)


class Form:
    """The fields of one URL-encoded form body, in order."""

    def __init__(self, pairs: list[tuple[str, str]]):
        self.pairs = pairs

    @classmethod
    def parse(cls, body: bytes, max_fields: int = 200) -> Form:
        try:
            text = body.decode("utf-8", errors="strict")
            pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text),
                              max_num_fields=max_fields, errors="strict")
        except (UnicodeDecodeError, ValueError):
            raise FormError("the form could not be read (malformed submission)") from None
        return cls(pairs)

    def names(self) -> set[str]:
        return {k for k, _ in self.pairs}

    def only(self, allowed: Iterable[str]) -> None:
        extra = sorted(self.names() - set(allowed))
        if extra:
            raise FormError(f"unexpected field(s): {', '.join(extra)}")

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.pairs if k == name]

    def one(self, name: str, default: str | None = None) -> str | None:
        values = self.all(name)
        if len(values) > 1:
            raise FormError(f"field {name!r} was sent more than once")
        return values[0] if values else default

    def choice(self, name: str, choices: Iterable[str], label: str) -> str | None:
        """A single choice (radio); None when nothing was chosen."""
        value = self.one(name)
        if value in (None, ""):
            return None
        if value not in set(choices):
            raise FormError(f"{label}: {value!r} is not one of the options")
        return value

    def choices(self, name: str, choices: Iterable[str], label: str) -> list[str]:
        """A multi-select (checkboxes), in the order of ``choices``, without repeats."""
        allowed = list(choices)
        given = self.all(name)
        bad = [v for v in given if v not in allowed]
        if bad:
            raise FormError(f"{label}: {bad[0]!r} is not one of the options")
        return [c for c in allowed if c in given]

    def text(self, name: str, limit: int, label: str) -> str:
        value = self.one(name, "") or ""
        if len(value) > limit:
            raise FormError(f"{label} is longer than {limit} characters")
        return value.replace("\r\n", "\n").strip()
