"""Entry point of `python -m tuneplane.runner`."""

from __future__ import annotations

import sys

from .job import main

if __name__ == "__main__":
    sys.exit(main())
