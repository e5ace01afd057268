"""A Kubernetes-compatible API server: registry, storage, watch, admission, authentication."""
