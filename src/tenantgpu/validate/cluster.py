"""One cluster as the checks see it: JSON objects in and out over the official `kubernetes` client."""

from __future__ import annotations

import copy
import hashlib
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

JSON = dict[str, Any]

# Short bounds: a check must fail with what it saw, not hang on a dead endpoint.
_TIMEOUT = (3.0, 20.0)  # read: an API server may wait up to a webhook's 10 s timeout


class ApiError(Exception):
    """The API server answered with an error `Status` (or at least an HTTP error code)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


class Unreachable(Exception):
    """No HTTP answer at all: refused connection, TLS failure, timeout."""


class Cluster(Protocol):
    """What a check may do with one cluster; `KubeCluster` is the real one, tests use a small fake."""

    name: str
    kubeconfig: str

    def server(self) -> str: ...
    def ca_fingerprint(self) -> str | None: ...
    def version(self) -> JSON: ...
    def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[JSON]: ...
    def get(self, kind: str, name: str, namespace: str | None = None) -> JSON | None: ...
    def create(self, kind: str, body: JSON, namespace: str | None = None) -> JSON: ...
    def patch(self, kind: str, name: str, body: JSON, namespace: str | None = None) -> JSON: ...
    def delete(self, kind: str, name: str, namespace: str | None = None) -> None: ...
    def pod_log(self, name: str, namespace: str) -> str: ...
    def with_credentials_against(self, other: Cluster) -> Cluster: ...


@dataclass(frozen=True)
class _Kind:
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None, name: str | None = None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


KINDS: dict[str, _Kind] = {
    "Namespace": _Kind("", "v1", "namespaces", False),
    "Node": _Kind("", "v1", "nodes", False),
    "Pod": _Kind("", "v1", "pods", True),
    "Event": _Kind("", "v1", "events", True),
    "ConfigMap": _Kind("", "v1", "configmaps", True),
    "ResourceQuota": _Kind("", "v1", "resourcequotas", True),
    "MutatingWebhookConfiguration": _Kind(
        "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", False
    ),
    "TenantControlPlane": _Kind("kamaji.clastix.io", "v1alpha1", "tenantcontrolplanes", True),
}


class KubeCluster:
    """A cluster reached through a kubeconfig file with the official client; every call returns raw JSON."""

    def __init__(self, name: str, kubeconfig: str | Path, *, _config: JSON | None = None) -> None:
        self.name = name
        self.kubeconfig = str(kubeconfig)
        if _config is None:
            try:
                _config = yaml.safe_load(Path(kubeconfig).read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as exc:
                raise ValueError(f"{kubeconfig}: cannot read the kubeconfig: {exc}") from exc
            if not isinstance(_config, dict) or not _config.get("clusters"):
                raise ValueError(f"{kubeconfig}: not a kubeconfig (no clusters)")
        self._config = _config
        configuration = k8s.Configuration()
        try:
            k8s_config.load_kube_config_from_dict(
                _config, client_configuration=configuration, persist_config=False
            )
        except Exception as exc:  # the loader raises several unrelated types for a bad file
            raise ValueError(f"{kubeconfig}: cannot use the kubeconfig: {exc}") from exc
        configuration.retries = False  # a refused connection is an answer; do not retry it three times
        self._configuration = configuration
        self._api = k8s.ApiClient(configuration)

    # -- identity ----------------------------------------------------------------------------------

    def server(self) -> str:
        return str(self._configuration.host)

    def ca_fingerprint(self) -> str | None:
        """SHA-256 of the CA bundle the kubeconfig trusts (None when it relies on the system store)."""
        path = self._configuration.ssl_ca_cert
        if not path:
            return None
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()

    def with_credentials_against(self, other: Cluster) -> KubeCluster:
        """This cluster's user credentials aimed at `other`'s endpoint, trusting `other`'s CA."""
        if not isinstance(other, KubeCluster):
            raise TypeError("both clusters must be KubeCluster")
        mine = _current(self._config)
        theirs = _current(other._config)
        config = copy.deepcopy(self._config)
        for entry in config["clusters"]:
            if entry["name"] == mine["cluster"]["_name"]:
                entry["cluster"] = copy.deepcopy(theirs["cluster"]["cluster"])
        return KubeCluster(f"{self.name}-credentials@{other.name}", self.kubeconfig, _config=config)

    # -- reads and writes --------------------------------------------------------------------------

    def version(self) -> JSON:
        return self._call("GET", "/version")

    def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[JSON]:
        query = [("labelSelector", label_selector)] if label_selector else []
        return list(self._call("GET", KINDS[kind].path(namespace), query=query).get("items") or [])

    def get(self, kind: str, name: str, namespace: str | None = None) -> JSON | None:
        try:
            return self._call("GET", KINDS[kind].path(namespace, name))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def create(self, kind: str, body: JSON, namespace: str | None = None) -> JSON:
        return self._call("POST", KINDS[kind].path(namespace), body=body)

    def patch(self, kind: str, name: str, body: JSON, namespace: str | None = None) -> JSON:
        return self._call(
            "PATCH",
            KINDS[kind].path(namespace, name),
            body=body,
            content_type="application/merge-patch+json",
        )

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        try:
            self._call(
                "DELETE",
                KINDS[kind].path(namespace, name),
                body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
            )
        except ApiError as exc:
            if exc.code != 404:
                raise

    def pod_log(self, name: str, namespace: str) -> str:
        return self._call_text("GET", KINDS["Pod"].path(namespace, name) + "/log")

    # -- the wire ----------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: JSON | None = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
    ) -> JSON:
        text = self._call_text(method, path, body=body, query=query, content_type=content_type)
        try:
            return json.loads(text) if text else {}
        except json.JSONDecodeError as exc:
            raise ApiError(
                0, "InvalidResponse", f"{method} {path} answered non-JSON: {text[:200]!r}"
            ) from exc

    def _call_text(
        self,
        method: str,
        path: str,
        *,
        body: JSON | None = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
    ) -> str:
        headers = {"Accept": "application/json, */*", "Content-Type": content_type}
        try:
            status, data = self._request(method, path, query or [], headers, body)
        except ApiException as exc:
            raise _api_error(int(exc.status or 0), exc.reason or "", exc.body) from None
        except (urllib3.exceptions.HTTPError, ssl.SSLError, OSError) as exc:
            raise Unreachable(f"{self.server()}: {_root_cause(exc)}") from None
        if status >= 400:
            raise _api_error(status, "", data)
        return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")

    def _request(
        self, method: str, path: str, query: list[tuple[str, str]], headers: dict[str, str], body: JSON | None
    ) -> tuple[int, bytes]:
        api = self._api
        if hasattr(api, "param_serialize"):  # kubernetes >= 35: serialise, then send; errors are not raised
            method, url, headers, body, post = api.param_serialize(
                method=method,
                resource_path=path,
                query_params=query,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response = api.call_api(
                method, url, header_params=headers, body=body, post_params=post, _request_timeout=_TIMEOUT
            )
            return int(response.status), response.read()
        raw = api.call_api(  # older clients: one call that raises ApiException for error codes
            path,
            method,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=_TIMEOUT,
        )
        response = raw[0] if isinstance(raw, tuple) else raw
        return int(response.status), response.data


def _api_error(code: int, reason: str, body: bytes | str | None) -> ApiError:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    message = reason
    try:
        status = json.loads(text)
        message = status.get("message") or message
        reason = status.get("reason") or reason
    except (json.JSONDecodeError, AttributeError):
        if text:
            message = text.strip()[:300]
    return ApiError(code, reason or "Error", message)


def _root_cause(exc: BaseException) -> str:
    """The innermost error urllib3 wrapped, which is the one that names the real problem."""
    seen = exc
    for _ in range(6):
        inner = getattr(seen, "reason", None)
        if not isinstance(inner, BaseException):
            break
        seen = inner
    text = str(seen)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            "TLS: the server's certificate is not signed by the kubeconfig's CA (certificate verify failed)"
        )
    return text or type(seen).__name__


def _current(config: JSON) -> JSON:
    """The current context's cluster entry (with its name)."""
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    name = config.get("current-context") or next(iter(contexts), None)
    context = contexts.get(name) if name else None
    cluster_name = context["cluster"] if context else config["clusters"][0]["name"]
    for entry in config["clusters"]:
        if entry["name"] == cluster_name:
            return {"cluster": {"_name": entry["name"], "cluster": entry["cluster"]}}
    raise ValueError(f"kubeconfig has no cluster named {cluster_name!r}")
