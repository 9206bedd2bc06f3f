"""A STUB of the Kubernetes API server, for the executor tests. It is not Kubernetes.

It answers the dozen REST routes the kubernetes executor calls (create/read/delete Jobs,
Secrets and Services; list/delete pods; list events), over real HTTP on 127.0.0.1, so the
official `kubernetes` Python client talks to it exactly as to an API server. It records
every call, and it schedules nothing: tests play back pod states (pending, running,
succeeded, failed with an image pull error, OOMKilled, a lost node) with `set_pods` and
`add_event`. Like the real server, deleting a Job with propagation deletes its pods, a
second create of a name is a 409, and a missing object is a 404 Status.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

CORE = "/api/v1/namespaces/"
BATCH = "/apis/batch/v1/namespaces/"
KINDS = {"secrets": "Secret", "services": "Service", "pods": "Pod", "events": "Event", "jobs": "Job"}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


@dataclass
class KubernetesApiStub:
    calls: list[Call] = field(default_factory=list)
    # (kind, namespace, name) -> object
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    fail_next_create: dict[str, int] = field(default_factory=dict)  # kind -> HTTP status
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    # --- test controls --------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def created(self, kind: str) -> list[dict[str, Any]]:
        """Bodies of successful creates of `kind`, in order."""
        plural = {v: k for k, v in KINDS.items()}[kind]
        return [c.body for c in self.calls if c.method == "POST" and c.path.endswith("/" + plural)]

    def deleted(self, kind: str) -> list[str]:
        plural = {v: k for k, v in KINDS.items()}[kind]
        return [c.path.rsplit("/", 1)[-1] for c in self.calls if c.method == "DELETE" and f"/{plural}/" in c.path]

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace, name))

    def set_job_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        with self.lock:
            self.objects[("Job", namespace, name)]["status"] = status

    def set_pods(self, namespace: str, job_name: str, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Replace the pods of a Job with pods in the given states. Each entry is a pod
        `status` (phase, reason, containerStatuses, ...); metadata and labels are taken
        from the Job's pod template, as the Job controller would."""
        with self.lock:
            job = self.objects[("Job", namespace, job_name)]
            for key in [k for k in self.objects if k[0] == "Pod" and k[1] == namespace
                        and self.objects[k]["metadata"]["labels"].get("job-name") == job_name]:
                del self.objects[key]
            made = []
            for index, status in enumerate(pods):
                name = f"{job_name}-{index}-{uuid.uuid4().hex[:5]}"
                labels = {**job["spec"]["template"]["metadata"]["labels"], "job-name": job_name}
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name, "namespace": namespace, "uid": str(uuid.uuid4()), "labels": labels,
                        "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
                        "creationTimestamp": now(),
                    },
                    "spec": {"nodeName": f"gpu-node-{index}", "containers": job["spec"]["template"]["spec"]["containers"]},
                    "status": status,
                }
                self.objects[("Pod", namespace, name)] = pod
                made.append(pod)
            return made

    def add_event(self, namespace: str, involved: dict[str, Any], reason: str, message: str,
                  type_: str = "Normal", count: int = 1, uid: str | None = None) -> str:
        uid = uid or str(uuid.uuid4())
        with self.lock:
            self.objects[("Event", namespace, uid)] = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{involved['metadata']['name']}.{uid[:8]}", "namespace": namespace, "uid": uid},
                "involvedObject": {"kind": involved["kind"], "name": involved["metadata"]["name"], "namespace": namespace},
                "reason": reason,
                "message": message,
                "type": type_,
                "count": count,
                "source": {"component": "kubelet" if involved["kind"] == "Pod" else "job-controller"},
                "firstTimestamp": now(),
                "lastTimestamp": now(),
            }
        return uid

    # --- the HTTP side -------------------------------------------------------------

    def handle(self, method: str, raw_path: str, body: Any) -> tuple[int, dict[str, Any]]:
        parts = urlsplit(raw_path)
        query = parse_qs(parts.query)
        with self.lock:
            self.calls.append(Call(method, parts.path, query, body))
        path = parts.path
        if path.startswith(BATCH):
            rest = path[len(BATCH):].split("/")
        elif path.startswith(CORE):
            rest = path[len(CORE):].split("/")
        else:
            return 404, _status(404, "NotFound", f"the stub does not serve {path}")
        namespace, plural, name = rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""
        kind = KINDS.get(plural)
        if kind is None:
            return 404, _status(404, "NotFound", f"the stub does not serve {plural}")
        with self.lock:
            if method == "POST" and not name:
                return self._create(kind, namespace, body)
            if method == "GET" and name:
                obj = self.objects.get((kind, namespace, name))
                return (200, obj) if obj else (404, _status(404, "NotFound", f'{plural} "{name}" not found'))
            if method == "GET":
                return 200, self._list(kind, namespace, query)
            if method == "DELETE" and name:
                return self._delete(kind, namespace, name, body)
            if method == "DELETE":
                for obj in self._list(kind, namespace, query)["items"]:
                    self.objects.pop((kind, namespace, obj["metadata"]["name"]), None)
                return 200, {"apiVersion": "v1", "kind": f"{kind}List", "items": []}
        return 405, _status(405, "MethodNotAllowed", method)

    def _create(self, kind: str, namespace: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status = self.fail_next_create.pop(kind, None)
        if status:
            return status, _status(status, "Forbidden" if status == 403 else "InternalError",
                                   f"the stub refused to create this {kind}")
        name = body["metadata"]["name"]
        if (kind, namespace, name) in self.objects:
            return 409, _status(409, "AlreadyExists", f'{kind.lower()}s "{name}" already exists')
        obj = json.loads(json.dumps(body))
        obj["metadata"].update({"uid": str(uuid.uuid4()), "creationTimestamp": now(), "namespace": namespace})
        if kind == "Job":
            obj["status"] = {"active": obj["spec"].get("parallelism", 1), "startTime": now()}
            # The Job controller labels its pods with job-name: the headless Service
            # selects them by it.
            obj["spec"]["template"]["metadata"]["labels"]["job-name"] = name
        self.objects[(kind, namespace, name)] = obj
        return 201, obj

    def _list(self, kind: str, namespace: str, query: dict[str, list[str]]) -> dict[str, Any]:
        items = [o for (k, ns, _), o in sorted(self.objects.items()) if k == kind and ns == namespace]
        for selector in query.get("labelSelector", []):
            for term in selector.split(","):
                key, _, value = term.partition("=")
                items = [o for o in items if o["metadata"].get("labels", {}).get(key) == value]
        for selector in query.get("fieldSelector", []):
            key, _, value = selector.partition("=")
            if key == "involvedObject.name":
                items = [o for o in items if o.get("involvedObject", {}).get("name") == value]
        return {"apiVersion": "v1", "kind": f"{kind}List", "metadata": {"resourceVersion": "1"}, "items": items}

    def _delete(self, kind: str, namespace: str, name: str, body: Any) -> tuple[int, dict[str, Any]]:
        obj = self.objects.pop((kind, namespace, name), None)
        if obj is None:
            return 404, _status(404, "NotFound", f'{kind.lower()}s "{name}" not found')
        propagation = (body or {}).get("propagationPolicy") if isinstance(body, dict) else None
        if kind == "Job" and propagation in ("Background", "Foreground"):
            for key in [k for k, o in self.objects.items() if k[0] == "Pod" and k[1] == namespace
                        and o["metadata"]["labels"].get("job-name") == name]:
                del self.objects[key]
        if kind == "Service":
            return 200, obj  # the API server answers a Service delete with the Service
        return 200, _status(200, "", "", status="Success")

    def start(self) -> KubernetesApiStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                status, payload = stub.handle(method, self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _status(code: int, reason: str, message: str, status: str = "Failure") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Status", "status": status, "message": message, "reason": reason, "code": code}


# Pod statuses to play back --------------------------------------------------------------

def _trainer(state: dict[str, Any], image: str = "registry.example.com/trainer:v1", **extra: Any) -> dict[str, Any]:
    return {"name": "trainer", "image": image, "imageID": "", "ready": "running" in state,
            "restartCount": 0, "state": state, **extra}


def pod_pending() -> dict[str, Any]:
    return {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                "reason": "Unschedulable"}]}


def pod_running() -> dict[str, Any]:
    return {"phase": "Running", "containerStatuses": [_trainer({"running": {"startedAt": now()}})]}


def pod_succeeded() -> dict[str, Any]:
    return {"phase": "Succeeded", "containerStatuses": [
        _trainer({"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now()}})]}


def pod_image_pull_error(image: str = "registry.example.com/trainer:v1") -> dict[str, Any]:
    return {"phase": "Pending", "containerStatuses": [_trainer(
        {"waiting": {"reason": "ImagePullBackOff",
                     "message": f'Back-off pulling image "{image}"'}}, image=image)]}


def pod_oom_killed() -> dict[str, Any]:
    return {"phase": "Failed", "containerStatuses": [
        _trainer({"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": now()}})]}


def pod_node_lost() -> dict[str, Any]:
    return {"phase": "Failed", "reason": "NodeLost",
            "message": "Node gpu-node-0 which was running pod is unresponsive",
            "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}]}
