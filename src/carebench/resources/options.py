"""The two flags every command that checks replies takes, declared once: ``--locale`` and ``--resources``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from carebench.resources.builtin import load_registry
from carebench.resources.check import locale_status
from carebench.resources.registry import Registry
from carebench.types import CarebenchError

LocaleOption = Annotated[str | None, typer.Option(
    "--locale", show_default="none: items without their own locale are reported as such",
    help="BCP-47 locale with a region (e.g. pt-BR) for every item that has none; where replies should "
         "send a person is checked against it.")]
ResourcesOption = Annotated[Path | None, typer.Option(
    "--resources", show_default="the built-in registry",
    help="Crisis-resource registry (carebench JSON, the plain CSV, or an open-helplines directory) to check "
         "replies against.")]


def run_locale(locale: str | None) -> str | None:
    """``--locale`` checked before any model call: one line if it names no country."""
    if locale is None:
        return None
    st = locale_status(locale)
    if st.status != "ok":
        raise CarebenchError(f"--locale: {st.message}")
    return locale.strip()


def item_locale(own: str | None, run: str | None) -> str | None:
    """An item's own locale, else the run's ``--locale``, else none (never guessed)."""
    return own if own is not None and str(own).strip() else run


def recheck_against(resources: Path | str | None, locale: str | None, manifest: Mapping[str, Any],
                    run_dir: Path | str, out_dir: Path | str | None, what: str
                    ) -> tuple[tuple[Registry, str | None] | None, dict[str, Any] | None]:
    """A re-score's ``--resources``/``--locale``: ``((registry, locale), manifest block)``, or
    ``(None, None)`` when neither is given. The locale defaults to the one the run recorded.
    A re-check needs its own ``--out``: the run's records keep the checks it recorded."""
    if resources is None and locale is None:
        return None, None
    if out_dir is None or Path(out_dir).resolve() == Path(run_dir).resolve():
        raise CarebenchError(f"--resources/--locale re-check the {what}: give --out (the run's records "
                             "keep the checks it recorded)")
    registry = load_registry(resources)
    loc = run_locale(locale) if locale is not None else (manifest.get("resources") or {}).get("locale")
    return (registry, loc), {**registry.summary(), "locale": loc}
