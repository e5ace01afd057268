"""Errors from the API as Kubernetes reports them: a `Status` object with reason and code."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A non-2xx answer from the API server, carrying the decoded `Status` object."""

    def __init__(self, status: dict[str, Any]) -> None:
        self.status = status
        super().__init__(f"{self.code} {self.reason}: {self.message}")

    @property
    def reason(self) -> str:
        return str(self.status.get("reason") or "")

    @property
    def code(self) -> int:
        return int(self.status.get("code") or 0)

    @property
    def message(self) -> str:
        return str(self.status.get("message") or "")

    @classmethod
    def from_response(cls, code: int, body: bytes) -> ApiError:
        """Build from a raw response; a body that is not a Status still yields a Status-shaped error."""
        import json

        try:
            decoded = json.loads(body)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and decoded.get("kind") == "Status":
            decoded.setdefault("code", code)
            return cls(decoded)
        return cls(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": code,
                "reason": _REASONS_BY_CODE.get(code, "Unknown"),
                "message": body.decode("utf-8", "replace")[:500],
            }
        )


_REASONS_BY_CODE = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
