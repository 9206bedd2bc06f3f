"""Environment and plugin bundles as they travel: a directory -> a gzip'd tar -> files.

`tp env push` / `tp plugin push` collect a directory with `collect_directory` (every
regular file under it; a symlink or a path escaping it is refused, DESIGN.md: "Paths from
users are realpath-checked"), the server reads the upload with `read_archive` (the same
rules again, since a client can send any bytes), and the runner unpacks what the ingest
route serves with `extract_archive`. Standard library only.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import stat
import tarfile
from collections.abc import Mapping
from pathlib import Path

from . import environment as _limits
from .environment import PATH_MAX_CHARS, ContractError


def _check_relative(path: str, where: str) -> str:
    """A bundle path: relative, normalised, inside the root, printable."""
    if not path or path.startswith("/") or "\\" in path or "\x00" in path:
        raise ContractError(f"{where}: path {path!r} escapes the directory", field="bundle")
    norm = posixpath.normpath(path)
    if norm in (".", "..") or norm.startswith("../"):
        raise ContractError(f"{where}: path {path!r} escapes the directory", field="bundle")
    if len(norm) > PATH_MAX_CHARS:
        raise ContractError(
            f"{where}: path {norm[:60]!r}... is longer than {PATH_MAX_CHARS} characters",
            field="bundle",
        )
    if any(ord(ch) < 32 for ch in norm):
        raise ContractError(f"{where}: path {norm!r} contains control characters", field="bundle")
    return norm


def collect_directory(root: Path) -> dict[str, bytes]:
    """Every regular file under `root` (path relative to it -> bytes).

    Refused: a symlink anywhere (even one pointing inside: what it points at could change
    between the check and the read, and a bundle is a snapshot), device files and FIFOs,
    more than _limits.BUNDLE_MAX_FILES files or _limits.BUNDLE_MAX_BYTES bytes. `.git` is skipped.
    """
    base = Path(root)
    if not base.is_dir():
        raise ContractError(f"{root} is not a directory", field="directory")
    real_root = base.resolve()
    files: dict[str, bytes] = {}
    total = 0
    for current, dirnames, filenames in os.walk(real_root, followlinks=False):
        dirnames.sort()
        for name in list(dirnames):
            full = Path(current) / name
            rel = full.relative_to(real_root).as_posix()
            if name == ".git":
                dirnames.remove(name)
                continue
            if full.is_symlink():
                raise ContractError(
                    f"{rel} is a symlink; symlinks are refused in a bundle", field="bundle"
                )
        for name in sorted(filenames):
            full = Path(current) / name
            rel = _check_relative(full.relative_to(real_root).as_posix(), str(root))
            mode = full.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise ContractError(
                    f"{rel} is a symlink; symlinks are refused in a bundle", field="bundle"
                )
            if not stat.S_ISREG(mode):
                raise ContractError(f"{rel} is not a regular file", field="bundle")
            # realpath, not just lstat: a directory swapped for a link mid-walk still fails.
            if real_root not in full.resolve().parents:
                raise ContractError(f"{rel} escapes the directory", field="bundle")
            if len(files) >= _limits.BUNDLE_MAX_FILES:
                raise ContractError(
                    f"the directory has more than {_limits.BUNDLE_MAX_FILES} files",
                    field="bundle",
                    too_large=True,
                )
            data = full.read_bytes()
            total += len(data)
            if total > _limits.BUNDLE_MAX_BYTES:
                raise ContractError(
                    f"the directory holds more than {_limits.BUNDLE_MAX_BYTES} bytes",
                    field="bundle",
                    too_large=True,
                )
            files[rel] = data
    return files


def build_archive(files: Mapping[str, bytes]) -> bytes:
    """A deterministic gzip'd tar of `files` (sorted, no timestamps or owners)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(files):
            data = files[path]
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def read_archive(data: bytes, what: str = "bundle") -> dict[str, bytes]:
    """The files of an uploaded archive; raises ContractError for anything unsafe."""
    if len(data) > _limits.BUNDLE_MAX_BYTES:
        raise ContractError(
            f"{what} is {len(data)} bytes; the limit is {_limits.BUNDLE_MAX_BYTES}",
            field=what,
            too_large=True,
        )
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            return _read_members(tar, what)
    except ContractError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError):
        raise ContractError(
            f"{what} is not a readable archive: send a gzip'd tar of the directory", field=what
        ) from None


def _read_members(tar: tarfile.TarFile, what: str) -> dict[str, bytes]:
    members = tar.getmembers()
    if len(members) > _limits.BUNDLE_MAX_FILES:
        raise ContractError(
            f"{what} has {len(members)} entries; the limit is {_limits.BUNDLE_MAX_FILES}",
            field=what,
            too_large=True,
        )
    files: dict[str, bytes] = {}
    total = 0
    for member in members:
        if member.issym() or member.islnk():
            raise ContractError(
                f"{what}: {member.name} is a link; links are refused in a bundle", field=what
            )
        if member.isdir():
            if member.name not in (".", "./"):
                _check_relative(member.name.rstrip("/"), what)
            continue
        if not member.isfile():
            raise ContractError(f"{what}: {member.name} is not a regular file", field=what)
        path = _check_relative(member.name, what)
        if path in files:
            raise ContractError(f"{what}: {path} appears twice", field=what)
        total += member.size
        if total > _limits.BUNDLE_MAX_BYTES:
            raise ContractError(
                f"{what} unpacks to more than {_limits.BUNDLE_MAX_BYTES} bytes",
                field=what,
                too_large=True,
            )
        extracted = tar.extractfile(member)
        files[path] = extracted.read() if extracted is not None else b""
    return files


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def extract_archive(data: bytes, dest: Path) -> list[Path]:
    """Unpack an archive checked by `read_archive` into `dest`; returns the files."""
    files = read_archive(data)
    dest = dest.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for rel, content in files.items():
        target = (dest / rel).resolve()
        if dest not in target.parents:
            raise ContractError(f"{rel} escapes the directory", field="bundle")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        written.append(target)
    return written
