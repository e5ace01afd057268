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

_VALIDATE_EXAMPLES = """
\b
Examples:
  tenantgpu validate                                  # the lab in ./.tenantgpu
  tenantgpu validate --state-dir /tmp/lab -o json
  tenantgpu validate --kubeconfig team-a=a.kubeconfig --kubeconfig team-b=b.kubeconfig \\
      --management-kubeconfig kind.kubeconfig -o junit --junit-file validate.xml
"""


@main.command(epilog=_VALIDATE_EXAMPLES)
@click.option(
    "--state-dir", type=click.Path(file_okay=False), help="A lab's state directory [default: .tenantgpu]."
)
@click.option(
    "--kubeconfig",
    "kubeconfigs",
    multiple=True,
    metavar="TENANT=PATH",
    help="A tenant's kubeconfig (repeat per tenant); instead of --state-dir, e.g. for a real cluster.",
)
@click.option("--management-kubeconfig", metavar="PATH", help="The management cluster (Kamaji) kubeconfig.")
@click.option(
    "--lab", "lab_file", metavar="FILE", help="Lab spec declaring the GPUs [default: the state dir's]."
)
@click.option(
    "--only", multiple=True, metavar="NAME", help="Run only these checks (repeat, or comma-separate)."
)
@click.option(
    "-o", "--output", type=click.Choice(["table", "json", "junit"]), default="table", show_default=True
)
@click.option("--junit-file", type=click.Path(dir_okay=False), help="Also write JUnit XML here (for CI).")
@click.option(
    "--timeout", type=click.FloatRange(1, 600), default=25.0, show_default=True, help="Seconds per wait."
)
@click.option("--list", "list_checks", is_flag=True, help="List the checks with what each needs, and exit.")
def validate(
    state_dir: str | None,
    kubeconfigs: tuple[str, ...],
    management_kubeconfig: str | None,
    lab_file: str | None,
    only: tuple[str, ...],
    output: str,
    junit_file: str | None,
    timeout: float,
    list_checks: bool,
) -> None:
    """Prove the wiring, fractional GPU sharing and tenant isolation of a lab or a real cluster.

    Talks to the clusters only through their kubeconfigs, so the same run works against a real
    kind + Kamaji + HAMi setup. Exit code 0 only if no check failed.
    """
    from tenantgpu.validate import cli_support

    if list_checks:
        cli_support.print_check_list()
        return
    from tenantgpu.lab.spec import LabSpecError, load_lab

    try:
        paths = cli_support.resolve_targets(state_dir, list(kubeconfigs), management_kubeconfig)
        lab_path = lab_file or paths.lab_file
        lab = load_lab(lab_path) if lab_path else None
        run = cli_support.prepare(paths, lab=lab, only=list(only), timeout=timeout)
    except (cli_support.BadInput, LabSpecError) as exc:
        raise UserError(str(exc)) from None
    failed = cli_support.execute(run, output=output, junit_file=junit_file)
    sys.exit(1 if failed else 0)


@main.command()
@click.option("-f", "--file", "lab_file", metavar="LAB.yaml", help="Lab spec [default: the seed lab].")
@click.option("--keep", is_flag=True, help="Keep the lab running afterwards and print how to reach it.")
def demo(lab_file: str | None, keep: bool) -> None:
    """Bring the seed lab up in a temporary state dir, validate it, report GPU sharing, take it down.

    Exit code 0 only if every check passed.
    """
    from tenantgpu.validate import demo as demo_flow

    try:
        ok = demo_flow.run_demo(lab_file, keep=keep)
    except demo_flow.DemoInputError as exc:
        raise UserError(str(exc)) from None
    sys.exit(0 if ok else 1)


# --- replay / capacity -----------------------------------------------------------------------


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
