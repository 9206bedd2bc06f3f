"""deploy/: every manifest passes the official schemas (strict), the kustomization
renders, the production configuration passes `manage.py check --deploy`, the nginx
snippet streams, and the runtime image's capsule runs the runner with no site-packages.

No cluster and no Docker engine exist here: nothing is applied or built. What is checked
is what can be checked offline, and it is checked for real."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import validate_manifest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUSTOMIZE_DIR = DEPLOY / "kubernetes"


def manifest_files() -> list[Path]:
    return sorted(p for p in KUSTOMIZE_DIR.glob("*.yaml") if p.name != "kustomization.yaml")


def documents(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: p.name)
def test_every_manifest_passes_the_official_schema(path: Path):
    docs = documents(path)
    assert docs, f"{path.name} holds no object"
    for doc in docs:
        validate_manifest(doc)


def test_the_kustomization_lists_every_manifest_and_nothing_else():
    kustomization = yaml.safe_load((KUSTOMIZE_DIR / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == [p.name for p in manifest_files()]
    assert "namespace" not in kustomization  # the files set their own (two namespaces)


def _all_objects() -> list[dict]:
    return [doc for path in manifest_files() for doc in documents(path)]


def test_web_worker_beat_and_migration_read_settings_from_the_configmap_and_secret():
    workloads = {
        doc["metadata"]["name"]: doc["spec"]["template"]["spec"]
        for doc in _all_objects() if doc["kind"] in {"Deployment", "Job"}
    }
    assert set(workloads) == {"tuneplane-web", "tuneplane-worker", "tuneplane-beat", "tuneplane-migrate"}
    commands = {name: pod["containers"][0]["command"] for name, pod in workloads.items()}
    assert commands["tuneplane-web"][0] == "daphne"
    assert commands["tuneplane-worker"][:4] == ["celery", "-A", "tuneplane_site", "worker"]
    assert commands["tuneplane-beat"][:4] == ["celery", "-A", "tuneplane_site", "beat"]
    assert commands["tuneplane-migrate"] == ["python", "manage.py", "migrate", "--noinput"]
    for pod in workloads.values():
        sources = pod["containers"][0]["envFrom"]
        assert {"secretRef": {"name": "tuneplane-secrets"}} in sources
        assert {"configMapRef": {"name": "tuneplane-config"}} in sources
    beat = next(d for d in _all_objects() if d["metadata"]["name"] == "tuneplane-beat")
    assert beat["spec"]["replicas"] == 1


def test_the_rbac_grants_the_dispatcher_exactly_what_the_executor_calls():
    role = next(d for d in _all_objects() if d["kind"] == "Role")
    assert role["metadata"]["namespace"] == "tuneplane-jobs"
    granted = {(group, resource): set(rule["verbs"]) for rule in role["rules"]
               for group in rule["apiGroups"] for resource in rule["resources"]}
    assert {"create", "get", "delete"} <= granted[("batch", "jobs")]
    assert {"list", "deletecollection"} <= granted[("", "pods")]
    assert {"list"} <= granted[("", "events")]
    assert {"create", "delete"} <= granted[("", "secrets")]
    assert {"create", "delete"} <= granted[("", "services")]
    binding = next(d for d in _all_objects() if d["kind"] == "RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tuneplane-control-plane", "namespace": "tuneplane"}]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (for `kubectl kustomize`) is not installed")
def test_kubectl_kustomize_renders_objects_that_pass_the_schema():
    rendered = subprocess.run(["kubectl", "kustomize", str(KUSTOMIZE_DIR)], capture_output=True, text=True,
                              check=True, timeout=60).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    assert len(docs) == len(_all_objects())
    for doc in docs:
        validate_manifest(doc)
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "tuneplane"
    images = {c["image"] for d in docs if d["kind"] in {"Deployment", "Job"}
              for c in d["spec"]["template"]["spec"]["containers"]}
    assert images == {"ghcr.io/tuneplane/tuneplane:0.1.0"}


def production_environment(tmp_path: Path) -> dict[str, str]:
    """The ConfigMap's settings plus the Secret's keys (with test values)."""
    config = next(d for d in _all_objects() if d["kind"] == "ConfigMap")["data"]
    secret_keys = [line.split("=", 1)[0] for line in (KUSTOMIZE_DIR / "tuneplane.env.example").read_text().splitlines()
                   if line and not line.startswith("#")]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), **config,
           "TUNEPLANE_DATA_DIR": str(tmp_path / "data")}
    values = {
        "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tuneplane"),
        "TUNEPLANE_BROKER_URL": "redis://127.0.0.1:6379/11",
        "TUNEPLANE_CHANNEL_LAYER_URL": "redis://127.0.0.1:6379/11",
        "TUNEPLANE_SECRET_KEY": secrets.token_urlsafe(64),
        "TUNEPLANE_S3_ACCESS_KEY_ID": "test",
        "TUNEPLANE_S3_SECRET_ACCESS_KEY": "test",
    }
    assert sorted(values) == sorted(secret_keys)
    return {**env, **values}


def test_check_deploy_passes_with_the_production_settings(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT, env=production_environment(tmp_path), capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # No deployment warning either (security.*, Django's --deploy checks). Other apps'
    # warnings, such as drf-spectacular's schema notes, are not about deployment.
    assert "security." not in done.stdout + done.stderr, done.stdout + done.stderr


def test_check_deploy_fails_with_the_embedded_defaults(tmp_path: Path):
    # The test above means something only if the same check fails without the settings.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "TUNEPLANE_DATA_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert "security.W004" in done.stderr and "security.W008" in done.stderr


def test_nginx_streams_the_api_and_relaxes_timeouts_for_sse():
    conf = (DEPLOY / "nginx" / "tuneplane.conf").read_text()
    blocks = dict(re.findall(r"location\s+([^{]+?)\s*\{(.*?)\n\}", conf, flags=re.DOTALL))
    api = blocks["/api/"]
    stream = blocks[r"~ ^/api/v1/jobs/[^/]+/logs/stream$"]
    assert "proxy_buffering off;" in api
    assert "proxy_buffering off;" in stream
    assert int(re.search(r"proxy_read_timeout (\d+)s;", stream).group(1)) >= 3600
    assert re.fullmatch(r"/api/v1/jobs/[^/]+/logs/stream", "/api/v1/jobs/exp-3f9a1c/logs/stream")


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "runtime/Dockerfile"])
def test_dockerfiles_copy_only_what_exists(dockerfile: str):
    sources = []
    for line in (DEPLOY / dockerfile).read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources += line.split()[1:-1]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"{dockerfile}: COPY {source} does not exist"


def test_the_runtime_capsule_runs_the_runner_without_site_packages(tmp_path: Path):
    # What deploy/runtime/Dockerfile assembles, run the way the executor runs it
    # (python3 /opt/tuneplane/capsule) with -S: nothing but the capsule to import from.
    capsule = tmp_path / "capsule"
    shutil.copytree(ROOT / "sdk" / "tuneplane", capsule / "tuneplane", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(DEPLOY / "runtime" / "capsule" / "__main__.py", capsule / "__main__.py")
    done = subprocess.run([sys.executable, "-S", str(capsule)], env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr  # the runner's own "setup failed" code
    assert "missing TUNEPLANE_JOB_ENDPOINT" in done.stderr
    assert "ModuleNotFoundError" not in done.stderr
