"""Job packages: a gzip'd tar of the experiment as committed, rooted at the repository.

The server checks every package it accepts and the runner checks it again before
unpacking; both use these functions, so what submits is what runs. Paths from users are
checked lexically (no absolute paths, no `..`) and links may not point out of the
experiment directory.
"""

from __future__ import annotations

import hashlib
import io
import posixpath
import tarfile
from dataclasses import dataclass
from pathlib import Path

from . import errors, limits

EXPERIMENTS_DIR = "experiments"


class PackageError(ValueError):
    """The package is malformed or unsafe; the message is shown to the user."""


@dataclass(frozen=True)
class PackageInfo:
    sha256: str
    size: int
    members: int


def experiment_dir(name: str) -> str:
    return f"{EXPERIMENTS_DIR}/{name}"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _normalised(name: str) -> str | None:
    """The member's path inside the package, or None when it escapes the root."""
    if name.startswith("/") or "\\" in name:
        return None
    norm = posixpath.normpath(name)
    if norm == ".." or norm.startswith("../"):
        return None
    return "" if norm == "." else norm


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


def _link_target(member: tarfile.TarInfo, path: str) -> str | None:
    base = posixpath.dirname(path) if member.issym() else ""
    return _normalised(posixpath.join(base, member.linkname)) if not member.linkname.startswith("/") else None


def inspect_package(data: bytes, experiment: str, entrypoint: str) -> PackageInfo:
    """Check a package and its custom entrypoint; raises PackageError.

    `entrypoint` is the file name inside the experiment directory (`train.sh`). It must
    be a regular file there: a missing or renamed file, a symlink, or a path with `..`
    gets the spec's "custom entrypoint is missing or escapes the experiment directory".
    """
    if len(data) > limits.PACKAGE_MAX_BYTES:
        raise PackageError(
            f"package is {len(data)} bytes; the limit is {limits.PACKAGE_MAX_BYTES} bytes"
        )
    exp_root = experiment_dir(experiment)
    entry_path = _normalised(f"{exp_root}/{entrypoint}")
    if entry_path is None or not _inside(entry_path, exp_root) or entry_path == exp_root:
        raise PackageError(errors.CUSTOM_ENTRYPOINT_INVALID)
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
        members = tar.getmembers()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise PackageError(f"package is not a readable tar archive: {exc}") from None
    if len(members) > limits.PACKAGE_MAX_MEMBERS:
        raise PackageError(
            f"package has {len(members)} files; the limit is {limits.PACKAGE_MAX_MEMBERS}"
        )
    entry: tarfile.TarInfo | None = None
    for member in members:
        path = _normalised(member.name)
        if path is None:
            raise PackageError(f"package path {member.name!r} escapes the package root")
        if not (member.isfile() or member.isdir() or member.issym()):
            raise PackageError(f"package path {member.name!r} is not a file or directory")
        if member.issym() or member.islnk():
            target = _link_target(member, path)
            if target is None or not _inside(target, exp_root):
                if path == entry_path:
                    raise PackageError(errors.CUSTOM_ENTRYPOINT_INVALID)
                raise PackageError(
                    f"package link {member.name!r} points outside the experiment directory"
                )
        if path == entry_path:
            entry = member
    if entry is None or not entry.isfile():
        raise PackageError(errors.CUSTOM_ENTRYPOINT_INVALID)
    return PackageInfo(sha256=sha256_bytes(data), size=len(data), members=len(members))


def safe_extract(data: bytes, dest: Path, experiment: str, entrypoint: str) -> Path:
    """Check then unpack a package into `dest`; returns the entrypoint's absolute path.

    Links are checked lexically by inspect_package and their resolved paths are checked
    again after extraction, so nothing on disk can lead out of the tree.
    """
    inspect_package(data, experiment, entrypoint)
    dest = dest.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        tar.extractall(dest, filter="data" if hasattr(tarfile, "data_filter") else None)
    entry = (dest / experiment_dir(experiment) / entrypoint).resolve()
    exp_root = (dest / experiment_dir(experiment)).resolve()
    if not entry.is_file() or exp_root not in entry.parents:
        raise PackageError(errors.CUSTOM_ENTRYPOINT_INVALID)
    return entry
