"""Text of the files `tp new` writes. Kept as Python strings, not package data, so an
installed `tp` can never lose them to a packaging mistake.

Placeholders use string.Template (`$name`); shell variables in train.sh are written as
`$${VAR}` so they survive substitution.
"""

from __future__ import annotations

TRAIN_SH = """\
#!/usr/bin/env bash
set -euo pipefail
# Entrypoint of experiment $name (recipe $recipe). The platform runs
# `bash <absolute path to this file>` from the job package root, not from this
# directory: reach your files through "$${TUNEPLANE_EXP_DIR}" and write everything you
# want to keep under "$${TUNEPLANE_OUT_DIR}". Keep the file name: the recipe's
# entrypoint is $entrypoint, and a renamed file fails submission.
#
# The job environment contract. Each check stops the script, naming the variable, if
# it is missing. Do not rename them.
$checks
# Replace the two lines below with your launch, for example:
#   exec python "$${TUNEPLANE_EXP_DIR}/train.py" \\
#     --output-dir "$${TUNEPLANE_OUT_DIR}" \\
#     --config "$${TUNEPLANE_EXP_DIR}/config.yaml"
# Pass "$${TUNEPLANE_CLUSTER_GPUS_PER_NODE}" to torchrun --nproc_per_node or
# accelerate launch --num_processes: the watchdog measures GPUs against it.
$no_command
exit 1
"""

ENV_CHECK = ': "$${$var:?$var is not set: run this script as a TunePlane job (tp submit $name)}"'

CONFIG_YAML = """\
# config.yaml of experiment $name: yours alone. Nothing in the $recipe adapter reads
# it; parse it in your train.py, e.g. with the path "$${TUNEPLANE_EXP_DIR}/config.yaml".
# `tp submit --set k=v` values land in spec.hyperparams, not in this file or your argv.
#
# learning_rate: 1.0e-5
# batch_size: 8
# epochs: 3
# seed: 42
"""

README_MD = """\
# $name

Experiment scaffolded by `tp new $name --method $recipe` (recipe version $version).

## Edit

- `$entrypoint` is the one file the platform runs (`bash <absolute path>`, working
  directory = the job package root). Replace its `exit 1` with your launch, e.g.
  `exec python "$${TUNEPLANE_EXP_DIR}/train.py" --output-dir "$${TUNEPLANE_OUT_DIR}"`.
  Do not rename it.
- `config.yaml` is yours: nothing in the adapter reads it.
- `recipe.lock.json` pins the recipe this experiment was made for. Do not edit it.
- Write everything you want to keep under `$$TUNEPLANE_OUT_DIR` (`checkpoints/`,
  `logs/`, `hf_export/`, `eval/report.json`); the scratch tree disappears with the job.

## Commit and submit

`tp` packages the committed state of `experiments/$name` (`git archive HEAD`);
uncommitted edits are not sent.

```bash
git add experiments/$name && git commit -m "$name"
tp validate $name$submit_flags
tp submit $name --profile PROFILE --image REGISTRY/IMAGE:TAG$submit_flags
tp job logs JOB --follow
```

## Environment

$entrypoint checks each of these with `:?` and stops if one is missing:

$variables
"""

# What each contract variable is (spec: bring-your-own-trainer, "The environment
# contract"), for the scaffold's README.
VARIABLE_HELP = {
    "TUNEPLANE_WORK_DIR": "the unpacked job package root (the working directory)",
    "TUNEPLANE_EXP_DIR": "this experiment's directory",
    "TUNEPLANE_OUT_DIR": "the output directory, created and isolated per run; never compose it yourself",
    "TUNEPLANE_FRAMEWORK": "the framework (`custom` for custom/custom)",
    "TUNEPLANE_RECIPE": "the recipe (`custom` for custom/custom)",
    "TUNEPLANE_CLUSTER_NUM_NODES": "nodes you actually have",
    "TUNEPLANE_CLUSTER_GPUS_PER_NODE": "GPUs per node you actually have; pass it to torchrun / accelerate",
    "TUNEPLANE_JOB_ENDPOINT": "ingest endpoint used by `tuneplane.report`",
    "TUNEPLANE_JOB_RUN_ID": "ingest run id",
    "TUNEPLANE_JOB_TOKEN": "ingest token (never print it)",
    "TUNEPLANE_JOB_ENABLED": "`1` when ingest is bound, else `0`",
}
