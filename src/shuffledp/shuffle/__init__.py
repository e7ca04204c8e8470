"""Shuffle-model protocols (and local/central baselines) behind one interface.

Build one with :func:`protocol`; run it end to end with :func:`shuffledp.pipeline.run`.
"""

from ..core.batch import Columns, concat_rows, n_rows, take_rows
from .base import Messages, Protocol, concat_messages, n_messages, take_messages
from .registry import PROTOCOL_MODULES, available_protocols, protocol, protocol_class
from .shuffler import run_shufflers, shuffle_messages

__all__ = ["Columns", "concat_rows", "n_rows", "take_rows", "Messages", "Protocol", "concat_messages", "n_messages", "take_messages", "PROTOCOL_MODULES",
           "available_protocols", "protocol", "protocol_class", "run_shufflers", "shuffle_messages"]
