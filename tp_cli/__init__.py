"""The `tp` command: a thin client of the TunePlane REST API (docs/api.md)."""

from __future__ import annotations

__version__ = "0.1.0"
