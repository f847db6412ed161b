"""The public import path for channel plugins: everything a channel needs from hookwise.

A plugin distribution registers its class under the `hookwise.channels` entry point group and
imports only from here (the contract lives in `hookwise.server.channels.base`).
"""

from hookwise.server.channels.base import *  # noqa: F403
from hookwise.server.channels.base import __all__ as __all__
