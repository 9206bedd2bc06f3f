"""TunePlane SDK. `tuneplane.report` for metrics; `python -m tuneplane.runner` inside jobs."""

__version__ = "0.1.0"
