"""Shuffle-model protocols (and local/central baselines) behind one interface.

Build one with :func:`protocol`; run it end to end with :func:`shuffledp.pipeline.run`.
"""

from .base import Messages, Protocol, concat_messages, n_messages, take_messages
from .registry import PROTOCOL_MODULES, available_protocols, protocol, protocol_class
from .shuffler import run_shufflers, shuffle_messages

__all__ = ["Messages", "Protocol", "concat_messages", "n_messages", "take_messages", "PROTOCOL_MODULES",
           "available_protocols", "protocol", "protocol_class", "run_shufflers", "shuffle_messages"]
