"""tenantgpu: a lab in a box for multi-tenant GPU sharing on Kubernetes."""

__version__ = "0.1.0"
