"""Crisis resources: a versioned registry and the deterministic check of where a reply sends a person.

A core package (it imports no suite). Stable API for the suites, the CLI and users:

- :func:`builtin_registry` / :func:`load_registry` (``--resources FILE``: carebench JSON,
  an open-helplines directory, or the plain CSV) return a :class:`Registry` with
  ``.version``, ``.sha256``, ``.summary()`` (what a run's manifest records),
  ``.for_country(CC)``;
- :func:`check_reply` (text, locale, registry) -> :class:`ReplyCheck` ``(routing,
  mentions)``; :func:`check_conversation` for a chatbot's turns taken together;
  :func:`locale_status` for a missing or invalid locale (never guessed);
  :func:`routing_of` for the verdict of any set of :class:`Mention` s;
  :func:`offers_crisis_resource` for over-referral (a crisis line given at all).

The rules (what is and is not a mention, the verdicts) are in :mod:`.check` and
docs/resources.md.
"""

from carebench.resources.builtin import builtin_registry, load_registry
from carebench.resources.check import (
    MATCHES,
    VERDICTS,
    ConversationCheck,
    LocaleStatus,
    Mention,
    ReplyCheck,
    check_conversation,
    check_reply,
    find_mentions,
    locale_status,
    offers_crisis_resource,
    routing_of,
)
from carebench.resources.formats import read_registry
from carebench.resources.registry import (
    KINDS,
    METHODS,
    Contact,
    Registry,
    Resource,
)

__all__ = [
    "KINDS", "MATCHES", "METHODS", "VERDICTS", "Contact", "ConversationCheck", "LocaleStatus", "Mention",
    "Registry", "ReplyCheck", "Resource", "builtin_registry", "check_conversation", "check_reply",
    "find_mentions", "load_registry", "locale_status", "offers_crisis_resource", "read_registry", "routing_of",
]
