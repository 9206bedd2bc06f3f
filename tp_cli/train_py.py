"""The scaffold's train.py for catalogue recipes whose entrypoint is a Python file
(pytorch/image-classification, trl/sft). The runner starts it under torchrun with the
recipe's checked hyperparameters and bindings as flags, so the scaffold declares one
argparse option per parameter, typed and defaulted as the recipe's schema says, and
reports through tuneplane.report (the runner puts the SDK on PYTHONPATH for platform
recipes: no wheel needed in the image)."""

from __future__ import annotations

from typing import Any

_TYPES = {"int": "int", "float": "float", "string": "str"}
_BINDING_FLAGS = {"model": "--model", "train_data": "--train-data"}

HEADER = '''\
"""Entrypoint of experiment {name} (recipe {recipe}).

The platform runs it as `torchrun --nnodes N --nproc-per-node G train.py --flag value ...`
with the hyperparameters you pass with `tp submit --set key=value` (checked against the
recipe's schema) as flags. Write everything you want to keep under $TUNEPLANE_OUT_DIR.
"""

import argparse
import os

from tuneplane.report import finish, init, log


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
'''

FOOTER = '''    return parser.parse_args()


def main() -> None:
    args = parse_args()
    out_dir = os.environ["TUNEPLANE_OUT_DIR"]
    init(hparams=vars(args))
    # Replace the two lines below with your training loop, e.g.
    #   for step, batch in enumerate(loader):
    #       loss = train_one(batch)
    #       log({{"train/loss": float(loss)}}, step=step)
    #   torch.save(model.state_dict(), os.path.join(out_dir, "checkpoints", "final.pt"))
    print("{no_command}", flush=True)
    raise SystemExit(1)
    finish()


if __name__ == "__main__":
    main()
'''


def render_train_py(name: str, recipe: str, lock: dict[str, Any], no_command: str) -> str:
    lines = [HEADER.format(name=name, recipe=recipe)]
    for param, spec in sorted((lock.get("parameters") or {}).items()):
        flag = spec.get("flag") or "--" + param.replace("_", "-")
        if spec.get("type") == "bool":
            lines.append(f'    parser.add_argument("{flag}", action="store_true")\n')
            continue
        kind = _TYPES.get(spec.get("type", "string"), "str")
        lines.append(f'    parser.add_argument("{flag}", type={kind}, default={spec.get("default")!r})\n')
    for binding, spec in sorted((lock.get("bindings") or {}).items()):
        flag = spec.get("flag") or _BINDING_FLAGS.get(binding, "--" + binding)
        lines.append(f'    parser.add_argument("{flag}", required={bool(spec.get("required"))!r})\n')
    lines.append(FOOTER.format(no_command=no_command))
    return "".join(lines)
