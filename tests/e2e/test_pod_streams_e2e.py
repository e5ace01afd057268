"""`kubectl exec -it … -- bash`, `kubectl attach` and `kubectl port-forward`, and the Python client's: the
API server serves `pods/exec`, `pods/attach` and `pods/portforward` through the pod's kubelet.

A shell reads the client's lines and runs each on the kubelet (`apiserver/podshell.py`); with a terminal
it prompts and echoes as a pty would. Attach shows what the container's process writes from now on (its
log followed from the end), until the container ends: kubectl then exits 0, as when an attached process
exits.

Port forwarding goes to the kubelet's `/portForward/<ns>/<pod>`; the API server copies bytes, and the
kubelet forwards to the port in the pod, as a kubelet with containerd does. kubectl up to 1.30 speaks
SPDY/3.1; from 1.31 it first asks for a WebSocket tunnelling SPDY (`SPDY/3.1+portforward.k8s.io`), which
a 1.31 server accepts (PortForwardWebsockets) and a 1.30 server refuses, so kubectl falls back to SPDY.
The Python client speaks the kubelet's WebSocket channel protocol. In the simulated pods only the ports
a component serves answer (`Worker.pod_listeners`); any other port is containerd's refusal. The lab's
own path (HAMi's metrics and logs through the tunnel) is in test_running_lab.py."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import re
import select
import socket
import ssl
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from apiserver_harness import (
    BackgroundLoop,
    RunningAPIServer,
    closed_unanswered,
    connect_kubelets,
    kubectl_path,
    port_forwarding,
    start_server,
)
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.stream import portforward as python_portforward
from kubernetes.stream import stream as python_stream

from tenantgpu.apiserver.pki import render_kubeconfig
from tenantgpu.gpushare import SharingConfig
from tenantgpu.kubeclient import KubeClient
from tenantgpu.node.worker import Worker

pytestmark = pytest.mark.slow  # real kubectl and a worker

NODE = "gpu-0"
ECHO_PORT = 7000  # the port the echo pod's component serves
ECHO = {
    "metadata": {
        "name": "echo",
        "namespace": "kube-system",
        "labels": {"app.kubernetes.io/component": "echo"},
    },
    "spec": {
        "nodeName": NODE,
        "containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 7000}]}],
    },
}
WEB = {
    "metadata": {"name": "web"},
    "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "nginx"}]},
}
PENDING = {"metadata": {"name": "unbound"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def runner(name: str) -> dict[str, object]:
    """A pod whose container runs for two seconds (the lab's documented annotation), then ends."""
    return {
        "metadata": {"name": name, "annotations": {"tenantgpu.io/run-for": "2s"}},
        "spec": {"nodeName": NODE, "restartPolicy": "Never", "containers": [{"name": "c", "image": "cuda"}]},
    }


REFUSED = re.compile(
    r"error forwarding port 80 to pod [0-9a-f]{64}, uid : failed to execute portforward in network namespace "
    r'\\?"/var/run/netns/cni-[0-9a-f-]{36}\\?": failed to connect to localhost:80 inside namespace '
    r'\\?"[0-9a-f]{64}\\?", IPv4: dial tcp4 127\.0\.0\.1:80: connect: connection refused '
    r"IPv6 dial tcp6 \[::1\]:80: connect: connection refused"
)


@dataclass
class Tenant:
    running: RunningAPIServer
    worker: Worker
    client: KubeClient
    version: str
    home: Path


@pytest.fixture(scope="module", params=["v1.30.2", "v1.31.4"])
def tenant(
    request: pytest.FixtureRequest, background_loop: BackgroundLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tenant]:
    version: str = request.param
    running = start_server(background_loop, tmp_path_factory.mktemp("forward"), kubernetes_version=version)
    ca = running.server.config.pki.ca
    connect_kubelets(running)

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data.upper())
                await writer.drain()
        writer.close()

    async def up() -> tuple[Worker, KubeClient, asyncio.Server]:
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        client = KubeClient.from_kubeconfig(running.kubeconfig)
        worker = Worker(client, NODE, [], SharingConfig(), client_ca_pem=ca.cert_pem)
        await worker.start()
        worker.pod_listeners[("echo", ECHO_PORT)] = ("127.0.0.1", server.sockets[0].getsockname()[1])
        for pod in (ECHO, WEB, PENDING):
            await client.create("pods", pod, pod["metadata"].get("namespace", "default"))
        for namespace, name in (("kube-system", "echo"), ("default", "web")):
            async with asyncio.timeout(20):
                while (await client.get("pods", name, namespace)).get("status", {}).get("phase") != "Running":
                    await asyncio.sleep(0.05)
        return worker, client, server

    worker, client, echo_server = background_loop.run(up())
    yield Tenant(running, worker, client, version, tmp_path_factory.mktemp("home"))

    async def down() -> None:
        echo_server.close()
        await worker.stop()
        await client.close()

    background_loop.run(down())
    background_loop.run(running.server.stop())
    running.datastore.close()


