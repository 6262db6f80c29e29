"""``python -m carebench`` is the ``carebench`` command."""

from carebench.cli import entrypoint

entrypoint()
