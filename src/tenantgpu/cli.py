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


# --- validate / demo -------------------------------------------------------------------------


# --- replay / capacity -----------------------------------------------------------------------


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