def forwarding(
    tenant: Tenant, version: str, *args: str
) -> contextlib.AbstractContextManager[tuple[subprocess.Popen[str], int]]:
    """`kubectl port-forward ARGS` of kubectl `version` against the tenant, running."""
    kubectl = [kubectl_path(version), "--kubeconfig", str(tenant.running.kubeconfig)]
    return port_forwarding(kubectl, {**os.environ, "HOME": str(tenant.home / version)}, *args)


def _exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as connection:
        connection.sendall(payload)
        received = b""
        while len(received) < len(payload):
            chunk = connection.recv(65536)
            if not chunk:
                break
            received += chunk
        return received


@pytest.mark.parametrize("kubectl_version", ["1.27", "1.30", "1.31", "1.33"])
def test_kubectl_of_each_release_forwards_a_local_port_to_the_pods_port(
    tenant: Tenant, kubectl_version: str
) -> None:
    with forwarding(tenant, kubectl_version, "-n", "kube-system", "pod/echo", f":{ECHO_PORT}") as (_, port):
        assert _exchange(port, b"hello gpu") == b"HELLO GPU"
        # more than one SPDY frame's worth, and two connections at once over the one SPDY connection
        big = bytes(range(97, 123)) * 8000
        with socket.create_connection(("127.0.0.1", port), timeout=15) as other:
            other.sendall(b"second")
            assert _exchange(port, big) == big.upper()
            assert other.recv(100) == b"SECOND"


def test_a_port_nothing_listens_on_ends_kubectl_with_the_runtimes_refusal(tenant: Tenant) -> None:
    for version in ("1.29", "1.33"):
        with forwarding(tenant, version, "pod/web", ":80") as (process, port):
            assert closed_unanswered(port, b"GET / HTTP/1.1\r\n\r\n")  # the local connection just closes
            _, stderr = process.communicate(timeout=15)
        assert process.returncode == 1, f"kubectl {version}"
        assert REFUSED.search(stderr), f"kubectl {version}: {stderr}"
        assert "error: lost connection to pod" in stderr


