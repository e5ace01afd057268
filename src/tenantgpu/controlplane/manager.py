"""Starts and stops, as one unit, the services that run beside one tenant API server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from tenantgpu.apiserver.bootstraptoken import SECRET_NAMESPACE, SECRET_TYPE
from tenantgpu.apiserver.sharing import share_workload_object
from tenantgpu.controlplane.bootstrapsigner import BootstrapSigner
from tenantgpu.controlplane.clusterroleaggregation import ClusterRoleAggregationController
from tenantgpu.controlplane.cronjob import CronJobController
from tenantgpu.controlplane.csrapproving import CSRApprovingController
from tenantgpu.controlplane.csrsigning import CSRCleaner, CSRSigningController
from tenantgpu.controlplane.daemonset import DaemonSetController
from tenantgpu.controlplane.deployment import DeploymentController
from tenantgpu.controlplane.disruption import DisruptionController
from tenantgpu.controlplane.endpoints import EndpointsController, EndpointSliceController
from tenantgpu.controlplane.endpointslicemirroring import EndpointSliceMirroringController
from tenantgpu.controlplane.ephemeralvolume import EphemeralVolumeController
from tenantgpu.controlplane.garbagecollector import GarbageCollector
from tenantgpu.controlplane.hostpathprovisioner import HostPathProvisioner
from tenantgpu.controlplane.job import JobController
from tenantgpu.controlplane.namespaces import NamespaceController
from tenantgpu.controlplane.nodelifecycle import NodeLifecycleController
from tenantgpu.controlplane.persistentvolume import PersistentVolumeController
from tenantgpu.controlplane.podgc import PodGarbageCollector
from tenantgpu.controlplane.replicaset import ReplicaSetController
from tenantgpu.controlplane.rootca import RootCAPublisher
from tenantgpu.controlplane.scheduler import DefaultScheduler
from tenantgpu.controlplane.serviceaccounts import ServiceAccountController
from tenantgpu.controlplane.statefulset import StatefulSetController
from tenantgpu.controlplane.tokencleaner import TokenCleaner
from tenantgpu.controlplane.volumeexpansion import ExpandController
from tenantgpu.controlplane.volumeprotection import ClaimProtectionController, VolumeProtectionController
from tenantgpu.kubeclient import Informer, KubeClient


class SigningCA(Protocol):
    """The cluster CA kube-controller-manager signs with (`--cluster-signing-{cert,key}-file`)."""

    cert_pem: bytes
    key_pem: bytes


class _Service(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class ControlPlaneServices:
    """kube-scheduler (default profile) and the kube-controller-manager duties a lab tenant needs:
    service accounts, the root CA publisher, node lifecycle, pod GC, namespaces, Jobs, CronJobs,
    ReplicaSets, Deployments, DaemonSets, StatefulSets, PodDisruptionBudgets, the garbage collector, the
    PersistentVolume binder, the claim and volume protection, the endpoints, endpointslice and
    endpointslicemirroring controllers
    and ClusterRole aggregation, the csrapproving controller (kubelet client certificates), the CSR
    cleaner, the bootstrapsigner and tokencleaner (bootstrap tokens, which Kamaji's controller manager
    adds to its defaults) and, given the cluster CA (`signing_ca`), the csrsigning controller; beside
    them the tenant's storage provisioner and its default StorageClass."""

    client: KubeClient
    signing_ca: SigningCA | None = None
    node_grace_seconds: float = 40.0
    node_monitor_seconds: float = 5.0
    services: list[_Service] = field(default_factory=list)

    async def start(self) -> None:
        accounts = ServiceAccountController(self.client)
        # The disruption controller keeps the budgets; the scheduler's preemption reads them.
        budgets = Informer(self.client, "poddisruptionbudgets")
        # The PV controller's informers; the scheduler's VolumeBinding and the provisioner read them too.
        claims = Informer(self.client, "persistentvolumeclaims")
        volumes = Informer(self.client, "persistentvolumes")
        classes = Informer(self.client, "storageclasses")
        # one watch of CertificateSigningRequests for the signer and the cleaner
        requests = Informer(self.client, "certificatesigningrequests")
        # one watch of the bootstrap token Secrets for the signer and the cleaner; kube's sees every
        # Secret and their handlers keep these, here the watch keeps them
        tokens = Informer(self.client, "secrets", SECRET_NAMESPACE, field_selector=f"type={SECRET_TYPE}")
        scheduler = DefaultScheduler(
            self.client, budgets=budgets, claims=claims, volumes=volumes, classes=classes
        )
        jobs = JobController(self.client, pods=scheduler.pods)
        cron_jobs = CronJobController(self.client, jobs=jobs.jobs)
        daemon_sets = DaemonSetController(self.client, pods=scheduler.pods, nodes=scheduler.nodes)
        stateful_sets = StatefulSetController(
            self.client, pods=scheduler.pods, revisions=daemon_sets.revisions, claims=claims
        )
        replica_sets = ReplicaSetController(self.client, pods=scheduler.pods)
        deployments = DeploymentController(
            self.client, replica_sets=replica_sets.replica_sets, pods=scheduler.pods
        )
        # Every tenant's system workloads, their revisions and pods repeat the same templates: their
        # informers keep one instance of equal parts, as the API server's cache does (they only read them).
        for informer in (
            scheduler.pods,
            jobs.jobs,
            daemon_sets.daemon_sets,
            daemon_sets.revisions,
            stateful_sets.stateful_sets,
            replica_sets.replica_sets,
            deployments.deployments,
        ):
            informer.transform = share_workload_object
        # The pod and node events are most of what the controllers read, and nothing here changes a pod
        # or node it read in place: a server of this process hands over its own objects (no JSON).
        scheduler.pods.read_only = scheduler.nodes.read_only = True
        # Services, Endpoints and EndpointSlices: one watch each, shared by the two controllers and the
        # garbage collector of the slices.
        endpoints = EndpointsController(self.client, pods=scheduler.pods)
        endpoint_slices = EndpointSliceController(
            self.client, pods=scheduler.pods, nodes=scheduler.nodes, services=endpoints.services
        )
        # One watch per resource serves every service here, as client-go's shared informers do within
        # one binary: each pod and node event is sent and decoded once per tenant, not once per service.
        # The scheduler starts them; services added later read their caches (PodGC sweeps on start).
        self.services = [
            accounts,
            scheduler,
            NodeLifecycleController(
                self.client,
                grace_seconds=self.node_grace_seconds,
                monitor_seconds=self.node_monitor_seconds,
                nodes=scheduler.nodes,
                pods=scheduler.pods,
            ),
            PodGarbageCollector(self.client, pods=scheduler.pods, nodes=scheduler.nodes),
            jobs,
            cron_jobs,
            replica_sets,
            deployments,
            daemon_sets,
            stateful_sets,
            DisruptionController(
                self.client,
                pods=scheduler.pods,
                replica_sets=replica_sets.replica_sets,
                deployments=deployments.deployments,
                stateful_sets=stateful_sets.stateful_sets,
                budgets=budgets,
            ),
            GarbageCollector(self.client, owners=jobs.jobs, dependents=scheduler.pods),
            GarbageCollector(self.client, owners=cron_jobs.cron_jobs, dependents=jobs.jobs),
            GarbageCollector(self.client, owners=daemon_sets.daemon_sets, dependents=scheduler.pods),
            GarbageCollector(self.client, owners=daemon_sets.daemon_sets, dependents=daemon_sets.revisions),
            GarbageCollector(self.client, owners=stateful_sets.stateful_sets, dependents=scheduler.pods),
            GarbageCollector(
                self.client, owners=stateful_sets.stateful_sets, dependents=daemon_sets.revisions
            ),
            GarbageCollector(self.client, owners=replica_sets.replica_sets, dependents=scheduler.pods),
            # a StatefulSet's claims under its retention policy, owned by the set or by a removed pod
            GarbageCollector(self.client, owners=stateful_sets.stateful_sets, dependents=claims),
            GarbageCollector(self.client, owners=scheduler.pods, dependents=claims),
            GarbageCollector(
                self.client, owners=deployments.deployments, dependents=replica_sets.replica_sets
            ),
            # These watch namespaces too: one informer (one watch per tenant) serves them all.
            RootCAPublisher(
                self.client, namespaces=accounts.namespaces, ca_pem=self.client.config.ca_data or b""
            ),
            NamespaceController(self.client, namespaces=accounts.namespaces),
            PersistentVolumeController(
                self.client, pods=scheduler.pods, claims=claims, volumes=volumes, classes=classes
            ),
            ClaimProtectionController(self.client, claims=claims, pods=scheduler.pods),
            EphemeralVolumeController(self.client, pods=scheduler.pods, claims=claims),
            VolumeProtectionController(self.client, volumes=volumes),
            ExpandController(self.client, claims=claims, volumes=volumes),
            HostPathProvisioner(self.client, claims=claims, volumes=volumes, classes=classes),
            endpoints,
            endpoint_slices,
            GarbageCollector(self.client, owners=endpoints.services, dependents=endpoint_slices.slices),
            # hand-written Endpoints of selectorless Services, mirrored into slices they own
            EndpointSliceMirroringController(
                self.client,
                services=endpoints.services,
                endpoints=endpoints.endpoints,
                slices=endpoint_slices.slices,
            ),
            GarbageCollector(self.client, owners=endpoints.endpoints, dependents=endpoint_slices.slices),
            ClusterRoleAggregationController(self.client),
            CSRApprovingController(self.client, requests=requests),
            CSRCleaner(self.client, requests=requests),
            BootstrapSigner(self.client, secrets=tokens),
            TokenCleaner(self.client, secrets=tokens),
        ]
        if self.signing_ca is not None:
            # kube-controller-manager skips the signer when it has no CA files to sign with
            self.services.append(
                CSRSigningController(
                    self.client,
                    ca_cert_pem=self.signing_ca.cert_pem,
                    ca_key_pem=self.signing_ca.key_pem,
                    requests=requests,
                )
            )
        started: list[_Service] = []
        try:
            for service in self.services:
                await service.start()
                started.append(service)
        except BaseException:
            for service in reversed(started):
                await service.stop()
            raise

    async def stop(self) -> None:
        for service in reversed(self.services):
            await service.stop()
        self.services = []
