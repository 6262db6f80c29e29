"""carebench: measure how AI systems recognize and respond to suicide and self-harm risk."""

from importlib import metadata

try:
    __version__ = metadata.version("carebench")
except metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0"
