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


def _parse_seeds(text: str) -> tuple[int, ...]:
    """`42-51` (inclusive), `42` or `42,43,50`; anything else is a UserError."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                low, high = (int(x) for x in part.split("-", 1))
                if high < low:
                    raise ValueError
                seeds.extend(range(low, high + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise UserError(f"bad seed range {text!r}: use e.g. 42-51, 42 or 42,43") from None
    if not seeds or any(s < 0 for s in seeds):
        raise UserError(f"bad seed range {text!r}: use e.g. 42-51, 42 or 42,43")
    return tuple(dict.fromkeys(seeds))


def _load_trace(nodes_csv: str | None, pods_csv: str | None):  # type: ignore[no-untyped-def]
    from tenantgpu.replay.trace import TraceError, default_trace_dir, load_nodes, load_pods

    base = default_trace_dir()
    nodes_path = nodes_csv or str(base / "openb_node_list_gpu_node.csv")
    pods_path = pods_csv or str(base / "openb_pod_list_default.csv")
    try:
        return load_nodes(nodes_path), load_pods(pods_path), pods_path
    except TraceError as exc:
        raise UserError(str(exc)) from None


@main.command()
@click.option(
    "--nodes", "nodes_csv", metavar="NODES.csv", help="Node list CSV (default: the trace's GPU nodes)."
)
@click.option(
    "--pods", "pods_csv", metavar="PODS.csv", help="Pod list CSV (default: the trace's default list)."
)
@click.option(
    "--policy", "policies", multiple=True, metavar="NAME", help="Policy to run (repeatable; default all)."
)
@click.option("--seeds", default="42-51", show_default=True, help="Seeds: a range 42-51, or 42,43.")
@click.option("--tune", default=1.3, show_default=True, type=float, help="Workload size as × GPU capacity.")
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(1, 64), help="Parallel processes.")
@click.option(
    "--hami-seeds", default=None, help="Seeds for the (slower) hami-* policies; default: the first seed."
)
@click.option(
    "--device-split-count",
    default=10,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="HAMi deviceSplitCount (pods per GPU) for the hami-* policies.",
)
@click.option("--no-bound", is_flag=True, help="Skip the offline bound.")
@click.option("-o", "--outdir", default="replay-out", show_default=True, type=click.Path(file_okay=False))
def replay(
    nodes_csv: str | None,
    pods_csv: str | None,
    policies: tuple[str, ...],
    seeds: str,
    tune: float,
    jobs: int,
    hami_seeds: str | None,
    device_split_count: int,
    no_bound: bool,
    outdir: str,
) -> None:
    """Replay a GPU-sharing trace under each placement policy, the FGD paper's way.

    Every pod row becomes a pod; the list is tuned to TUNE × GPU capacity and shuffled by seed; pods
    arrive one at a time and never leave. Writes OUTDIR/summary.json, report.html and PNG plots, and
    prints per policy the unallocated GPUs at 100 % arrived and the GPUs saved against whole-gpu.
    """
    from pathlib import Path

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from tenantgpu.replay.policies import HAMI_POLICIES, policy_names
    from tenantgpu.replay.report import render_table, write_report
    from tenantgpu.replay.run import ReplayPlan, run_matrix, summarize

    seed_list = _parse_seeds(seeds)
    known = policy_names()
    unknown = [p for p in policies if p not in known]
    if unknown:
        raise UserError(f"unknown policy {unknown[0]!r}; choose from {', '.join(known)}")
    if tune <= 0:
        raise UserError(f"--tune must be positive, got {tune}")
    nodes, pods, pods_path = _load_trace(nodes_csv, pods_csv)
    chosen = tuple(dict.fromkeys(policies)) or known
    slow_seeds = _parse_seeds(hami_seeds) if hami_seeds else seed_list[:1]
    plan = ReplayPlan(
        nodes=nodes,
        pods=pods,
        tune=tune,
        seeds=seed_list,
        policies=chosen,
        trace=Path(pods_path).stem,
        seeds_for={p: slow_seeds for p in chosen if p in HAMI_POLICIES},
        device_split_count=device_split_count,
    )
    total = len(plan.runs()) + (0 if no_bound else len(seed_list))
    console = Console(stderr=True)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("replay runs", total=total)
        results, bounds = run_matrix(
            plan, jobs=jobs, on_done=lambda _name: progress.advance(task), with_bound=not no_bound
        )
    summary = summarize(plan, results, bounds)
    out = Path(outdir)
    write_report(summary, out)
    rows = render_table(summary)
    table = Table(title=f"{plan.trace}: at 100 % arrived (median of {len(seed_list)} seeds)")
    for column in rows[0]:
        table.add_column(column, justify="left" if column == "policy" else "right")
    for row in rows[1:]:
        table.add_row(*row)
    Console(width=max(Console().width, 110)).print(table)
    if "offline_bound" in summary:
        bound = summary["offline_bound"]["median_min_unallocated_pct"]  # type: ignore[index]
        click.echo(f"offline bound: no placement leaves less than {bound:.2f} % unallocated")
    click.echo(f"wrote {out / 'summary.json'}, {out / 'report.html'}, {out / 'unallocated.png'}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
