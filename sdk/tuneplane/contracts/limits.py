"""Ingest limits. The SDK batches within them; the server rejects a batch that exceeds
them whole (DESIGN.md, "Over-limit batches are rejected whole and explicitly")."""

from __future__ import annotations

SCALAR_BATCH_MAX_POINTS = 2048
SCALAR_SERIES_MAX_PER_RUN = 4096
SCALAR_KEY_MAX_CHARS = 256
SCALAR_QUEUE_MAX_POINTS = 100_000
EVENT_QUEUE_MAX = 128
EVENT_MAX_BYTES = 16 * 1024
EVENT_MAX_FIELDS = 32
HISTOGRAM_MAX_BOUNDS = 64
TRAJECTORY_MAX_BYTES = 1024 * 1024
TRAJECTORY_MAX_MESSAGES = 1024

LOG_BATCH_MAX_LINES = 1000
LOG_LINE_MAX_CHARS = 16 * 1024  # longer lines are split by the runner, never dropped
LOG_BATCH_MAX_BYTES = 4 * 1024 * 1024

HPARAMS_MAX_BYTES = 64 * 1024
PACKAGE_MAX_BYTES = 256 * 1024 * 1024
PACKAGE_MAX_MEMBERS = 20_000

# Observations (events, distributions, health snapshots).
EVENT_BATCH_MAX = 32  # Reporter.observations sends at most this many per request
EVENT_ID_MAX_CHARS = 128
EVENT_NAME_MAX_CHARS = 128
EVENT_STRING_MAX_CHARS = 1024  # a string field's value
RECENT_EVENTS = 100  # the events panel shows the latest 100

# Transport health: the SDK reports its counters this often; a heartbeat older than
# HEARTBEAT_STALE_FACTOR intervals is "unknown", never "stopped".
HEARTBEAT_INTERVAL_SECONDS = 30.0
HEARTBEAT_STALE_FACTOR = 3

# The run's capability snapshot (init(capabilities=...)).
CAPABILITIES_MAX = 64
CAPABILITY_NAME_MAX_CHARS = 64
