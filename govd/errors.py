"""Errors every layer of govd may raise and the commands turn into one line.

A leaf: it imports nothing from govd, so the device, configuration, daemon and evaluator
layers can raise these without importing the command line (`govd.cli`, `govd.commands`).
"""

from __future__ import annotations


class UsageError(Exception):
    """A problem with what the user asked for; printed as one line, exit status 2."""
