"""`tenantgpu replay` end to end on a small CSV pair, and its one-line refusals of bad input."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tenantgpu.cli import main
from tenantgpu.replay.report import line_styles, plot_title

NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(f"n{i},32000,131072,4,T4\n" for i in range(4))
SHARES = (300, 500, 1000, 700)
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + "".join(
    f"p{i},{1000 + 500 * (i % 3)},2048,{1 if i % 5 else 2},{SHARES[i % 4] if i % 5 else 1000}\n"
    for i in range(30)
)


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, Path]:
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text(NODES)
    pods.write_text(PODS)
    return nodes, pods


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, ["replay", *args])


def test_replay_writes_summary_plots_and_table(trace: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(
        "--nodes",
        str(trace[0]),
        "--pods",
        str(trace[1]),
        "--seeds",
        "1-2",
        "-o",
        str(out),
        "--policy",
        "fgd",
        "--policy",
        "whole-gpu",
        "--policy",
        "random",
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seeds"] == [1, 2] and summary["tune"] == 1.3
    fgd = summary["policies"]["fgd"]
    assert list(fgd["median_unallocated_pct"]) == [str(k) for k in range(131)]
    assert fgd["median_unallocated_pct"]["0"] == 100.0
    assert set(fgd["per_seed"]) == {"1", "2"}
    assert summary["offline_bound"]["median_min_unallocated_pct"] <= fgd["median_unallocated_pct"]["100"]
    for name in ("report.html", "unallocated.png", "fragmentation.png"):
        assert (out / name).stat().st_size > 0
    assert "whole-gpu" in result.output and "GPUs saved" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--seeds", "51-42"], "bad seed range"),
        (["--seeds", "x"], "bad seed range"),
    ],
)
def test_bad_options_get_one_line_and_exit_2(trace: tuple[Path, Path], args: list[str], message: str) -> None:
    result = run("--nodes", str(trace[0]), "--pods", str(trace[1]), *args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_missing_columns_and_gpu_less_nodes_are_refused(tmp_path: Path) -> None:
    bad_pods = tmp_path / "p.csv"
    bad_pods.write_text("name,cpu_milli\np,1\n")
    nodes = tmp_path / "n.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn,1000,1,0,\n")
    result = run("--nodes", str(nodes), "--pods", str(bad_pods))
    assert result.exit_code == 2 and "no GPUs" in result.output
    nodes.write_text(NODES)
    result = run("--nodes", str(nodes), "--pods", str(bad_pods))
    assert result.exit_code == 2 and "lacks column(s) memory_mib" in result.output
    assert len(result.output.strip().splitlines()) == 1
    bad_pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1024,0,0\n")
    result = run("--nodes", str(nodes), "--pods", str(bad_pods))
    assert result.exit_code == 2 and "asks for no GPU" in result.output


def test_every_policy_of_a_full_replay_gets_its_own_line_style() -> None:
    """A replay of every policy draws more lines than matplotlib has colours; the eleventh once took
    the first one's blue, so random and hami-spread looked alike in the README's plot."""
    styles = line_styles(13)
    assert len(set(styles)) == 13
    assert styles[0] == ("C0", "-") and styles[10] == ("C0", "--")


def test_title_names_the_seeds_each_policy_ran_on_and_every_file_is_listed(
    trace: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    common = ["--nodes", str(trace[0]), "--pods", str(trace[1]), "--no-bound", "-o", str(out)]
    # hami-* run on the first seed only unless --hami-seeds says otherwise
    result = run(*common, "--seeds", "42-43", "--policy", "fgd", "--policy", "hami-binpack")
    assert result.exit_code == 0, result.output
    assert "pods: at 100 % arrived (median of 2 seeds; hami-binpack: seed 42)" in result.output
    files = ", ".join(
        str(out / name) for name in ("summary.json", "unallocated.png", "fragmentation.png", "report.html")
    )
    assert result.output.splitlines()[-1] == f"wrote {files}"
    assert (
        "Figures at 100 % arrived (median of 2 seeds; hami-binpack: seed 42)."
        in (out / "report.html").read_text()
    )
    summary = json.loads((out / "summary.json").read_text())
    assert plot_title(summary).endswith("tune 1.3, median of 2 seeds; hami-binpack: seed 42")
    result = run(*common, "--seeds", "42", "--policy", "fgd")
    assert result.exit_code == 0, result.output
    assert "pods: at 100 % arrived (seed 42)" in result.output and "of 1 seeds" not in result.output