def test_kubectl_from_131_tunnels_spdy_through_a_websocket_only_where_the_server_has_the_gate(
    tenant: Tenant,
) -> None:
    """kube-apiserver 1.31 switches such a request to the tunnelling subprotocol; 1.30 passes it to the
    kubelet, which wants `port` parameters of a WebSocket, and its 400 makes kubectl fall back to SPDY."""
    status, headers, body = _raw_upgrade(
        tenant,
        "GET",
        "/api/v1/namespaces/kube-system/pods/echo/portforward",
        {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Protocol": "SPDY/3.1+portforward.k8s.io",
        },
    )
    if tenant.version.startswith("v1.31"):
        assert status == 101
        assert headers["sec-websocket-protocol"] == "SPDY/3.1+portforward.k8s.io"
        assert headers["sec-websocket-accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    else:
        assert (status, body.strip()) == (400, b'query parameter "port" is required')


def _raw_upgrade(
    tenant: Tenant, method: str, path: str, headers: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    """One request to switch protocols, as the admin; the status, headers and whatever body came at once."""
    running = tenant.running
    cert, key = running.server.config.pki.ca.issue_client("kubernetes-admin", ["system:masters"])
    context = ssl.create_default_context(cadata=running.server.ca_pem.decode())
    cert_file, key_file = tenant.home / "admin.crt", tenant.home / "admin.key"
    cert_file.write_bytes(cert)
    key_file.write_bytes(key)
    context.load_cert_chain(cert_file, key_file)
    host, port = running.url.removeprefix("https://").rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=15) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        request = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n"
        request += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        tls.sendall((request + "\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = tls.recv(65536)
            if not chunk:
                break
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        fields = dict(
            (name.strip().lower(), value.strip())
            for name, _, value in (line.partition(":") for line in lines[1:])
        )
        status = int(lines[0].split(" ")[1])
        if status != 101 and "content-length" in fields:
            while len(body) < int(fields["content-length"]):
                body += tls.recv(65536)
        return status, fields, body


def test_the_python_client_forwards_over_the_websocket_channel_protocol(tenant: Tenant) -> None:
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(tenant.running.kubeconfig)))
    try:
        forward = python_portforward(
            api.connect_get_namespaced_pod_portforward, "echo", "kube-system", ports=str(ECHO_PORT)
        )
        connection = forward.socket(ECHO_PORT)
        connection.setblocking(True)
        connection.settimeout(15)
        connection.sendall(b"from python")
        assert connection.recv(100) == b"FROM PYTHON"
        connection.close()
        assert forward.error(ECHO_PORT) is None
        forward.close()

        refused = python_portforward(api.connect_get_namespaced_pod_portforward, "web", "default", ports="80")
        connection = refused.socket(80)
        connection.setblocking(True)
        connection.settimeout(15)
        assert connection.recv(100) == b""
        assert REFUSED.search(refused.error(80) or ""), refused.error(80)
        refused.close()
    finally:
        api.api_client.close()


def test_port_forward_refusals_are_kubes(tenant: Tenant) -> None:
    kubectl = kubectl_path("1.33")
    env = {**os.environ, "HOME": str(tenant.home / "1.33")}

    def run(*args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
        command = [kubectl, "--kubeconfig", str(kubeconfig or tenant.running.kubeconfig), *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)

    # kubectl asks nothing of a pod that does not run; the API server answers a plain request or a pod
    # without a node with kube's 400s
    pending = run("port-forward", "pod/unbound", ":80")
    assert pending.returncode == 1
    assert "unable to forward port because pod is not running. Current status=Pending" in pending.stderr
    plain = run("get", "--raw", "/api/v1/namespaces/kube-system/pods/echo/portforward")
    assert "Upgrade request required" in plain.stderr
    unbound = run("get", "--raw", "/api/v1/namespaces/default/pods/unbound/portforward")
    assert "pod unbound does not have a host assigned" in unbound.stderr
    status, _, body = _raw_upgrade(
        tenant,
        "POST",
        "/api/v1/namespaces/kube-system/pods/echo/portforward?ports=http",
        {"Upgrade": "SPDY/3.1", "Connection": "Upgrade", "X-Stream-Protocol-Version": "portforward.k8s.io"},
    )
    assert status == 400 and b'strconv.ParseInt: parsing \\"http\\": invalid syntax' in body

    # a user who may read pods but not forward their ports is refused before anything reaches the kubelet
    role = {
        "metadata": {"name": "pod-reader", "namespace": "kube-system"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    }
    binding = {
        "metadata": {"name": "mallory-reads-pods", "namespace": "kube-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "mallory"}],
    }

    async def grant() -> None:
        for plural, body in (("roles", role), ("rolebindings", binding)):
            with contextlib.suppress(Exception):  # the fixture's second test run finds them there
                await tenant.client.create(f"{plural}.rbac.authorization.k8s.io", body, "kube-system")

    tenant.running.loop.run(grant())
    cert, key = tenant.running.server.config.pki.ca.issue_client("mallory", [])
    text = render_kubeconfig(
        "tenant",
        tenant.running.url,
        tenant.running.server.ca_pem,
        "mallory",
        client_cert_pem=cert,
        client_key_pem=key,
    )
    mallory = tenant.running.write_kubeconfig("mallory.kubeconfig", text)
    forbidden = run("-n", "kube-system", "port-forward", "pod/echo", ":7000", kubeconfig=mallory)
    assert forbidden.returncode == 1
    assert 'pods "echo" is forbidden: User "mallory" cannot create resource "pods/portforward"' in (
        forbidden.stderr
    ), forbidden.stderr


def _start_runner(tenant: Tenant, name: str) -> None:
    async def start() -> None:
        await tenant.client.create("pods", runner(name), "default")
        async with asyncio.timeout(20):
            while (await tenant.client.get("pods", name, "default")).get("status", {}).get(
                "phase"
            ) != "Running":
                await asyncio.sleep(0.02)

    tenant.running.loop.run(start())


@pytest.mark.parametrize("kubectl_version", ["1.29", "1.33"])
def test_kubectl_attach_shows_what_the_process_writes_until_it_exits(
    tenant: Tenant, kubectl_version: str
) -> None:
    """kubectl 1.29 attaches over SPDY, 1.33 over a WebSocket; both see the process's last words (none
    of what it wrote before), and exit 0 when it ends."""
    name = f"runner-{kubectl_version.replace('.', '-')}-{tenant.version.replace('.', '-')}"
    _start_runner(tenant, name)
    env = {**os.environ, "HOME": str(tenant.home / kubectl_version)}
    command = [kubectl_path(kubectl_version), "--kubeconfig", str(tenant.running.kubeconfig), "attach", name]
    started = time.monotonic()
    attached = subprocess.run(command, capture_output=True, text=True, env=env, timeout=30)
    assert attached.returncode == 0, attached.stderr
    assert attached.stdout.strip().endswith("process exited with code 0")
    assert "tenantgpu simulated container" not in attached.stdout  # the start-up block was written before
    assert time.monotonic() - started < 10  # it returned when the container ended, not at a timeout


def test_the_python_client_attaches_and_reads_the_processs_exit(tenant: Tenant) -> None:
    name = f"runner-python-{tenant.version.replace('.', '-')}"
    _start_runner(tenant, name)
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(tenant.running.kubeconfig)))
    try:
        attached = python_stream(
            api.connect_get_namespaced_pod_attach,
            name,
            "default",
            stdout=True,
            stderr=True,
            stdin=False,
            tty=False,
            _preload_content=False,
        )
        output = ""
        deadline = time.monotonic() + 20
        while attached.is_open() and time.monotonic() < deadline:
            attached.update(timeout=1)
            output += attached.read_stdout() if attached.peek_stdout() else ""
        assert not attached.is_open()
        assert output.strip() == "process exited with code 0"
        assert attached.returncode == 0  # the error channel's Success
        attached.close()
    finally:
        api.api_client.close()


def test_attach_refusals_are_kubes(tenant: Tenant) -> None:
    raw = "/api/v1/namespaces/kube-system/pods/echo/attach?stdout=true&container=sidecar"
    status, _, body = _raw_upgrade(tenant, "POST", raw, {"Upgrade": "SPDY/3.1", "Connection": "Upgrade"})
    assert status == 400 and b"container sidecar is not valid for pod echo" in body
    bare = "/api/v1/namespaces/kube-system/pods/echo/attach"
    status, _, body = _raw_upgrade(tenant, "POST", bare, {"Upgrade": "SPDY/3.1", "Connection": "Upgrade"})
    assert status == 400 and b"you must specify at least 1 of stdin, stdout, stderr" in body


def test_a_kubelet_out_of_reach_is_kubes_dial_error(tenant: Tenant) -> None:
    """kube's upgrade-aware proxy words a failed dial to the kubelet as `error dialing backend: …`."""
    tenant.running.loop.run(tenant.worker.server.stop())
    try:
        env = {**os.environ, "HOME": str(tenant.home / "1.33")}
        command = [kubectl_path("1.33"), "--kubeconfig", str(tenant.running.kubeconfig), "-n", "kube-system"]
        refused = subprocess.run(
            [*command, "port-forward", "pod/echo", ":7000"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
        assert refused.returncode == 1
        host, port = tenant.worker.host_ip, tenant.worker.server.port
        assert (
            f"error upgrading connection: error dialing backend: dial tcp {host}:{port}: connect: connection refused"
            in refused.stderr
        ), refused.stderr
    finally:
        tenant.running.loop.run(tenant.worker.server.start())


@pytest.mark.parametrize("kubectl_version", ["1.29", "1.33"])
def test_a_shell_reads_piped_lines_and_ends_with_its_exit(tenant: Tenant, kubectl_version: str) -> None:
    """kubectl 1.29 over SPDY, 1.33 over a WebSocket: each line runs in the container, none after `exit`."""
    env = {**os.environ, "HOME": str(tenant.home / kubectl_version)}
    command = [kubectl_path(kubectl_version), "--kubeconfig", str(tenant.running.kubeconfig)]
    script = "hostname\nprintenv HOSTNAME\nfoo\nexit 3\necho never\n"
    shell = subprocess.run(
        [*command, "exec", "-i", "web", "--", "sh"],
        input=script,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert shell.returncode == 3, shell.stderr
    assert shell.stdout == "web\nweb\n"
    assert "sh: 1: foo: not found" in shell.stderr and "never" not in shell.stdout


@pytest.mark.parametrize("kubectl_version", ["1.29", "1.33"])
def test_a_terminal_shell_prompts_echoes_and_exits(tenant: Tenant, kubectl_version: str) -> None:
    """`kubectl exec -it` from a real terminal (a pty): bash's prompt, the typed keys echoed (a
    backspace erases), each command's output, and `exit 4` as kubectl's exit code."""
    master, replica = pty.openpty()
    fcntl.ioctl(replica, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "HOME": str(tenant.home / kubectl_version)}
    command = [kubectl_path(kubectl_version), "--kubeconfig", str(tenant.running.kubeconfig)]
    shell = subprocess.Popen(
        [*command, "exec", "-it", "web", "--", "bash"], stdin=replica, stdout=replica, stderr=replica, env=env
    )
    os.close(replica)
    screen = b""

    def until(text: bytes) -> bytes:
        nonlocal screen
        deadline = time.monotonic() + 15
        while text not in screen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                screen += os.read(master, 65536)
        assert text in screen, screen
        return screen

    try:
        until(b"root@web:/# ")
        for key in "hostnameX\x7f\r":
            os.write(master, key.encode())
        # the X typed and erased, Enter, the command's output and the next prompt
        until(b"root@web:/# hostnameX\b \b\r\nweb\r\nroot@web:/# ")
        os.write(master, b"exit 4\r")
        assert shell.wait(15) == 4
    finally:
        if shell.poll() is None:
            shell.kill()
        os.close(master)


def test_the_python_client_drives_a_shell_through_its_stdin(tenant: Tenant) -> None:
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(tenant.running.kubeconfig)))
    try:
        shell = python_stream(
            api.connect_get_namespaced_pod_exec,
            "web",
            "default",
            command=["bash"],
            stdin=True,
            stdout=True,
            stderr=True,
            tty=False,
            _preload_content=False,
        )
        shell.write_stdin("hostname\n")
        output = ""
        deadline = time.monotonic() + 15
        while "web" not in output and time.monotonic() < deadline:
            shell.update(timeout=1)
            output += shell.read_stdout() if shell.peek_stdout() else ""
        assert output == "web\n"
        shell.write_stdin("exit 5\n")
        while shell.is_open() and time.monotonic() < deadline:
            shell.update(timeout=1)
        assert shell.returncode == 5
        shell.close()
    finally:
        api.api_client.close()
