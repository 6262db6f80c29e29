"""Risk methods; importing this package registers every method in ``REGISTRY``."""

from __future__ import annotations

# importing the method modules registers their methods; a renamed module must fail here
from carebench.risk.methods import ensembles, llm, moderation, ordinal, schema, supervised  # noqa: F401
from carebench.risk.methods.base import (
    REGISTRY,
    MethodContext,
    RiskItem,
    RiskMethod,
    RiskPrediction,
    make_method,
    register,
)

__all__ = ["REGISTRY", "MethodContext", "RiskItem", "RiskMethod", "RiskPrediction", "make_method", "register"]
