"""Replay outputs: summary.json, PNG plots (median with the seed spread as a band) and report.html."""

from __future__ import annotations

import html
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from tenantgpu.replay.run import table_rows

PLOTS = {
    "unallocated": ("unallocated_pct", "median_unallocated_pct", "Unallocated GPU (%)"),
    "fragmentation": ("fragmentation_pct", "median_fragmentation_pct", "Fragmented GPU (%)"),
}


def line_styles(count: int) -> list[tuple[str, str]]:
    """A distinct (colour, line style) per policy: matplotlib's ten colours, then dashed, then dotted,
    so an eleventh policy (every policy with HAMi's two) does not take the first one's look."""
    colours = [f"C{i}" for i in range(10)]
    return [(colours[i % 10], ("-", "--", ":")[min(i // 10, 2)]) for i in range(count)]


def plot_curves(summary: dict, key: str, path: Path, x_from: int = 60) -> None:
    """One line per policy (median over seeds) with a min–max band over seeds, against arrived %."""
    seed_key, median_key, label = PLOTS[key]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=90)
    styles = line_styles(len(summary["policies"]))
    for (name, data), (colour, style) in zip(summary["policies"].items(), styles, strict=True):
        xs = np.array(sorted(int(k) for k in data[median_key]))
        keep = xs >= x_from
        median = np.array([data[median_key][str(x)] for x in xs])
        seeds = np.array([[run[seed_key][str(x)] for x in xs] for run in data["per_seed"].values()])
        ax.plot(xs[keep], median[keep], label=name, linewidth=1.4, color=colour, linestyle=style)
        if len(seeds) > 1:
            ax.fill_between(xs[keep], seeds.min(0)[keep], seeds.max(0)[keep], color=colour, alpha=0.15)
    bound = summary.get("offline_bound")
    if key == "unallocated" and bound:
        ax.scatter(
            [100], [bound["median_min_unallocated_pct"]], marker="*", color="black", zorder=5, label="bound"
        )
    ax.set_xlabel("Arrived GPU requests (% of capacity)")
    ax.set_ylabel(label)
    title = plot_title(summary)
    ax.set_title(title, fontsize=12 if len(title) <= 60 else 9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _seeds_phrase(seeds: tuple[int, ...]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"median of {len(seeds)} seeds"


def seeds_note(summary: dict) -> str:
    """What the 100 %-arrived figures are taken over: `seed 42` or `median of 10 seeds`, then, for policies
    that ran on other seeds (the slower hami-* ones run on the first seed only unless told), theirs."""
    groups: dict[tuple[int, ...], list[str]] = {}
    for name, data in summary["policies"].items():
        groups.setdefault(tuple(int(s) for s in data["per_seed"]), []).append(name)
    planned = tuple(summary["seeds"])
    if len(groups) <= 1:
        return _seeds_phrase(next(iter(groups), planned))
    parts = [_seeds_phrase(planned)] if planned in groups else []
    parts += [
        f"{', '.join(names)}: {_seeds_phrase(seeds)}" for seeds, names in groups.items() if seeds != planned
    ]
    return "; ".join(parts)


def plot_title(summary: dict) -> str:
    """The curves' title: the trace, its tune and the seeds, per policy where they differ (as the table's)."""
    return f"{summary['trace']} — tune {summary['tune']}, {seeds_note(summary)}"


def table_title(summary: dict) -> str:
    return f"{summary['trace']}: at 100 % arrived ({seeds_note(summary)})"


def render_table(summary: dict) -> list[list[str]]:
    """Rows of the 100 %-arrived table, as strings, header first."""
    header = [
        "policy",
        "unallocated %",
        "unallocated GPUs",
        "GPUs saved vs whole-gpu",
        "failed pods",
        "above bound",
    ]
    out = [header]
    for row in table_rows(summary):
        out.append(
            [
                row.policy,
                f"{row.unallocated_pct:.2f}",
                f"{row.unallocated_gpus:.0f}",
                "—" if row.saved_gpus is None else f"{row.saved_gpus:.0f}",
                f"{row.failed_pods:.0f}",
                "—" if row.above_bound_pct is None else f"{row.above_bound_pct:+.2f} pt",
            ]
        )
    return out


def write_report(summary: dict, outdir: Path) -> list[Path]:
    """summary.json, unallocated.png, fragmentation.png and report.html in `outdir`."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = [outdir / "summary.json"]
    written[0].write_text(json.dumps(summary, indent=1))
    for key in PLOTS:
        path = outdir / f"{key}.png"
        plot_curves(summary, key, path)
        written.append(path)
    rows = render_table(summary)
    cells = "".join(
        "<tr>"
        + "".join(f"<{'th' if i == 0 else 'td'}>{html.escape(c)}</{'th' if i == 0 else 'td'}>" for c in r)
        + "</tr>"
        for i, r in enumerate(rows)
    )
    bound = summary.get("offline_bound")
    bound_text = (
        f"<p>Offline bound at 100 % arrived (median over seeds): no placement leaves less than "
        f"{bound['median_min_unallocated_pct']:.2f} % of the GPUs unallocated.</p>"
        if bound
        else ""
    )
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>tenantgpu replay</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
td,th{{padding:.2em .8em;text-align:right}}
td:first-child{{text-align:left}}table{{border-collapse:collapse}}tr:nth-child(even){{background:#f3f3f3}}</style>
</head><body><h1>Trace replay: {html.escape(str(summary["trace"]))}</h1>
<p>{summary["nodes"]} nodes, {summary["gpus"]} GPUs; workload tuned to {summary["tune"]} × GPU capacity;
seeds {", ".join(map(str, summary["seeds"]))}. Figures at 100 % arrived ({html.escape(seeds_note(summary))}).</p>
<table>{cells}</table>{bound_text}
<h2>Unallocated GPU share</h2><img src="unallocated.png" alt="unallocated GPU % vs arrived %">
<h2>Fragmentation</h2><img src="fragmentation.png" alt="fragmentation % vs arrived %">
</body></html>"""
    page_path = outdir / "report.html"
    page_path.write_text(page)
    written.append(page_path)
    return written
