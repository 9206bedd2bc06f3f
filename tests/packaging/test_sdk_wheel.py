"""The `tuneplane` wheel that goes into training images: SDK only, no Django."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT / "sdk")],
        check=True,
    )
    (built,) = out.glob("tuneplane-*.whl")
    return built


def test_the_wheel_holds_the_sdk_and_nothing_of_the_server(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "tuneplane/report.py" in names
    assert "tuneplane/runner/__main__.py" in names
    assert "tuneplane/contracts/package.py" in names
    assert not [n for n in names if n.startswith(("apps/", "tuneplane_site/", "tp_cli/"))]
    metadata = next(n for n in names if n.endswith("METADATA"))
    assert "Requires-Dist" not in zipfile.ZipFile(wheel).read(metadata).decode()


def test_a_venv_with_only_the_wheel_imports_report_and_not_django(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", str(wheel)], check=True)
    done = subprocess.run([python, "-c", "import tuneplane.report; print('ok')"], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr
    for module in ("django", "transformers", "ray", "requests"):
        probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True)
        assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr, module
    # Importing the SDK pulls in none of them either.
    done = subprocess.run(
        [python, "-c", "import sys, tuneplane.report, tuneplane.runner; "
                       "print(sorted(m for m in ('django','transformers','ray') if m in sys.modules))"],
        capture_output=True, text=True,
    )
    assert done.stdout.strip() == "[]", done.stderr
