"""Subresources and virtual kinds: binding, eviction, scale, logs, token requests and reviews.

A mixin of `APIServer`: these handlers need its registry, signer and authorizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import random
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from tenantgpu.apiserver import (
    errors,
    eviction,
    podattach,
    podexec,
    podshell,
    portforward,
    proxy,
    spdy,
    upstream,
)
from tenantgpu.apiserver.auth import Attributes, UserInfo
from tenantgpu.apiserver.hooks import LogOptions, ProxyAnswer
from tenantgpu.apiserver.http1 import ChunkedStream, start_stream
from tenantgpu.apiserver.httputil import (
    SUCCESS_CREATED,
    Target,
    get_path,
    json_response,
    query_flag,
    query_int,
    set_path,
    spec_of,
)
from tenantgpu.apiserver.kinds import SCALE_PATHS, Kind
from tenantgpu.apiserver.registry import DeleteOptions, now_rfc3339
from tenantgpu.apiserver.selectors import FieldRequirement, field_requirements, format_label_selector
from tenantgpu.apiserver.ssar_protobuf import (
    decode_self_subject_access_review,
    decode_self_subject_rules_review,
)
from tenantgpu.apiserver.watchcache import Entry

if TYPE_CHECKING:
    from tenantgpu.apiserver.auth import TokenSigner
    from tenantgpu.apiserver.kinds import KindTable
    from tenantgpu.apiserver.registry import Registry
    from tenantgpu.apiserver.server import APIServerConfig

Obj = dict[str, Any]
_Streamer = TypeVar("_Streamer")


def _review_field_selector(resource: Obj) -> tuple[FieldRequirement, ...]:
    """An access review's `resourceAttributes.fieldSelector` as kube hands it to authorizers from 1.32
    (AuthorizeWithSelectors, `ResourceAttributesFrom`): its requirements if it has any (`In` and `NotIn`
    of one value; kube drops the others with an error authorizers ignore), else its parsed rawSelector."""
    selector = resource.get("fieldSelector")
    if not isinstance(selector, dict):
        return ()
    requirements = selector.get("requirements")
    if isinstance(requirements, list) and requirements:
        operators = {"In": "=", "NotIn": "!="}
        return tuple(
            (str(r.get("key") or ""), operators[r["operator"]], str(r["values"][0]))
            for r in requirements
            if isinstance(r, dict)
            and r.get("operator") in operators
            and isinstance(r.get("values"), list)
            and len(r["values"]) == 1
        )
    raw = selector.get("rawSelector")
    return field_requirements(raw) if isinstance(raw, str) else ()


class SubresourceHandlers:
    """The handlers that are not the generic get/list/watch/create/update/patch/delete of a kind."""

    # Provided by APIServer.
    config: APIServerConfig
    kinds: KindTable
    registry: Registry
    signer: TokenSigner
    _proxy_rng: random.Random  # which endpoint a service's proxy takes, as kube picks one at random

    async def _decode_body(self, request: web.Request, *, allow_protobuf: bool = False) -> Any:
        raise NotImplementedError

    def _dry_run(self, request: web.Request) -> bool:
        raise NotImplementedError

    async def _read_body(self, request: web.Request) -> bytes:
        raise NotImplementedError

    async def _create_subresource(
        self, request: web.Request, target: Target, user: UserInfo
    ) -> web.StreamResponse:
        if target.subresource in podexec.STREAMS:  # a missing pod is a 404 first
            entry = self.registry.get(target.kind, target.namespace, target.name)
            return await self._pod_stream(request, target.subresource, entry)
        body = await self._decode_body(request)
        if target.subresource == "binding":
            return await self._bind(request, target.namespace, target.name, body, user)
        if target.subresource == "eviction":
            if body is not None and not isinstance(body, dict):
                raise errors.bad_request("Eviction must be a JSON object")
            delete_options = (body or {}).get("deleteOptions")
            if delete_options is not None and not isinstance(delete_options, dict):
                raise errors.bad_request("Eviction.deleteOptions must be an object")
            options = DeleteOptions.parse(delete_options, {})
            dry_run = self._dry_run(request)
            await self._spend_disruption_budget(target, user, dry_run)
            await self.registry.delete(
                target.kind, target.namespace, target.name, options, user, dry_run=dry_run
            )
            return json_response(SUCCESS_CREATED, 201)
        if target.subresource == "token":
            return self._token_request(target, body)
        raise errors.method_not_allowed()

    async def _spend_disruption_budget(self, target: Target, user: UserInfo, dry_run: bool) -> None:
        """An eviction goes only if the pod's PodDisruptionBudget allows it, and then counts against it."""
        pod = self.registry.get(target.kind, target.namespace, target.name).obj  # 404 for a missing pod
        budgets_kind = self.kinds.resource("policy", "v1", "poddisruptionbudgets")
        if budgets_kind is None or eviction.ignores_budgets(pod):
            return
        budgets = [
            e.obj for e in self.registry.list(budgets_kind, target.namespace) if eviction.covers(e.obj, pod)
        ]
        if not budgets:
            return
        if len(budgets) > 1:
            raise errors.internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
            )

        def take_one(budget: Obj) -> Obj:
            eviction.spend(budget, pod, now_rfc3339())
            return budget

        await self.registry.modify(
            budgets_kind,
            target.namespace,
            budgets[0]["metadata"]["name"],
            take_one,
            user,
            subresource="status",
            dry_run=dry_run,
        )

    async def _bind(
        self, request: web.Request, namespace: str, name: str, body: Any, user: UserInfo
    ) -> web.Response:
        if not isinstance(body, dict):
            raise errors.bad_request("Binding must be a JSON object")
        target = body.get("target")
        node = target.get("name") if isinstance(target, dict) else None
        if not isinstance(node, str):
            node = ""
        if not name or not node:
            raise errors.invalid(
                "Binding",
                name,
                "",
                [{"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}],
            )
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        pods = self.kinds.resource("", "v1", "pods")
        assert pods is not None

        def bind(pod: Obj) -> Obj:
            spec = pod.setdefault("spec", {})
            if spec.get("nodeName"):
                raise errors.conflict(
                    "pods/binding", name, "", f'pod {name} is already assigned to node "{spec["nodeName"]}"'
                )
            if pod["metadata"].get("deletionTimestamp"):
                raise errors.conflict(
                    "pods/binding", name, "", f"pod {name} is being deleted, cannot be assigned to a host"
                )
            spec["nodeName"] = node
            if annotations:
                pod["metadata"].setdefault("annotations", {}).update(annotations)
            status = pod.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": now_rfc3339(),
                }
            )
            status["conditions"] = conditions
            return pod

        # Binding writes spec and status together, so it bypasses the status/spec split of updates.
        await self.registry.modify(
            pods, namespace, name, bind, user, subresource="binding", dry_run=self._dry_run(request)
        )
        return json_response(SUCCESS_CREATED, 201)

    def _token_request(self, target: Target, body: Any) -> web.Response:
        account = self.registry.get(target.kind, target.namespace, target.name)
        spec = spec_of(body, "TokenRequest")
        seconds = spec.get("expirationSeconds") or 3600
        audiences = spec.get("audiences") or None
        if not isinstance(seconds, int) or seconds < 600:
            raise errors.invalid(
                "TokenRequest",
                target.name,
                "authentication.k8s.io",
                [
                    {
                        "reason": "FieldValueInvalid",
                        "message": "Invalid value: may not specify a duration less than 10 minutes",
                        "field": "spec.expirationSeconds",
                    }
                ],
            )
        if audiences is not None and not (
            isinstance(audiences, list) and all(isinstance(a, str) for a in audiences)
        ):
            raise errors.bad_request("TokenRequest.spec.audiences must be a list of strings")
        token = self.signer.issue(
            target.namespace,
            target.name,
            account.obj["metadata"].get("uid", ""),
            expiration_seconds=seconds,
            **({"audiences": audiences} if audiences else {}),
        )
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
        result = {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": target.name, "namespace": target.namespace, "creationTimestamp": None},
            "spec": {
                "audiences": audiences or [],
                "expirationSeconds": seconds,
                "boundObjectRef": spec.get("boundObjectRef"),
            },
            "status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")},
        }
        return json_response(result, 201)

    async def _self_subject_access_review(self, request: web.Request, user: UserInfo) -> web.Response:
        """`kubectl auth can-i`: whether the caller may do what the spec names."""
        body = await self._decode_body(request, allow_protobuf=True)
        if isinstance(body, bytes):
            try:
                body = decode_self_subject_access_review(body)
            except Exception as exc:  # any malformed protobuf is the client's mistake
                raise errors.bad_request(f"unable to decode SelfSubjectAccessReview: {exc}") from exc
        spec = _review_spec(body, "SelfSubjectAccessReview")
        causes = _attribute_causes(spec) + _empty_meta_causes(body, "must be empty")
        if causes:
            raise errors.invalid("SelfSubjectAccessReview", "", "authorization.k8s.io", causes)
        return json_response(self._access_review("SelfSubjectAccessReview", {}, spec, user), 201)

    async def _subject_access_review(self, request: web.Request, kind: Kind, namespace: str) -> web.Response:
        """SubjectAccessReview (cluster-wide) and LocalSubjectAccessReview (in one namespace): whether the
        user the spec names may do what it names, as kube's review storage answers it."""
        body = await self._decode_body(request)
        spec = _review_spec(body, kind.kind)
        causes = _attribute_causes(spec)
        if not spec.get("user") and not spec.get("groups"):
            causes.append(
                _cause(
                    "spec.user",
                    json.dumps(spec.get("user") or ""),
                    "at least one of user or group must be specified",
                )
            )
        meta = dict(body.get("metadata") or {})
        local = kind.kind == "LocalSubjectAccessReview"
        if local:
            meta_namespace = meta.pop("namespace", "") or ""
            causes += _empty_meta_causes({"metadata": meta}, "must be empty except for namespace")
            resource = spec.get("resourceAttributes")
            if isinstance(resource, dict) and (resource.get("namespace") or "") != meta_namespace:
                shown = json.dumps(resource.get("namespace") or "")
                causes.append(
                    _cause("spec.resourceAttributes.namespace", shown, "must match metadata.namespace")
                )
            if spec.get("nonResourceAttributes") is not None:
                shown = json.dumps(spec["nonResourceAttributes"], separators=(",", ":"))
                causes.append(
                    _cause("spec.nonResourceAttributes", shown, "disallowed on this kind of request")
                )
        else:
            causes += _empty_meta_causes(body, "must be empty")
        if causes:
            raise errors.invalid(kind.kind, "", "authorization.k8s.io", causes)
        if local:
            if not namespace:
                raise errors.bad_request(f"namespace is required on this type: {namespace}")
            if namespace != meta_namespace:
                raise errors.bad_request(
                    f"spec.resourceAttributes.namespace must match namespace: {namespace}"
                )
        groups = spec.get("groups") or []
        subject = UserInfo(
            str(spec.get("user") or ""),
            tuple(g for g in groups if isinstance(g, str)),
            str(spec.get("uid") or ""),
        )
        metadata = {"namespace": namespace} if local else {}
        return json_response(self._access_review(kind.kind, metadata, spec, subject), 201)

    def _access_review(self, kind: str, metadata: Obj, spec: Obj, user: UserInfo) -> Obj:
        resource = spec.get("resourceAttributes")
        if isinstance(resource, dict):
            attributes = Attributes(
                str(resource.get("verb") or ""),
                str(resource.get("group") or ""),
                str(resource.get("resource") or ""),
                str(resource.get("subresource") or ""),
                str(resource.get("namespace") or ""),
                str(resource.get("name") or ""),
                field_selector=_review_field_selector(resource) if self.registry.minor >= 32 else (),
            )
        else:
            non_resource = spec.get("nonResourceAttributes") or {}
            attributes = Attributes(
                str(non_resource.get("verb") or ""), path=str(non_resource.get("path") or "")
            )
        allowed, reason = self.config.authorizer.authorize(user, attributes)
        status: Obj = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return {
            "kind": kind,
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {**metadata, "creationTimestamp": None},
            "spec": spec,
            "status": status,
        }

    async def _self_subject_review(self, request: web.Request, user: UserInfo, kind: Kind) -> web.Response:
        """`kubectl auth whoami`: the caller as this server sees it (the body carries nothing else)."""
        await self._read_body(request)
        result = {
            "kind": "SelfSubjectReview",
            "apiVersion": kind.api_version,
            "metadata": {"creationTimestamp": None},
            "status": {"userInfo": user.as_dict()},
        }
        return json_response(result, 201)

    async def _self_subject_rules_review(self, request: web.Request, user: UserInfo) -> web.Response:
        """`kubectl auth can-i --list`: what the caller may do in the namespace the spec names (kube's
        answer carries an empty spec)."""
        body = await self._decode_body(request, allow_protobuf=True)
        if isinstance(body, bytes):  # kubectl sends it in protobuf
            try:
                body = decode_self_subject_rules_review(body)
            except Exception as exc:  # any malformed protobuf is the client's mistake
                raise errors.bad_request(f"unable to decode SelfSubjectRulesReview: {exc}") from exc
        spec = _review_spec(body, "SelfSubjectRulesReview")
        namespace = spec.get("namespace")
        if not isinstance(namespace, str) or not namespace:
            raise errors.bad_request("no namespace on request")
        result = {
            "kind": "SelfSubjectRulesReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": {},
            "status": self.config.authorizer.rules(user, namespace),
        }
        return json_response(result, 201)

    async def _token_review(self, request: web.Request) -> web.Response:
        body = await self._decode_body(request)
        spec = spec_of(body, "TokenReview")
        user = self.signer.verify(str(spec.get("token", "")))
        status: Obj = {"authenticated": user is not None}
        if user is not None:
            status["user"] = user.as_dict()
            status["audiences"] = spec.get("audiences") or ["https://kubernetes.default.svc.cluster.local"]
        else:
            status["error"] = "invalid bearer token"
        result = {
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
        return json_response(result, 201)

    def _scale_of(self, kind: Kind, obj: Obj) -> Obj:
        spec_path, status_path, selector_path = SCALE_PATHS[kind.kind]
        meta = obj["metadata"]
        status: Obj = {"replicas": get_path(obj, status_path) or 0}
        selector = get_path(obj, selector_path)
        if isinstance(selector, dict):
            selector = format_label_selector(selector)
        if selector:
            status["selector"] = selector
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace", ""),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
                "creationTimestamp": meta.get("creationTimestamp"),
            },
            "spec": {"replicas": get_path(obj, spec_path) or 0},
            "status": status,
        }

    async def _update_scale(
        self, target: Target, change: Any, user: UserInfo, dry_run: bool, manager: str | None = None
    ) -> web.Response:
        kind = target.kind
        spec_path = SCALE_PATHS[kind.kind][0]
        new_scale: list[Obj] = []

        def rescale(obj: Obj) -> Obj:
            scale = change(self._scale_of(kind, obj))
            if not isinstance(scale, dict):
                raise errors.bad_request("Scale must be a JSON object")
            replicas = (scale.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise errors.invalid(
                    "Scale",
                    target.name,
                    "autoscaling",
                    [
                        {
                            "reason": "FieldValueInvalid",
                            "message": "must be greater than or equal to 0",
                            "field": "spec.replicas",
                        }
                    ],
                )
            set_path(obj, spec_path, replicas)
            new_scale.append(scale)
            return obj

        entry = await self.registry.modify(
            kind,
            target.namespace,
            target.name,
            rescale,
            user,
            dry_run=dry_run,
            manager=manager,
            manager_subresource="scale",
        )
        return json_response(self._scale_of(kind, entry.obj))

    async def _pod_stream(self, request: web.Request, subresource: str, entry: Entry) -> web.StreamResponse:
        """`pods/exec`, `pods/attach`, `pods/portforward`, asked with GET or POST as clients do."""
        if subresource == "portforward":
            return await self._pod_port_forward(request, entry)
        if subresource == "attach":
            return await self._pod_attach(request, entry)
        return await self._pod_exec(request, entry)

    async def _pod_attach(self, request: web.Request, entry: Entry) -> web.StreamResponse:
        """`kubectl attach`: what the container's process writes from now on (`podattach`), from its
        kubelet through the tunnel."""
        pod = entry.obj
        options = podexec.ExecOptions.parse(request.query, pod, attach=True)
        source = self.config.log_source
        if source is None:
            raise errors.bad_request(
                f"pod {pod['metadata']['name']}: attach is not served by this API server"
            )
        stream_output = _by_protocol(request, podattach.stream_websocket, podattach.stream_spdy)
        log = source.stream(pod, LogOptions(options.container, follow=True, tail_lines=0))
        first = await anext(log, b"")  # the kubelet's refusal comes before the switch of protocols

        async def output() -> AsyncIterator[bytes]:
            yield first
            async for chunk in log:
                yield chunk

        return await stream_output(request, options, output())

    async def _pod_port_forward(self, request: web.Request, entry: Entry) -> web.StreamResponse:
        """`kubectl port-forward`: through the tunnel to the pod's kubelet (`portforward`)."""
        pod = entry.obj
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        if not node_name:
            raise errors.bad_request(f"pod {pod['metadata']['name']} does not have a host assigned")
        nodes = self.kinds.resource("", "v1", "nodes")
        assert nodes is not None
        node = self.registry.get(nodes, "", node_name).obj  # 404 when the node is gone
        source = self.config.node_proxy
        if source is None:
            raise proxy.unreachable(
                f"pod {pod['metadata']['name']}: port forwarding is not served by this API server"
            )
        if not isinstance(request, web.BaseRequest):
            raise errors.bad_request("Upgrade request required")
        return await portforward.forward(request, pod, node, source, self.registry.minor)

    async def _pod_exec(self, request: web.Request, entry: Entry) -> web.StreamResponse:
        """`kubectl exec`: the command runs on the pod's kubelet (through the tunnel), its output is
        streamed back over the channel protocol, on a WebSocket or SPDY/3.1."""
        pod = entry.obj
        options = podexec.ExecOptions.parse(request.query, pod)
        source = self.config.exec_source
        if source is None:
            raise errors.bad_request(f"pod {pod['metadata']['name']}: exec is not served by this API server")
        if podshell.is_session(options.command, options.stdin):
            serve = _by_protocol(request, podshell.serve_websocket, podshell.serve_spdy)
            # a container that does not run is refused before the switch of protocols, as for a command
            await source.exec(pod, options.container, [options.command[0], "-c", "true"])

            async def run_line(words: list[str]) -> Any:
                return await source.exec(pod, options.container, words)

            return await serve(request, options, pod["metadata"]["name"], run_line)
        stream_result = _by_protocol(request, podexec.stream_result, spdy.stream_result)
        result = await source.exec(pod, options.container, options.command)
        return await stream_result(request, options, result)

    async def _proxy(self, request: web.Request, target: Target) -> web.Response:
        """`nodes/<node>/proxy`, `pods/<pod>/proxy` and `services/<service>/proxy`: one request passed on."""
        plural = target.kind.plural
        wanted = proxy.proxy_request(plural, target.name, request.path, request.query_string)
        entry = self.registry.get(target.kind, target.namespace, wanted.name)
        body = await self._read_body(request) if request.method in ("POST", "PUT", "PATCH") else b""
        content_type = request.headers.get("Content-Type")
        if plural == "nodes":
            return await self._to_kubelet(entry.obj, wanted, request.method, body, content_type)
        if plural == "pods":
            location = proxy.pod_location(entry.obj, wanted)
        else:
            endpoints_kind = self.kinds.resource("", "v1", "endpoints")
            assert endpoints_kind is not None
            endpoints = self.registry.get_object(endpoints_kind, target.namespace, wanted.name)
            location = proxy.service_location(entry.obj, endpoints, wanted, self._proxy_rng)
        tls = upstream.insecure_context() if location.scheme == "https" else None
        try:
            answer = await upstream.exchange(
                self.config.egress,
                location.host,
                location.port,
                request.method,
                wanted.path,
                tls=tls,
                body=body,
                content_type=content_type,
            )
        except (OSError, asyncio.IncompleteReadError) as err:
            raise proxy.unreachable(str(err) or type(err).__name__) from err
        return _proxied(answer)

    async def _to_kubelet(
        self, node: Obj, wanted: proxy.ProxyRequest, method: str, body: bytes, content_type: str | None
    ) -> web.Response:
        host, kubelet_port = proxy.kubelet_endpoint(node)
        if wanted.port not in ("", str(kubelet_port)):
            # kube proxies another port of a node only to an address it may reach; the simulated nodes'
            # addresses are all loopback ones
            raise errors.bad_request("address not allowed")
        source = self.config.node_proxy
        if source is None:
            raise proxy.unreachable(f"dial tcp {host}:{kubelet_port}: connect: connection refused")
        try:
            answer = await source.proxy(node, method, wanted.path, body, content_type)
        except OSError as err:
            raise proxy.unreachable(
                str(err) or f"dial tcp {host}:{kubelet_port}: {type(err).__name__}"
            ) from err
        return _proxied(answer)

    async def _pod_log(self, request: web.Request, entry: Entry) -> web.StreamResponse | ChunkedStream:
        pod = entry.obj
        name = pod["metadata"]["name"]
        containers = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
        container = request.query.get("container", "")
        if not container:
            if len(containers) != 1:
                raise errors.bad_request(
                    f"a container name must be specified for pod {name}, "
                    f"choose one of: [{' '.join(containers)}]"
                )
            container = containers[0]
        if not podexec.has_container(pod, container):
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            # kube's LogLocation has no kubelet to ask before the pod is bound: an empty 204, which
            # `kubectl logs` prints as nothing and exits 0.
            return web.Response(status=204)
        source = self.config.log_source
        if source is None:
            raise errors.bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        options = LogOptions(
            container,
            query_flag(request.query, "follow"),
            query_flag(request.query, "previous"),
            query_int(request.query, "tailLines"),
            query_flag(request.query, "timestamps"),
            query_int(request.query, "sinceSeconds"),
            query_int(request.query, "limitBytes"),
        )
        stream = source.stream(pod, options)
        first = await anext(stream, b"")  # errors before any byte become a Status
        response = await start_stream(request, 200, {"Content-Type": "text/plain"})
        with contextlib.suppress(ConnectionError):
            await response.write(first)
            async for chunk in stream:
                await response.write(chunk)
            await response.write_eof()
        return response


def _by_protocol(request: web.Request, websocket: _Streamer, spdy_streams: _Streamer) -> _Streamer:
    """Which of a streaming subresource's two servers answers the request: the WebSocket one or the
    SPDY/3.1 one, by the protocol it asks to switch to."""
    # A switch of protocols reaches aiohttp (see `http1`); a plain request cannot stream.
    upgraded = isinstance(request, web.BaseRequest)
    if upgraded and podexec.wants_websocket(request):
        return websocket
    if upgraded and spdy.wants_spdy(request):
        return spdy_streams
    raise errors.bad_request("Upgrade request required")


def _review_spec(body: Any, kind: str) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request(f"{kind} must be an object")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise errors.bad_request(f"{kind}.spec must be an object")
    return spec


def _cause(field: str, shown: str, message: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {shown}: {message}", "field": field}


def _attribute_causes(spec: Obj) -> list[dict[str, str]]:
    """kube's checks of an access review's spec: exactly one of the two kinds of attributes."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        shown = json.dumps(non_resource, separators=(",", ":"))
        return [
            _cause(
                "spec.nonResourceAttributes",
                shown,
                "cannot be specified in combination with resourceAttributes",
            )
        ]
    if resource is None and non_resource is None:
        return [
            _cause(
                "spec.resourceAttributes",
                "null",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
        ]
    return []


def _empty_meta_causes(body: Obj, message: str) -> list[dict[str, str]]:
    meta = {
        k: v
        for k, v in (body.get("metadata") or {}).items()
        if k not in ("managedFields", "creationTimestamp") and v
    }
    if meta:
        return [_cause("metadata", json.dumps(meta, separators=(",", ":")), message)]
    return []


def _proxied(answer: ProxyAnswer) -> web.Response:
    response = web.Response(status=answer.status, body=answer.body)
    if answer.content_type:
        response.headers["Content-Type"] = answer.content_type
    return response
