"""Risk methods; importing this package registers every method in ``REGISTRY``."""

from __future__ import annotations

import importlib

from carebench.risk.methods.base import (
    REGISTRY,
    Method,
    MethodContext,
    Prediction,
    RiskItem,
    make_method,
    register,
)

#: modules that register methods (moderation + supervised; prompted LLM, schema, ensembles)
METHOD_MODULES = ("moderation", "supervised", "ordinal", "llm", "schema", "ensembles")

for _name in METHOD_MODULES:
    try:
        importlib.import_module(f"carebench.risk.methods.{_name}")
    except ModuleNotFoundError as e:  # only tolerate a module that does not exist yet
        if e.name != f"carebench.risk.methods.{_name}":
            raise

__all__ = ["REGISTRY", "Method", "MethodContext", "Prediction", "RiskItem", "make_method", "register"]
