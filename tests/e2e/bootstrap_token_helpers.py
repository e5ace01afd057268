"""Bootstrap tokens as kubeadm makes them, for the end-to-end tests."""

from __future__ import annotations

import secrets
import string

import yaml


def random_text(length: int) -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(length))


def new_token() -> tuple[str, str]:
    """What `kubeadm token generate` makes: six and sixteen characters of [a-z0-9]."""
    return random_text(6), random_text(16)


def token_secret(token_id: str, token_secret: str, **data: str) -> str:
    """The Secret `kubeadm token create` writes, as a manifest (`stringData`, as a user would); keyword
    arguments are further keys with `_` for `-` (`usage_bootstrap_authentication="true"`)."""
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": {
            "token-id": token_id,
            "token-secret": token_secret,
            **{key.replace("_", "-"): value for key, value in data.items()},
        },
    }
    return yaml.safe_dump(body)
