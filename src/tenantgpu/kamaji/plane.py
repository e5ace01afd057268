"""The management plane: the management API server (serving Kamaji's kinds), its kubeconfig, and the
TenantControlPlane controller that starts a tenant API server per TCP on the shared datastore."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from tenantgpu.apiserver.auth import SharedClientTrust
from tenantgpu.apiserver.kinds import KAMAJI_KINDS
from tenantgpu.apiserver.pki import ServerPKI
from tenantgpu.apiserver.server import APIServer, APIServerConfig
from tenantgpu.apiserver.storage import SQLiteDatastore
from tenantgpu.controlplane.namespaces import NamespaceController
from tenantgpu.kamaji import model
from tenantgpu.kamaji.controller import TenantControlPlaneController
from tenantgpu.kamaji.datastorehosts import DataStoreHosts
from tenantgpu.kamaji.datastores import DataStoreController
from tenantgpu.kamaji.inprocess import InProcessHost, trust_directory
from tenantgpu.kamaji.kubeconfig import kubeconfig_ca, kubeconfig_server
from tenantgpu.kamaji.model import GROUP, VERSION
from tenantgpu.kamaji.webhook import DataStoreWebhook, TenantControlPlaneDefaults, TenantControlPlaneWebhook
from tenantgpu.kubeclient import KubeClient

MANAGEMENT_NAME = "management"


class ManagementPlane:
    """Start with `await start()`; then `client` talks to the management API like any user would."""

    def __init__(
        self,
        datastore_path: Path,
        pki_dir: Path,
        kubeconfig_path: Path,
        *,
        port: int | None = None,
        concurrency: int = 8,
        datastore_processes: bool = False,
        log_hint: str = "",
    ) -> None:
        self.datastore_path = datastore_path
        self.pki_dir = pki_dir
        self.kubeconfig_path = kubeconfig_path
        self._port = port
        self._concurrency = concurrency
        # With datastore_processes, tenants on another SQLite DataStore are served by a process of its own.
        self._datastore_processes = datastore_processes
        self._log_hint = log_hint
        self.datastore: SQLiteDatastore | None = None
        self.server: APIServer | None = None
        self.host: InProcessHost | DataStoreHosts | None = None
        self.client_trust: SharedClientTrust | None = None
        self.controller: TenantControlPlaneController | None = None
        self.datastores: DataStoreController | None = None
        # The management cluster's own kube-controller-manager duty: deleting a namespace empties it.
        self.namespaces: NamespaceController | None = None
        self._client: KubeClient | None = None

    @property
    def client(self) -> KubeClient:
        assert self._client is not None, "the management plane is not started"
        return self._client

    @property
    def endpoint(self) -> str:
        assert self.server is not None
        return self.server.url

    async def start(self) -> None:
        self.datastore = SQLiteDatastore(self.datastore_path)
        self.client_trust = SharedClientTrust(trust_directory(self.datastore_path))
        pki = ServerPKI.load_or_create(self.pki_dir, MANAGEMENT_NAME)
        port = self._port if self._port is not None else self._previous_port(pki)
        self.server = await self._start_server(pki, port)
        self._write_kubeconfig(pki)
        self._client = KubeClient.from_kubeconfig(self.kubeconfig_path, user_agent="kamaji-controller")
        local = InProcessHost(self.datastore, self.client_trust)
        if self._datastore_processes:
            level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
            self.host = DataStoreHosts(local, self.datastore_path, log_hint=self._log_hint, log_level=level)
        else:
            self.host = local
        self.controller = TenantControlPlaneController(self._client, self.host, concurrency=self._concurrency)
        if isinstance(self.host, DataStoreHosts):
            self.host.on_lost = self.controller.requeue
        await self.controller.start()
        self.datastores = DataStoreController(self._client)
        await self.datastores.start()
        self.namespaces = NamespaceController(self._client)
        await self.namespaces.start()

    async def _start_server(self, pki: ServerPKI, port: int) -> APIServer:
        assert self.datastore is not None
        config = APIServerConfig(
            name=MANAGEMENT_NAME,
            datastore=self.datastore,
            pki=pki,
            port=port,
            extra_kinds=KAMAJI_KINDS,
            client_trust=self.client_trust,
            admission_plugins=[
                TenantControlPlaneDefaults(model.DEFAULT_DATASTORE),
                TenantControlPlaneWebhook(self._datastore_object),
                DataStoreWebhook(self._datastore_users),
            ],
        )
        server = APIServer(config)
        try:
            await server.start()
        except OSError:
            if port == 0:
                raise
            # The old port is taken now: serve elsewhere; the kubeconfig is rewritten below.
            config.port = 0
            server = APIServer(config)
            await server.start()
        return server

    def _datastore_object(self, name: str) -> dict[str, Any] | None:
        """A DataStore as the management plane stores it (Kamaji's webhook asks whether one exists)."""
        server = self.server
        kind = None if server is None else server.kinds.resource(GROUP, VERSION, "datastores")
        if server is None or kind is None:
            return {}  # not serving yet: nothing to compare with
        return server.registry.get_object(kind, "", name)

    def _datastore_users(self, name: str) -> list[str]:
        """The TCPs whose data is in DataStore `name` (named in their spec, or still stored there)."""
        server = self.server
        kind = None if server is None else server.kinds.resource(GROUP, VERSION, "tenantcontrolplanes")
        if server is None or kind is None:
            return []
        return [
            model.TenantRef.of(entry.obj).key
            for entry in server.registry.list(kind, None)
            if name in (model.datastore_name(entry.obj), model.current_datastore_name(entry.obj))
        ]

    def _previous_port(self, pki: ServerPKI) -> int:
        """The port of the last run, so a management kubeconfig handed out before stays valid."""
        try:
            text = self.kubeconfig_path.read_text()
            if kubeconfig_ca(text) != pki.ca.cert_pem:
                return 0
            return int(kubeconfig_server(text).rsplit(":", 1)[1])
        except (OSError, ValueError, KeyError, IndexError, StopIteration):
            return 0

    def _write_kubeconfig(self, pki: ServerPKI) -> None:
        assert self.server is not None
        with contextlib.suppress(OSError, ValueError, KeyError, StopIteration):
            text = self.kubeconfig_path.read_text()
            if kubeconfig_server(text) == self.server.url and kubeconfig_ca(text) == pki.ca.cert_pem:
                return
        self.kubeconfig_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.kubeconfig_path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.server.admin_kubeconfig())
        os.replace(tmp, self.kubeconfig_path)

    async def stop(self) -> None:
        if self.namespaces is not None:
            await self.namespaces.stop()
            self.namespaces = None
        if self.datastores is not None:
            await self.datastores.stop()
            self.datastores = None
        if self.controller is not None:
            await self.controller.stop()
            self.controller = None
        if self.host is not None:
            await self.host.stop_all()
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self.server is not None:
            await self.server.stop()
            self.server = None
        if self.datastore is not None:
            self.datastore.close()
            self.datastore = None
