"""The two flags every command that checks replies takes, declared once: ``--locale`` and ``--resources``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from carebench.resources.check import locale_status
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
