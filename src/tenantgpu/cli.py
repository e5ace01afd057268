"""The one entry point: parses arguments and calls into the packages, nothing more."""

from __future__ import annotations

import sys

import click

from tenantgpu import __version__


class UserError(click.ClickException):
    """A mistake in the user's input: one plain line on stderr and exit code 2, never a traceback."""

    exit_code = 2

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        click.echo(f"error: {self.format_message()}", err=True, file=file)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tenantgpu")
def main() -> None:
    """tenantgpu: multi-tenant GPU sharing on Kubernetes, in a box.

    Stands up Kamaji-style hosted control planes (one isolated Kubernetes API per tenant) with
    HAMi-style fractional GPUs on simulated worker nodes, validates the wiring, and plans
    capacity on real traces. Run `tenantgpu COMMAND --help` for each command.
    """


# --- plan (gpushare what-if placement) -------------------------------------------------------


# --- lab: up / down / status / kubeconfig ----------------------------------------------------


# --- node run --------------------------------------------------------------------------------


@main.group("node")
def node_group() -> None:
    """Simulated worker nodes (like KWOK nodes, with HAMi's device plugin and a kubelet)."""


@node_group.command("run")
@click.option(
    "--kubeconfig", "kubeconfig", required=True, type=click.Path(dir_okay=False), help="API to join."
)
@click.option("--name", required=True, help="Node name.")
@click.option(
    "--gpu", "gpus", multiple=True, help="MODEL:MEMORY_MIB[:COUNT[:NUMA]], e.g. 'NVIDIA L4:23034:2'."
)
@click.option("--cpu", default="32", show_default=True, help="CPU capacity.")
@click.option("--memory", default="256Gi", show_default=True, help="Memory capacity.")
@click.option("--pods", default=110, show_default=True, help="Pod capacity.")
@click.option("--device-split-count", default=10, show_default=True, help="HAMi deviceSplitCount.")
@click.option("--label", "labels", multiple=True, help="Extra node label KEY=VALUE.")
@click.option("--host-ip", default="127.0.0.1", show_default=True, help="Address the kubelet serves logs on.")
@click.option("--kubelet-port", default=0, show_default=True, help="Kubelet HTTPS port (0 = any free one).")
def node_run(
    kubeconfig: str,
    name: str,
    gpus: tuple[str, ...],
    cpu: str,
    memory: str,
    pods: int,
    device_split_count: int,
    labels: tuple[str, ...],
    host_ip: str,
    kubelet_port: int,
) -> None:
    """Run one worker against any API server until interrupted (Ctrl-C)."""
    from pathlib import Path

    from tenantgpu.node.cli import NodeRunError, run_node

    if not Path(kubeconfig).is_file():
        raise UserError(f"kubeconfig {kubeconfig} does not exist")
    try:
        run_node(
            kubeconfig,
            name,
            list(gpus),
            cpu=cpu,
            memory=memory,
            pods=pods,
            device_split_count=device_split_count,
            labels=list(labels),
            host_ip=host_ip,
            kubelet_port=kubelet_port,
            echo=click.echo,
        )
    except NodeRunError as err:
        raise UserError(str(err)) from None


# --- validate / demo -------------------------------------------------------------------------


# --- replay / capacity -----------------------------------------------------------------------


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
