"""Agents: the built-in policy interface and policies (the chat runtime builds on the same context)."""

from .page_text import Page, PageItem, parse_page
from .play import EpisodeOutcome, play_episode
from .policy import Policy, PolicyAction, PolicyContext, PolicyError, Turn, context_from_messages

__all__ = [
    "EpisodeOutcome",
    "Page",
    "PageItem",
    "Policy",
    "PolicyAction",
    "PolicyContext",
    "PolicyError",
    "Turn",
    "context_from_messages",
    "parse_page",
    "play_episode",
]
