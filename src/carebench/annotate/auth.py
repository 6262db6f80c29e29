"""Secrets of the annotation server: link tokens, session tokens, CSRF tokens.

Tokens are 256 random bits; only their SHA-256 is stored, so a copied database
does not hand out working links. A plain hash (no salt, no stretching) is enough
for 256-bit random secrets, and it keeps the lookup an indexed equality.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SESSION_COOKIE = "carebench_session"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def same_secret(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a submitted CSRF token with the session's."""
    return given is not None and hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))
