"""Profile methods E0-E5 behind one interface (VEILED-SH, §5.2 and Appendix B.2)."""

from __future__ import annotations

from carebench.plural.profiles.base import Env, FitData, Profile, ProfileMethod
from carebench.plural.profiles.gepa_light import GepaLight
from carebench.plural.profiles.memalign import CascadedMemAlign, MemAlign
from carebench.plural.profiles.nearest import NearestNeighbour
from carebench.plural.profiles.prompted import FewShot, ZeroShot
from carebench.types import CarebenchError

METHODS: dict[str, type] = {
    "E0": NearestNeighbour,
    "E1": ZeroShot,
    "E2": FewShot,
    "E3": GepaLight,
    "E4": MemAlign,
    "E5": CascadedMemAlign,
}


def get_method(name: str) -> ProfileMethod:
    try:
        return METHODS[name.upper()]()
    except KeyError:
        raise CarebenchError(f"unknown profile method {name!r} (choose from {', '.join(METHODS)})") from None


__all__ = ["METHODS", "Env", "FitData", "Profile", "ProfileMethod", "get_method"]
