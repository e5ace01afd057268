"""A pod's sandbox and the runtime handler it runs under: which handlers a simulated worker's container
runtime has, and what the kubelet reports when a pod's RuntimeClass cannot be honoured.

The facts are kube 1.33's kubelet (`pkg/kubelet/runtimeclass`, `kuberuntime_sandbox.go`: the class is
looked up, its `handler` passed to the runtime) and containerd 2's CRI service, which refuses a handler
its config does not name. Either failure leaves the pod in ContainerCreating with a Warning
`FailedCreatePodSandBox`, and the pod worker tries again after its back-off.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable

FAILED_CREATE_POD_SANDBOX = "FailedCreatePodSandBox"
# What containerd's config names on every node, and what the NVIDIA container toolkit adds where GPUs are
# (`nvidia-ctk runtime configure --runtime=containerd`, as the GPU Operator and HAMi's guides run it).
RUNC = "runc"
NVIDIA = "nvidia"


def default_handlers(has_gpus: bool) -> tuple[str, ...]:
    """The handlers a worker's runtime has unless told otherwise."""
    return (NVIDIA, RUNC) if has_gpus else (RUNC,)


def runtime_class_not_found(name: str) -> str:
    """The kubelet's RuntimeClass lister answering for a class that is not there."""
    return f'runtimeclass.node.k8s.io "{name}" not found'


def lookup_failed(name: str, error: str) -> str:
    return f"failed to lookup RuntimeClass {name}: {error}"


def handler_error(handler: str, handlers: Iterable[str]) -> str | None:
    """containerd's answer to RunPodSandbox for `handler` ("" is its default runtime, always there), as
    the kubelet receives it over gRPC; None when the runtime has that handler."""
    if handler == "" or handler in set(handlers):
        return None
    return (
        "rpc error: code = Unknown desc = failed to get sandbox runtime: "
        f'no runtime for "{handler}" is configured'
    )


def failed_message(error: str) -> str:
    """The Warning the kubelet records on the pod for a sandbox it could not create."""
    return f"Failed to create pod sandbox: {error}"


def sandbox_id(pod_uid: str) -> str:
    """The pod sandbox's id in the simulated runtime (64 hex digits, as containerd's)."""
    return hashlib.sha256(f"{pod_uid}/sandbox".encode()).hexdigest()


def network_namespace(pod_uid: str) -> str:
    """Where the pod's network namespace would be mounted (containerd's CNI namespaces)."""
    return f"/var/run/netns/cni-{uuid.uuid5(uuid.NAMESPACE_OID, pod_uid)}"


def port_refused(pod_uid: str, port: int) -> str:
    """containerd's CRI `portForward` when nothing listens on `port` in the pod: it dials localhost inside
    the pod's network namespace over IPv4, then IPv6."""
    return (
        f'failed to execute portforward in network namespace "{network_namespace(pod_uid)}": '
        f'failed to connect to localhost:{port} inside namespace "{sandbox_id(pod_uid)}", '
        f"IPv4: dial tcp4 127.0.0.1:{port}: connect: connection refused "
        f"IPv6 dial tcp6 [::1]:{port}: connect: connection refused "
    )
