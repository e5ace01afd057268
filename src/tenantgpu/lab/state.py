"""The lab's state directory: datastore, kubeconfigs, process id, lock and logs, and who is running it."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

DEFAULT_STATE_DIR = ".tenantgpu"
# Lab tenants' TenantControlPlanes live in this namespace of the management plane.
TENANT_NAMESPACE = "default"


class LabLockedError(Exception):
    """Another lab process holds the state directory."""

    def __init__(self, pid: int | None) -> None:
        super().__init__(f"pid {pid}" if pid else "another process")
        self.pid = pid


class StateDirError(Exception):
    """The state directory cannot be created; the message is one line for the user."""


@dataclass(frozen=True)
class StateDir:
    """Paths inside one lab's state directory (default `.tenantgpu`)."""

    root: Path

    @classmethod
    def at(cls, path: str | os.PathLike[str] | None) -> StateDir:
        return cls(Path(path or DEFAULT_STATE_DIR).absolute())

    @property
    def lab_file(self) -> Path:
        """The lab spec the directory was created with; `up` without `-f` resumes it."""
        return self.root / "lab.yaml"

    @property
    def datastore(self) -> Path:
        return self.root / "datastore.sqlite"

    @property
    def datastores(self) -> Path:
        """Where the lab's further DataStores keep their SQLite files (one control-plane process each)."""
        return self.root / "datastores"

    @property
    def management_pki(self) -> Path:
        return self.root / "management-pki"

    @property
    def management_kubeconfig(self) -> Path:
        return self.root / "management.kubeconfig"

    @property
    def kubeconfigs(self) -> Path:
        return self.root / "kubeconfigs"

    def tenant_kubeconfig(self, tenant: str) -> Path:
        return self.kubeconfigs / f"{tenant}.kubeconfig"

    def kubelet_pki(self, tenant: str, node: str) -> Path:
        """Where a worker's kubelet keeps its client certificate (the kubelet's /var/lib/kubelet/pki)."""
        return self.root / "nodes" / tenant / node / "pki"

    @property
    def pid_file(self) -> Path:
        return self.root / "lab.pid"

    @property
    def lock_file(self) -> Path:
        return self.root / "lab.lock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def log_file(self) -> Path:
        return self.logs / "lab.log"

    def exists(self) -> bool:
        return self.lab_file.exists()

    def create(self) -> None:
        try:
            for directory in (self.root, self.kubeconfigs, self.logs):
                directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StateDirError(
                f"cannot create the state directory {self.root}: {err.strerror or err}"
            ) from None

    def read_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def running_pid(self) -> int | None:
        """The pid of the lab process that holds this directory, or None (a stale pid file is removed)."""
        if not self.root.exists():
            return None
        pid = self.read_pid()
        if _lock_is_held(self.lock_file):
            return pid or -1
        if pid is not None:
            with contextlib.suppress(OSError):
                self.pid_file.unlink()
        return None

    def purge(self) -> bool:
        """Delete the directory; False if there was none."""
        if not self.root.exists():
            return False
        shutil.rmtree(self.root, ignore_errors=True)
        return True


def _lock_is_held(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno in (errno.EAGAIN, errno.EACCES):
            return True
        raise
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class LabLock:
    """Held by the lab process for as long as it runs; the kernel drops it if the process dies (kill -9)."""

    def __init__(self, state: StateDir) -> None:
        self.state = state
        self._fd: int | None = None

    def acquire(self) -> None:
        self.state.create()
        fd = os.open(self.state.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno in (errno.EAGAIN, errno.EACCES):
                raise LabLockedError(self.state.read_pid()) from None
            raise
        self._fd = fd
        self.state.pid_file.write_text(f"{os.getpid()}\n")

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            if self.state.read_pid() == os.getpid():
                self.state.pid_file.unlink()
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def kubeconfig_file_name(namespace: str, name: str) -> str:
    """Lab tenants live in `default` and keep their plain name; others are prefixed by their namespace."""
    return name if namespace == TENANT_NAMESPACE else f"{namespace}.{name}"
