"""Definitions that the server, the `tp` CLI, the runner and the SDK must agree on.

This package imports nothing from Django (DESIGN.md, "the one-module rule"): a manifest
that pushes is a manifest that runs, and a limit the SDK respects is the limit the
server enforces.
"""
