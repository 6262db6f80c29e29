"""``carebench plural calibrate | freeze | label | agreement | sample | run | rescore``.

User errors raise ``CarebenchError``; the top-level CLI prints one line and exits 2.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Practitioner-calibrated reference policies and jury scoring (VEILED-SH).",
    no_args_is_help=True,
    add_completion=False,
)
