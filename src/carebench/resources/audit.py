"""What a registry's maintainer must look at: entries without a source, entries not
confirmed recently, and countries missing a crisis line or an emergency number.

A routing verdict is only as good as the registry behind it (docs/resources.md). An
entry with no source cannot be re-checked by anyone, so :func:`audit` counts it as an
error (``carebench resources audit`` exits non-zero); an entry whose ``checked`` date is
missing or older than ``months`` months is listed as stale; a country with entries of
one kind only is listed as lacking the other.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from carebench.resources.registry import KINDS, Registry, Resource

#: a source that names a page a reader can open
_URL = re.compile(r"https?://\S+")


@dataclass(frozen=True)
class Audit:
    """The findings; ``ok`` is False when an entry has no source."""

    no_source: tuple[Resource, ...]
    no_url: tuple[Resource, ...]
    stale: tuple[Resource, ...]
    missing: tuple[tuple[str, str], ...]  # (country, kind)
    cutoff: datetime.date

    @property
    def ok(self) -> bool:
        return not self.no_source


def months_before(day: datetime.date, months: int) -> datetime.date:
    """``day`` moved back ``months`` calendar months (the 31st becomes the month's last day)."""
    y, m = divmod(day.year * 12 + day.month - 1 - months, 12)
    m += 1
    for d in (day.day, 30, 29, 28):
        try:
            return datetime.date(y, m, d)
        except ValueError:
            continue
    raise AssertionError("unreachable")


def audit(registry: Registry, today: datetime.date, months: int = 12) -> Audit:
    """The findings for ``registry`` as of ``today``: an entry is stale when its ``checked``
    date is missing or before ``today`` minus ``months`` months."""
    cutoff = months_before(today, months)
    no_source = tuple(r for r in registry.resources if not (r.source or "").strip())
    no_url = tuple(r for r in registry.resources if (r.source or "").strip() and not _URL.search(r.source))
    stale = tuple(r for r in registry.resources
                  if r.checked is None or datetime.date.fromisoformat(r.checked) < cutoff)
    missing = tuple((cc, kind) for cc in registry.countries for kind in KINDS
                    if not any(r.kind == kind for r in registry.for_country(cc)))
    return Audit(no_source, no_url, stale, missing, cutoff)
