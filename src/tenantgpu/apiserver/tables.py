"""Server-side printing: `meta.k8s.io/v1` Tables with the columns `kubectl get` shows for each kind."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tenantgpu.apiserver.certificates import condition_summary
from tenantgpu.apiserver.fieldversions import LATEST
from tenantgpu.apiserver.selectors import format_label_selector
from tenantgpu.gpushare.volumes import is_default_class, volume_class

__all__ = [
    "Column",
    "format_age",
    "parse_timestamp",
    "to_table",
    "watch_event_table",
]

_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources "
    "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
    "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_AGE_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this "
    "value. It is represented in RFC3339 form and is in UTC."
)


@dataclass(frozen=True)
class Column:
    """One column definition of a Table; priority 1 columns show only with `-o wide`."""

    name: str
    type: str = "string"
    format: str = ""
    description: str = ""
    priority: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


_NAME = Column("Name", format="name", description=_NAME_DOC)
_AGE = Column("Age", description=_AGE_DOC)


# --- time ------------------------------------------------------------------------------------------------


def parse_timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as kube writes it (`2026-11-29T19:40:00Z`, optional fraction), or None."""
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_age(delta: timedelta) -> str:
    """A duration the way kubectl prints AGE: `45s`, `3m2s`, `15m`, `5h10m`, `2d3h`, `90d`, `3y45d`."""
    seconds = int(delta.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _since(value: Any, now: datetime) -> str:
    moment = parse_timestamp(value)
    return "<unknown>" if moment is None else format_age(now - moment)


def _age(obj: Mapping[str, Any], now: datetime) -> str:
    return _since((obj.get("metadata") or {}).get("creationTimestamp"), now)


def _get(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def _name(obj: Mapping[str, Any]) -> str:
    return str(_get(obj, "metadata", "name") or "")


# --- pods ------------------------------------------------------------------------------------------------

_POD_COLUMNS = [
    _NAME,
    Column("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
    Column("Status", description="The aggregate status of the containers in this pod."),
    Column(
        "Restarts",
        description="The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    _AGE,
    Column(
        "IP", priority=1, description="IP address allocated to the pod. Routable at least within the cluster."
    ),
    Column("Node", priority=1, description="NodeName indicates in which node this pod is scheduled."),
    Column(
        "Nominated Node",
        priority=1,
        description="nominatedNodeName is set only when this pod preempts other pods on the node.",
    ),
    Column("Readiness Gates", priority=1, description="If specified, all readiness gates will be evaluated."),
]


def _restartable_init(container: Mapping[str, Any] | None) -> bool:
    # Sidecars are init containers with restartPolicy Always; they count towards READY.
    return container is not None and container.get("restartPolicy") == "Always"


def _terminated_reason(terminated: Mapping[str, Any], prefix: str = "") -> str:
    if terminated.get("reason"):
        return prefix + terminated["reason"]
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def _later(current: datetime | None, state: Mapping[str, Any] | None) -> datetime | None:
    finished = parse_timestamp(_get(state, "terminated", "finishedAt"))
    if finished is not None and (current is None or finished > current):
        return finished
    return current


def pod_status_text(pod: Mapping[str, Any]) -> tuple[str, int, int, int, datetime | None]:
    """STATUS, ready and total containers, restarts and the last restart, as kube's pod printer has them."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(spec.get("containers") or []) + sum(1 for c in init_specs.values() if _restartable_init(c))
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None
    reason = status.get("reason") or status.get("phase") or ""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for index, ctr in enumerate(init_statuses):
        count = int(ctr.get("restartCount") or 0)
        restarts += count
        last_restart = _later(last_restart, ctr.get("lastState"))
        sidecar = _restartable_init(init_specs.get(ctr.get("name")))
        if sidecar:
            sidecar_restarts += count
            last_sidecar_restart = _later(last_sidecar_restart, ctr.get("lastState"))
        state = ctr.get("state") or {}
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            continue
        if sidecar and ctr.get("started"):
            if ctr.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break
    initialized = any(
        c.get("type") == "Initialized" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    if not initializing or initialized:
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        for ctr in reversed(status.get("containerStatuses") or []):
            restarts += int(ctr.get("restartCount") or 0)
            last_restart = _later(last_restart, ctr.get("lastState"))
            state = ctr.get("state") or {}
            waiting = state.get("waiting")
            terminated = state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None:
                reason = _terminated_reason(terminated)
            elif ctr.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            ready_condition = any(c.get("type") == "Ready" for c in status.get("conditions") or [])
            reason = "Running" if ready_condition else "NotReady"
    if _get(pod, "metadata", "deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif status.get("phase") not in ("Succeeded", "Failed"):
            reason = "Terminating"
    return reason, ready, total, restarts, last_restart


def _pod_row(pod: Mapping[str, Any], now: datetime) -> tuple[list[Any], list[dict[str, Any]] | None]:
    reason, ready, total, restarts, last_restart = pod_status_text(pod)
    restarts_text = str(restarts)
    if restarts and last_restart is not None:
        restarts_text = f"{restarts} ({format_age(now - last_restart)} ago)"
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    pod_ips = status.get("podIPs") or []
    ip = (pod_ips[0].get("ip") if pod_ips else None) or status.get("podIP") or "<none>"
    gates = spec.get("readinessGates") or []
    gates_text = "<none>"
    if gates:
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        passed = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        gates_text = f"{passed}/{len(gates)}"
    cells = [
        _name(pod),
        f"{ready}/{total}",
        reason,
        restarts_text,
        _age(pod, now),
        ip,
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_text,
    ]
    conditions = None
    phase = status.get("phase")
    if phase == "Succeeded":
        conditions = [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            }
        ]
    elif phase == "Failed":
        conditions = [
            {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
        ]
    return cells, conditions


# --- nodes -----------------------------------------------------------------------------------------------

_NODE_COLUMNS = [
    _NAME,
    Column("Status", description="The status of the node"),
    Column("Roles", description="The roles of the node"),
    _AGE,
    Column("Version", description="Kubelet Version reported by the node."),
    Column("Internal-IP", priority=1, description="List of internal IPs in the cluster"),
    Column("External-IP", priority=1, description="List of external IPs in the cluster"),
    Column(
        "OS-Image",
        priority=1,
        description="OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
    ),
    Column(
        "Kernel-Version",
        priority=1,
        description="Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
    ),
    Column(
        "Container-Runtime",
        priority=1,
        description="ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
    ),
]


def node_roles(labels: Mapping[str, str]) -> list[str]:
    """Roles from `node-role.kubernetes.io/<role>` label keys and the `kubernetes.io/role` value."""
    roles = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key[len("node-role.kubernetes.io/") :]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return sorted(roles)


def _node_row(node: Mapping[str, Any], now: datetime) -> list[Any]:
    status = node.get("status") or {}
    states = []
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            states = ["Ready" if condition.get("status") == "True" else "NotReady"]
    if not states:
        states = ["Unknown"]
    if _get(node, "spec", "unschedulable"):
        states.append("SchedulingDisabled")
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next(
            (a.get("address") for a in addresses if a.get("type") == kind and a.get("address")), "<none>"
        )

    return [
        _name(node),
        ",".join(states),
        ",".join(node_roles(_get(node, "metadata", "labels") or {})) or "<none>",
        _age(node, now),
        info.get("kubeletVersion") or "",
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


# --- events ----------------------------------------------------------------------------------------------

_EVENT_COLUMNS = [
    Column("Last Seen", description="Time when this Event was last observed"),
    Column(
        "Type", description="Type of this event (Normal, Warning), new types could be added in the future"
    ),
    Column(
        "Reason",
        description="This should be a short, machine understandable string that gives the reason for the "
        "transition into the object's current status.",
    ),
    Column("Object", description="The object that this event is about."),
    Column("Subobject", priority=1, description="The specific part of the object this event is about."),
    Column(
        "Source",
        priority=1,
        description="The component reporting this event. Should be a short machine understandable string.",
    ),
    Column("Message", description="A human-readable description of the status of this operation."),
    Column("First Seen", priority=1, description="The time at which the event was first recorded."),
    Column("Count", type="integer", priority=1, description="The number of times this event has occurred."),
    Column("Name", priority=1, description=_NAME_DOC),
]


def _event_row(event: Mapping[str, Any], now: datetime) -> list[Any]:
    first = _since(event.get("firstTimestamp"), now)
    if not event.get("firstTimestamp"):
        first = _since(event.get("eventTime"), now)
    last = _since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = int(event.get("count") or 0)
    series = event.get("series")
    if series:
        last = _since(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    source_text = "" if not component else component if not instance else f"{component}, {instance}"
    return [
        last,
        event.get("type") or "",
        event.get("reason") or "",
        target,
        involved.get("fieldPath") or "",
        source_text,
        str(event.get("message") or "").strip(),
        first,
        count,
        _name(event),
    ]


# --- services and the small kinds -------------------------------------------------------------------------

_SERVICE_COLUMNS = [
    _NAME,
    Column("Type", description="type determines how the Service is exposed."),
    Column(
        "Cluster-IP",
        description="clusterIP is the IP address of the service and is usually assigned randomly.",
    ),
    Column(
        "External-IP",
        description="externalIPs is a list of IP addresses for which nodes in the cluster will also accept "
        "traffic for this service.",
    ),
    Column("Port(s)", description="The list of ports that are exposed by this service."),
    _AGE,
    Column(
        "Selector",
        priority=1,
        description="Route service traffic to pods with label keys and values matching this selector.",
    ),
]


def _service_row(svc: Mapping[str, Any], now: datetime) -> list[Any]:
    spec = svc.get("spec") or {}
    service_type = spec.get("type") or "ClusterIP"
    external_ips = list(spec.get("externalIPs") or [])
    if service_type == "LoadBalancer":
        ingress = [
            i.get("ip") or i.get("hostname") for i in _get(svc, "status", "loadBalancer", "ingress") or []
        ]
        external = ",".join([*(i for i in ingress if i), *external_ips]) or "<pending>"
    elif service_type == "ExternalName":
        external = spec.get("externalName") or "<none>"
    else:
        external = ",".join(external_ips) or "<none>"
    ports = []
    for port in spec.get("ports") or []:
        protocol = port.get("protocol") or "TCP"
        if port.get("nodePort"):
            ports.append(f"{port.get('port')}:{port['nodePort']}/{protocol}")
        else:
            ports.append(f"{port.get('port')}/{protocol}")
    selector = spec.get("selector") or {}
    return [
        _name(svc),
        service_type,
        spec.get("clusterIP") or "<none>",
        external,
        ",".join(ports) or "<none>",
        _age(svc, now),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


def _quota_used_hard(quota: Mapping[str, Any]) -> tuple[str, str]:
    hard = _get(quota, "status", "hard") or _get(quota, "spec", "hard") or {}
    used = _get(quota, "status", "used") or {}
    requests, limits = [], []
    for name in sorted(hard):
        text = f"{name}: {used.get(name, '0')}/{hard[name]}"
        (limits if name.startswith("limits.") else requests).append(text)
    return ", ".join(requests), ", ".join(limits)


_RowFn = Callable[[Mapping[str, Any], datetime], list[Any]]


@dataclass(frozen=True)
class _Printer:
    columns: list[Column]
    row: _RowFn


def _at_most_three(items: list[str], empty: str = "<unset>") -> str:
    """kubectl's lists in a cell: the first three, then `+ N more...`."""
    if len(items) > 3:
        return f"{','.join(items[:3])} + {len(items) - 3} more..."
    return ",".join(items) or empty


def _endpoints_text(endpoints: Mapping[str, Any]) -> str:
    """An Endpoints object's `host:port` pairs (addresses alone for a subset without ports)."""
    subsets = endpoints.get("subsets") or []
    if not subsets:
        return "<none>"
    pairs: list[str] = []
    for subset in subsets:
        ips = [a.get("ip", "") for a in subset.get("addresses") or []]
        ports = subset.get("ports") or []
        if not ports:
            pairs += ips
        for port in ports:
            number = port.get("port")
            pairs += [f"[{ip}]:{number}" if ":" in ip else f"{ip}:{number}" for ip in ips]
    return _at_most_three(pairs, empty="")


def _simple(columns: list[Column], cells: Callable[[Mapping[str, Any]], list[Any]], age_at: int) -> _Printer:
    def row(obj: Mapping[str, Any], now: datetime) -> list[Any]:
        values = cells(obj)
        values.insert(age_at, _age(obj, now))
        return values

    return _Printer(columns, row)


def _crd_date(obj: Mapping[str, Any], now: datetime, *path: str) -> Any:
    value = _get(obj, *path)
    return None if value is None else _since(value, now)


def _tcp_row(tcp: Mapping[str, Any], now: datetime) -> list[Any]:
    # Printer columns of CRDs leave missing values as null; kubectl shows them as <none>.
    return [
        _name(tcp),
        _get(tcp, "spec", "kubernetes", "version"),
        _get(tcp, "status", "kubernetesResources", "version", "version"),
        _get(tcp, "status", "kubernetesResources", "version", "status"),
        _get(tcp, "status", "controlPlaneEndpoint"),
        _get(tcp, "status", "kubeconfig", "admin", "secretName"),
        _get(tcp, "status", "storage", "dataStoreName"),
        _crd_date(tcp, now, "metadata", "creationTimestamp"),
    ]


_CRD_AGE = Column("Age", type="date", description="Age")


def _csr_cells(csr: Mapping[str, Any]) -> list[Any]:
    """kube's printCertificateSigningRequest (without AGE): `<none>` for no signer or duration."""
    seconds = _get(csr, "spec", "expirationSeconds")
    duration = format_age(timedelta(seconds=seconds)) if isinstance(seconds, int) else "<none>"
    return [
        _name(csr),
        _get(csr, "spec", "signerName") or "<none>",
        _get(csr, "spec", "username") or "",
        duration,
        condition_summary(csr),
    ]


def _has_condition(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True" for c in _get(obj, "status", "conditions") or []
    )


def _job_status(job: Mapping[str, Any]) -> str:
    if _has_condition(job, "Complete"):
        return "Complete"
    if _has_condition(job, "Failed"):
        return "Failed"
    if _get(job, "metadata", "deletionTimestamp"):
        return "Terminating"
    for condition in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if _has_condition(job, condition):
            return condition
    return "Running"


def _job_completions(job: Mapping[str, Any]) -> str:
    succeeded = _get(job, "status", "succeeded") or 0
    completions = _get(job, "spec", "completions")
    if completions is not None:
        return f"{succeeded}/{completions}"
    parallelism = _get(job, "spec", "parallelism") or 0
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(job: Mapping[str, Any], now: datetime) -> str:
    start = parse_timestamp(_get(job, "status", "startTime"))
    if start is None:
        return ""
    end = parse_timestamp(_get(job, "status", "completionTime")) or now
    return format_age(end - start)


def _job_row(job: Mapping[str, Any], now: datetime) -> list[Any]:
    containers = _get(job, "spec", "template", "spec", "containers") or []
    return [
        _name(job),
        _job_status(job),
        _job_completions(job),
        _job_duration(job, now),
        _age(job, now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        format_label_selector(_get(job, "spec", "selector")),
    ]


def _template_cells(obj: Mapping[str, Any]) -> list[Any]:
    containers = _get(obj, "spec", "template", "spec", "containers") or []
    return [
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        format_label_selector(_get(obj, "spec", "selector")),
    ]


def _deployment_row(deploy: Mapping[str, Any], now: datetime) -> list[Any]:
    status = deploy.get("status") or {}
    desired = _get(deploy, "spec", "replicas")
    return [
        _name(deploy),
        f"{status.get('readyReplicas') or 0}/{1 if desired is None else desired}",
        status.get("updatedReplicas") or 0,
        status.get("availableReplicas") or 0,
        _age(deploy, now),
        *_template_cells(deploy),
    ]


def _replica_set_row(rs: Mapping[str, Any], now: datetime) -> list[Any]:
    status = rs.get("status") or {}
    return [
        _name(rs),
        _get(rs, "spec", "replicas") or 0,
        status.get("replicas") or 0,
        status.get("readyReplicas") or 0,
        _age(rs, now),
        *_template_cells(rs),
    ]


_TEMPLATE_COLUMNS = [
    Column("Containers", description="Names of each container in the template.", priority=1),
    Column("Images", description="Images referenced by each container in the template.", priority=1),
    Column("Selector", description="Label selector for pods.", priority=1),
]
_DEPLOYMENT_COLUMNS = [
    _NAME,
    Column("Ready", description="Number of the pod with ready state"),
    Column(
        "Up-to-date",
        type="integer",
        description="Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
    ),
    Column(
        "Available",
        type="integer",
        description="Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
    ),
    _AGE,
    *_TEMPLATE_COLUMNS,
]
_REPLICA_SET_COLUMNS = [
    _NAME,
    Column("Desired", type="integer", description="Number of desired pods."),
    Column("Current", type="integer", description="Number of pods the replica set has created."),
    Column("Ready", type="integer", description="The number of ready replicas."),
    _AGE,
    *_TEMPLATE_COLUMNS,
]
_JOB_COLUMNS = [
    _NAME,
    Column("Status", description="Status of the job."),
    Column("Completions", description="The successful completions of the job out of the desired ones."),
    Column("Duration", description="Time the job took, or has been running, since it started."),
    _AGE,
    Column("Containers", description="Names of each container in the template.", priority=1),
    Column("Images", description="Images referenced by each container in the template.", priority=1),
    Column("Selector", description="Query over pods that should match the replicas count.", priority=1),
]

_CRON_JOB_COLUMNS = [
    _NAME,
    Column("Schedule", description="The schedule in Cron format."),
    Column("Timezone", description="The time zone the schedule is read in."),
    Column("Suspend", type="boolean", description="Whether later runs are suspended."),
    Column("Active", type="integer", description="The number of running jobs."),
    Column("Last Schedule", description="When a job was last scheduled."),
    _AGE,
    Column("Containers", description="Names of each container in the template.", priority=1),
    Column("Images", description="Images referenced by each container in the template.", priority=1),
    Column("Selector", description="Query over pods that should match the replicas count.", priority=1),
]


def _cron_job_row(cron_job: Mapping[str, Any], now: datetime) -> list[Any]:
    spec = cron_job.get("spec") or {}
    status = cron_job.get("status") or {}
    job_spec = _get(spec, "jobTemplate", "spec") or {}
    last = status.get("lastScheduleTime")
    return [
        _name(cron_job),
        spec.get("schedule") or "",
        spec.get("timeZone") or "<none>",
        bool(spec.get("suspend")),
        len(status.get("active") or []),
        _since(last, now) if last else "<none>",
        _age(cron_job, now),
        *_template_cells({"spec": job_spec}),
    ]


_DAEMON_SET_COLUMNS = [
    _NAME,
    Column(
        "Desired", type="integer", description="The number of nodes that should be running the daemon pod."
    ),
    Column("Current", type="integer", description="The number of nodes running at least one daemon pod."),
    Column(
        "Ready",
        type="integer",
        description="The number of nodes that should be running the daemon pod and have a ready one.",
    ),
    Column("Up-to-date", type="integer", description="The number of nodes running the updated daemon pod."),
    Column("Available", type="integer", description="The number of nodes whose daemon pod is available."),
    Column("Node Selector", description="Which nodes the daemon pods may run on."),
    _AGE,
    *_TEMPLATE_COLUMNS,
]


def _daemon_set_row(ds: Mapping[str, Any], now: datetime) -> list[Any]:
    status = ds.get("status") or {}
    node_selector = _get(ds, "spec", "template", "spec", "nodeSelector") or {}
    return [
        _name(ds),
        status.get("desiredNumberScheduled") or 0,
        status.get("currentNumberScheduled") or 0,
        status.get("numberReady") or 0,
        status.get("updatedNumberScheduled") or 0,
        status.get("numberAvailable") or 0,
        ",".join(f"{k}={v}" for k, v in sorted(node_selector.items())) or "<none>",
        _age(ds, now),
        *_template_cells(ds),
    ]


_CONTROLLER_REVISION_COLUMNS = [
    _NAME,
    Column("Controller", description="The object that owns this revision."),
    Column("Revision", type="integer", description="The revision number."),
    _AGE,
]


def _controller_revision_row(revision: Mapping[str, Any], now: datetime) -> list[Any]:
    owner = next(
        (r for r in _get(revision, "metadata", "ownerReferences") or [] if r.get("controller")), None
    )
    controller = "<none>"
    if owner is not None:
        group = str(owner.get("apiVersion", "")).rpartition("/")[0]
        controller = f"{str(owner.get('kind', '')).lower()}.{group}/{owner.get('name', '')}"
    return [_name(revision), controller, revision.get("revision") or 0, _age(revision, now)]


_BINDING_COLUMNS = [
    _NAME,
    Column("Role", description="The role the subjects are bound to."),
    _AGE,
    Column("Users", description="Users in the binding.", priority=1),
    Column("Groups", description="Groups in the binding.", priority=1),
    Column("ServiceAccounts", description="Service accounts in the binding.", priority=1),
]


def _binding_row(binding: Mapping[str, Any], now: datetime) -> list[Any]:
    ref = binding.get("roleRef") or {}
    subjects = binding.get("subjects") or []

    def named(kind: str) -> str:
        return ", ".join(s.get("name", "") for s in subjects if s.get("kind") == kind)

    accounts = ", ".join(
        f"{s.get('namespace', '')}/{s.get('name', '')}" for s in subjects if s.get("kind") == "ServiceAccount"
    )
    return [
        _name(binding),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        _age(binding, now),
        named("User"),
        named("Group"),
        accounts,
    ]


def _ingress_row(ingress: Mapping[str, Any], now: datetime) -> list[Any]:
    spec = ingress.get("spec") or {}
    hosts = [r.get("host") for r in spec.get("rules") or [] if r.get("host")]
    addresses = [
        i.get("ip") or i.get("hostname") or ""
        for i in _get(ingress, "status", "loadBalancer", "ingress") or []
    ]
    return [
        _name(ingress),
        spec.get("ingressClassName") or "<none>",
        ",".join(hosts) or "*",
        ",".join(addresses),
        "80, 443" if spec.get("tls") else "80",
        _age(ingress, now),
    ]


def _priority_class_row(pc: Mapping[str, Any], now: datetime) -> list[Any]:
    return [
        _name(pc),
        pc.get("value") or 0,
        bool(pc.get("globalDefault")),
        _age(pc, now),
        pc.get("preemptionPolicy") or "",
    ]


def _disruption_budget_row(pdb: Mapping[str, Any], now: datetime) -> list[Any]:
    spec = pdb.get("spec") or {}

    def shown(value: Any) -> str:
        return "N/A" if value is None else str(value)

    return [
        _name(pdb),
        shown(spec.get("minAvailable")),
        shown(spec.get("maxUnavailable")),
        int(_get(pdb, "status", "disruptionsAllowed") or 0),
        _age(pdb, now),
    ]


# --- storage -------------------------------------------------------------------------------------------

_ACCESS_MODE_ABBREVIATIONS = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)


def _access_modes(modes: Any) -> str:
    """kube's GetAccessModesAsString: in a fixed order whatever the object's, each once."""
    given = modes if isinstance(modes, list) else []
    return ",".join(short for mode, short in _ACCESS_MODE_ABBREVIATIONS if mode in given)


def _storage(resources: Any) -> str:
    # an absent quantity prints as Go's zero Quantity
    value = resources.get("storage") if isinstance(resources, Mapping) else None
    return "0" if value is None else str(value)


def _volume_phase(obj: Mapping[str, Any]) -> str:
    if _get(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    return str(_get(obj, "status", "phase") or "")


def _unset(value: Any) -> str:
    return "<unset>" if value is None else str(value)


def _persistent_volume_claim_row(pvc: Mapping[str, Any], now: datetime) -> list[Any]:
    spec = pvc.get("spec") or {}
    volume = str(spec.get("volumeName") or "")
    # a claim shows what it was given only once bound to a volume
    capacity = _storage(_get(pvc, "status", "capacity")) if volume else ""
    modes = _access_modes(_get(pvc, "status", "accessModes")) if volume else ""
    return [
        _name(pvc),
        _volume_phase(pvc),
        volume,
        capacity,
        modes,
        volume_class(pvc),
        _unset(spec.get("volumeAttributesClassName")),
        _age(pvc, now),
        _unset(spec.get("volumeMode")),
    ]


def _persistent_volume_row(pv: Mapping[str, Any], now: datetime) -> list[Any]:
    spec = pv.get("spec") or {}
    ref = spec.get("claimRef")
    claim = f"{ref.get('namespace') or ''}/{ref.get('name') or ''}" if isinstance(ref, Mapping) else ""
    return [
        _name(pv),
        _storage(spec.get("capacity")),
        _access_modes(spec.get("accessModes")),
        str(spec.get("persistentVolumeReclaimPolicy") or ""),
        _volume_phase(pv),
        claim,
        volume_class(pv),
        _unset(spec.get("volumeAttributesClassName")),
        str(_get(pv, "status", "reason") or ""),
        _age(pv, now),
        _unset(spec.get("volumeMode")),
    ]


def _storage_class_row(sc: Mapping[str, Any], now: datetime) -> list[Any]:
    return [
        _name(sc) + (" (default)" if is_default_class(sc) else ""),
        str(sc.get("provisioner") or ""),
        str(sc.get("reclaimPolicy") or "Delete"),
        str(sc.get("volumeBindingMode") or "Immediate"),
        bool(sc.get("allowVolumeExpansion")),
        _age(sc, now),
    ]


_ATTRIBUTES_CLASS = Column("VolumeAttributesClass", description="The volume attributes class asked for.")
_VOLUME_MODE = Column(
    "VolumeMode", priority=1, description="Whether the volume is a filesystem or a block device."
)
_STORAGE_CLASS = Column("StorageClass", description="The storage class of the volume or claim.")
_ACCESS_MODES = Column("Access Modes", description="How the volume may be mounted.")


_PRINTERS: dict[str, _Printer] = {
    "PersistentVolumeClaim": _Printer(
        [
            _NAME,
            Column("Status", description="The claim's phase."),
            Column("Volume", description="The volume the claim is bound to."),
            Column("Capacity", description="The storage the bound volume gives the claim."),
            _ACCESS_MODES,
            _STORAGE_CLASS,
            _ATTRIBUTES_CLASS,
            _AGE,
            _VOLUME_MODE,
        ],
        _persistent_volume_claim_row,
    ),
    "PersistentVolume": _Printer(
        [
            _NAME,
            Column("Capacity", description="The volume's storage."),
            _ACCESS_MODES,
            Column("Reclaim Policy", description="What happens to the volume once its claim is gone."),
            Column("Status", description="The volume's phase."),
            Column("Claim", description="The claim bound to the volume, namespace/name."),
            _STORAGE_CLASS,
            _ATTRIBUTES_CLASS,
            Column("Reason", description="Why the volume is in its phase."),
            _AGE,
            _VOLUME_MODE,
        ],
        _persistent_volume_row,
    ),
    "StorageClass": _Printer(
        [
            _NAME,
            Column("Provisioner", description="The provisioner of the class's volumes."),
            Column(
                "ReclaimPolicy", description="What happens to a provisioned volume once its claim is gone."
            ),
            Column("VolumeBindingMode", description="When claims of the class are bound and provisioned."),
            Column("AllowVolumeExpansion", description="Whether a claim of the class may grow."),
            _AGE,
        ],
        _storage_class_row,
    ),
    # kube describes HANDLER with ObjectMeta's (absent) doc of "handler": an empty description.
    "RuntimeClass": _simple(
        [_NAME, Column("Handler"), _AGE], lambda o: [_name(o), _get(o, "handler") or ""], 2
    ),
    "CertificateSigningRequest": _simple(
        [
            _NAME,
            _AGE,
            Column("SignerName", description="The signer the request is for."),
            Column("Requestor", description="The user who created the request."),
            Column("RequestedDuration", description="The validity the request asks the signer for."),
            Column("Condition", description="Whether the request is approved or denied, and issued."),
        ],
        _csr_cells,
        1,
    ),
    "Pod": _Printer(_POD_COLUMNS, lambda obj, now: _pod_row(obj, now)[0]),
    "Job": _Printer(_JOB_COLUMNS, _job_row),
    "CronJob": _Printer(_CRON_JOB_COLUMNS, _cron_job_row),
    "Deployment": _Printer(_DEPLOYMENT_COLUMNS, _deployment_row),
    "ReplicaSet": _Printer(_REPLICA_SET_COLUMNS, _replica_set_row),
    "DaemonSet": _Printer(_DAEMON_SET_COLUMNS, _daemon_set_row),
    "StatefulSet": _Printer(
        [
            _NAME,
            Column("Ready", description="Number of the pods that are ready."),
            _AGE,
            *_TEMPLATE_COLUMNS[:2],
        ],
        lambda o, now: [
            _name(o),
            f"{_get(o, 'status', 'readyReplicas') or 0}/{_get(o, 'spec', 'replicas') or 0}",
            _age(o, now),
            *_template_cells(o)[:2],
        ],
    ),
    "RoleBinding": _Printer(_BINDING_COLUMNS, _binding_row),
    "ClusterRoleBinding": _Printer(_BINDING_COLUMNS, _binding_row),
    "Ingress": _Printer(
        [
            _NAME,
            Column("Class", description="The ingress class."),
            Column("Hosts", description="Hosts the ingress serves."),
            Column("Address", description="Where the ingress is reachable."),
            Column("Ports", description="Ports of the ingress."),
            _AGE,
        ],
        _ingress_row,
    ),
    "NetworkPolicy": _Printer(
        [_NAME, Column("Pod-Selector", description="The pods the policy applies to."), _AGE],
        lambda o, now: [_name(o), format_label_selector(_get(o, "spec", "podSelector")), _age(o, now)],
    ),
    "IngressClass": _Printer(
        [
            _NAME,
            Column("Controller", description="The controller that implements the class."),
            Column("Parameters", description="The class's parameters object."),
            _AGE,
        ],
        lambda o, now: [
            _name(o),
            _get(o, "spec", "controller") or "",
            (lambda p: f"{p.get('kind', '')}/{p.get('name', '')}" if p else "<none>")(
                _get(o, "spec", "parameters")
            ),
            _age(o, now),
        ],
    ),
    "PriorityClass": _Printer(
        [
            _NAME,
            Column("Value", type="integer", description="The priority pods of the class get."),
            Column(
                "Global-Default", type="boolean", description="Whether pods without a class get this one."
            ),
            _AGE,
            Column("PreemptionPolicy", description="Whether pods of the class may preempt others."),
        ],
        _priority_class_row,
    ),
    "ControllerRevision": _Printer(_CONTROLLER_REVISION_COLUMNS, _controller_revision_row),
    "PodDisruptionBudget": _Printer(
        [
            _NAME,
            Column("Min Available", description="The minimum number of pods that must be available."),
            Column("Max Unavailable", description="The maximum number of pods that may be unavailable."),
            Column("Allowed Disruptions", type="integer", description="How many pods may be disrupted now."),
            _AGE,
        ],
        _disruption_budget_row,
    ),
    "Node": _Printer(_NODE_COLUMNS, _node_row),
    "Event": _Printer(_EVENT_COLUMNS, _event_row),
    "Service": _Printer(_SERVICE_COLUMNS, _service_row),
    "Namespace": _simple(
        [_NAME, Column("Status", description="The status of the namespace"), _AGE],
        lambda o: [_name(o), _get(o, "status", "phase") or ""],
        2,
    ),
    "Lease": _simple(
        [_NAME, Column("Holder", description="The holder of the lease"), _AGE],
        lambda o: [_name(o), _get(o, "spec", "holderIdentity") or ""],
        2,
    ),
    "Secret": _simple(
        [
            _NAME,
            Column("Type", description="The type of the secret"),
            Column("Data", type="string", description="The number of data items"),
            _AGE,
        ],
        lambda o: [_name(o), o.get("type") or "", str(len(o.get("data") or {}))],
        3,
    ),
    "Endpoints": _simple(
        [
            _NAME,
            Column("Endpoints", description="The set of all endpoints is the union of all subsets."),
            _AGE,
        ],
        lambda o: [_name(o), _endpoints_text(o)],
        2,
    ),
    "EndpointSlice": _simple(
        [
            _NAME,
            Column(
                "AddressType", description="addressType specifies the type of address carried by this slice."
            ),
            Column(
                "Ports", description="ports specifies the list of network ports exposed by each endpoint."
            ),
            Column("Endpoints", description="endpoints is a list of unique endpoints in this slice."),
            _AGE,
        ],
        lambda o: [
            _name(o),
            str(o.get("addressType") or ""),
            _at_most_three(
                [
                    str(p.get("port") if p.get("port") is not None else p.get("name") or "*")
                    for p in o.get("ports") or []
                ]
            ),
            _at_most_three([a for e in o.get("endpoints") or [] for a in e.get("addresses") or []]),
        ],
        4,
    ),
    "ConfigMap": _simple(
        [_NAME, Column("Data", description="The number of data items"), _AGE],
        lambda o: [_name(o), str(len(o.get("data") or {}) + len(o.get("binaryData") or {}))],
        2,
    ),
    "ServiceAccount": _simple(
        [_NAME, Column("Secrets", description="The number of secrets"), _AGE],
        lambda o: [_name(o), str(len(o.get("secrets") or []))],
        2,
    ),
    "ResourceQuota": _simple(
        [
            _NAME,
            _AGE,
            Column(
                "Request",
                description="Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            Column(
                "Limit",
                description="Limits control the maximum amount of cpu/memory that a container may use "
                "independent of contention on the node.",
            ),
        ],
        lambda o: [_name(o), *_quota_used_hard(o)],
        1,
    ),
    "MutatingWebhookConfiguration": _simple(
        [
            _NAME,
            Column("Webhooks", type="integer", description="Webhooks indicates the number of webhooks"),
            _AGE,
        ],
        lambda o: [_name(o), len(o.get("webhooks") or [])],
        2,
    ),
    "ValidatingWebhookConfiguration": _simple(
        [
            _NAME,
            Column("Webhooks", type="integer", description="Webhooks indicates the number of webhooks"),
            _AGE,
        ],
        lambda o: [_name(o), len(o.get("webhooks") or [])],
        2,
    ),
    "TenantControlPlane": _Printer(
        [
            _NAME,
            Column("Version", description="Kubernetes version"),
            Column("Installed Version", description="The actual installed Kubernetes version from status"),
            Column("Status", description="Status"),
            Column("Control-Plane endpoint", description="Tenant Control Plane Endpoint (API server)"),
            Column("Kubeconfig", description="Secret which contains admin kubeconfig"),
            Column("Datastore", description="DataStore actually used"),
            _CRD_AGE,
        ],
        _tcp_row,
    ),
    "DataStore": _Printer(
        [
            _NAME,
            Column("Driver", description="Kamaji data store driver"),
            Column("Ready", type="boolean", description="DataStore validated and ready for use"),
            _CRD_AGE,
        ],
        lambda o, now: [
            _name(o),
            _get(o, "spec", "driver"),
            _get(o, "status", "ready"),
            _crd_date(o, now, "metadata", "creationTimestamp"),
        ],
    ),
}

# Kinds without a printer get kube's default table: the name and the creation time in RFC 3339.
_DEFAULT = _Printer(
    [_NAME, Column("Created At", type="date", description=_AGE_DOC)],
    lambda o, now: [_name(o), _get(o, "metadata", "creationTimestamp")],
)


def _row_object(obj: Mapping[str, Any], include_object: str) -> dict[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return dict(obj)
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(obj.get("metadata") or {}),
    }


# Columns kube's printers gained in a later release, by the first minor release that shows them:
# `kubectl get job`'s STATUS (kubernetes/kubernetes#123226) and `kubectl get cronjob`'s TIMEZONE (#122231)
# came with 1.30, `kubectl get priorityclass`'s PREEMPTIONPOLICY with 1.32 (#126529), `kubectl get pv/pvc`'s
# VOLUMEATTRIBUTESCLASS with 1.29 (with the VolumeAttributesClass API; in the printers of 1.29.0, not 1.28.3).
_COLUMNS_SINCE: dict[str, dict[str, int]] = {
    "PersistentVolumeClaim": {"VolumeAttributesClass": 29},
    "PersistentVolume": {"VolumeAttributesClass": 29},
    "Job": {"Status": 30},
    "CronJob": {"Timezone": 30},
    "PriorityClass": {"PreemptionPolicy": 32},
}


@functools.cache
def _printer_of(kind: str, minor: int) -> _Printer:
    """The kind's printer as the tenant's release has it: columns that came later are left out. Kept,
    since every table asks for it, a watch one per event."""
    printer = _PRINTERS.get(kind, _DEFAULT)
    later = _COLUMNS_SINCE.get(kind, {})
    dropped = {i for i, c in enumerate(printer.columns) if later.get(c.name, 0) > minor}
    if not dropped:
        return printer

    def row(obj: Mapping[str, Any], now: datetime) -> list[Any]:
        return [cell for i, cell in enumerate(printer.row(obj, now)) if i not in dropped]

    return _Printer([c for i, c in enumerate(printer.columns) if i not in dropped], row)


def to_table(
    kind: str,
    objects: list[dict[str, Any]],
    *,
    include_object: str = "Metadata",
    now: datetime,
    resource_version: str | None = None,
    continue_token: str | None = None,
    include_columns: bool = True,
    minor: int = LATEST,
) -> dict[str, Any]:
    """A `meta.k8s.io/v1` Table of `objects` of one kind, all columns included (kubectl hides priority 1).

    `include_object` is the request's `includeObject` (`None`, `Metadata`, `Object`); `now` anchors AGE;
    `minor` is the tenant's release, whose printers may have fewer columns.
    """
    if include_object not in ("None", "Metadata", "Object"):
        raise ValueError(f"includeObject must be one of None, Metadata, Object, not {include_object!r}")
    printer = _printer_of(kind, minor)
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": printer.row(obj, now)}
        if kind == "Pod":
            conditions = _pod_row(obj, now)[1]
            if conditions:
                row["conditions"] = conditions
        attached = _row_object(obj, include_object)
        if attached is not None:
            row["object"] = attached
        rows.append(row)
    metadata: dict[str, Any] = {}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    table: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}
    if include_columns:
        table["columnDefinitions"] = [c.to_dict() for c in printer.columns]
    table["rows"] = rows
    return table


def watch_event_table(
    event_type: str,
    kind: str,
    obj: dict[str, Any],
    *,
    now: datetime,
    include_object: str = "Metadata",
    include_columns: bool = True,
    minor: int = LATEST,
) -> dict[str, Any]:
    """A watch event whose object is a one-row Table, as `kubectl get -w` asks for.

    kube-apiserver sends the column definitions only with a stream's first event and kubectl reuses
    them for the rest; pass `include_columns=False` after the first to save the bytes (repeating
    identical columns is harmless: kubectl prints the header once).
    """
    version = str(_get(obj, "metadata", "resourceVersion") or "") or None
    table = to_table(
        kind,
        [obj],
        include_object=include_object,
        now=now,
        resource_version=version,
        include_columns=include_columns,
        minor=minor,
    )
    return {"type": event_type, "object": table}
