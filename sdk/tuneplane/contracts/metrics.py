"""How the console presents a metric key: its group and its display unit.

The Charts tab separates observation coverage (what the environment or evaluator
observed: `env/`, `agent/`, `eval/`, `validation/`, `coverage/`) from training health
(`train/`, `optim/`, `system/`, `hardware/`). A percent metric already is 0-100 and a
ratio 0-1 (spec: "percent display is already 0-100; ratio is 0-1"): the unit is declared
by the key's suffix, never guessed from the values. Unknown metrics stay numeric and
neutral.
"""

from __future__ import annotations

OBSERVATION_PREFIXES = ("env/", "agent/", "eval/", "validation/", "coverage/", "rollout/")
TRAINING_PREFIXES = ("train/", "optim/", "loss", "lr", "grad", "system/", "hardware/")
PERCENT_SUFFIXES = ("_pct", "_percent", "/percent", "_util", "utilization")
RATIO_SUFFIXES = ("_rate", "_ratio", "/ratio", "_fraction", "accuracy", "_acc")


def classify(key: str) -> dict[str, str | None]:
    lowered = key.lower()
    if lowered.startswith(OBSERVATION_PREFIXES):
        group = "observation"
    elif lowered.startswith(TRAINING_PREFIXES):
        group = "training"
    else:
        group = "other"
    unit: str | None = None
    if group == "other":
        return {"group": group, "unit": None}  # unknown metrics stay numeric and neutral
    if lowered.endswith(PERCENT_SUFFIXES):
        unit = "percent"
    elif lowered.endswith(RATIO_SUFFIXES):
        unit = "ratio"
    return {"group": group, "unit": unit}
