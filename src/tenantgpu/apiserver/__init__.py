"""A Kubernetes-compatible API server: registry, storage, watch, admission, authentication.

Public entry points:

- `APIServer(APIServerConfig(...))`: `await start()`, `await stop()`, `.url`, `.port`, `.ca_pem`,
  `admin_kubeconfig()`, `user_kubeconfig(user, groups)`, `issue_service_account_token(ns, name)`,
  `service_account_kubeconfig(ns, name)`, `await delete_storage()`.
- `SQLiteDatastore(path)`: the shared store; one per process, many servers under their own `key_prefix`.
- `ServerPKI.create(name)` / `.save(dir)` / `.load(dir)`: CA, serving certificate, service-account key.
- `kinds.KAMAJI_KINDS` for the management plane; any `Kind` can be passed in `extra_kinds`.
- `auth.SharedClientTrust`: pass one to every server of a process, so a certificate from another tenant
  gets a clean 401 instead of a failed TLS handshake.
- `hooks.Egress` (dial a tenant service, e.g. through the tunnel), `hooks.PodLogSource` (`kubectl logs`)
  and `hooks.PodExecSource` (`kubectl exec`).
- `python -m tenantgpu.apiserver --state-dir D` runs one server standalone.
"""
