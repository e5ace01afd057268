"""The lab spec: defaults, the seed lab, examples, stable GPU UUIDs, and errors that name field and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantgpu.lab.spec import LabSpecError, derive_gpu_uuid, load_lab, parse_lab, seed_lab

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_seed_lab_is_the_articles_lab() -> None:
    lab = seed_lab()
    assert [t.name for t in lab.tenants] == ["tenant-a", "tenant-b"]
    a_gpus = lab.tenant("tenant-a").workers[0].devices()
    b_gpus = lab.tenant("tenant-b").workers[0].devices()
    assert [(g.type, g.memory, g.index) for g in a_gpus] == [("NVIDIA A100-SXM4-80GB", 81920, 0)]
    assert [(g.type, g.memory, g.index) for g in b_gpus] == [("NVIDIA L4", 23034, 0), ("NVIDIA L4", 23034, 1)]
    assert lab.spec.datastore.driver == "sqlite"
    assert lab.sharing.device_split_count == 10
    assert lab.sharing.node_policy == "binpack" and lab.sharing.gpu_policy == "spread"


def test_no_file_means_the_seed_lab() -> None:
    assert load_lab(None) == seed_lab()


def test_seed_example_file_matches_builtin_seed() -> None:
    assert load_lab(EXAMPLES / "seed-lab.yaml") == seed_lab()


@pytest.mark.parametrize("name", ["three-tenants.yaml", "dense-sharing.yaml"])
def test_examples_are_valid(name: str) -> None:
    lab = load_lab(EXAMPLES / name)
    assert lab.tenants
    assert all(w.devices() for t in lab.tenants for w in t.workers)


def test_three_tenant_example_has_quotas_and_mixed_models() -> None:
    lab = load_lab(EXAMPLES / "three-tenants.yaml")
    models = {g.type for t in lab.tenants for w in t.workers for g in w.devices()}
    assert {"Tesla T4", "NVIDIA A10", "NVIDIA H100 80GB HBM3"} <= models
    assert lab.tenant("inference").quotas[0].gpumem == 30000
    h100 = lab.tenant("training").workers[0].devices()
    assert [g.numa for g in h100] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [g.index for g in h100] == list(range(8))


def test_gpu_uuids_are_stable_and_distinct() -> None:
    first = [g.uuid for g in seed_lab().tenant("tenant-b").workers[0].devices()]
    again = [g.uuid for g in seed_lab().tenant("tenant-b").workers[0].devices()]
    assert first == again
    assert len(set(first)) == 2
    assert first[0] == derive_gpu_uuid("worker-b1", 0)
    assert first[0].startswith("GPU-") and len(first[0]) == len("GPU-") + 36


def test_explicit_uuids_are_kept() -> None:
    lab = load_lab(EXAMPLES / "three-tenants.yaml")
    assert lab.tenant("research").workers[0].devices()[0].uuid == "GPU-0b5c0d8e-9d0e-4a6b-8f27-6e2a4c1b9a01"


def test_hami_settings_reach_the_sharing_config() -> None:
    lab = load_lab(EXAMPLES / "dense-sharing.yaml")
    cfg = lab.sharing
    assert (cfg.device_split_count, cfg.default_memory, cfg.default_cores) == (20, 2048, 5)
    assert (cfg.node_policy, cfg.gpu_policy) == ("spread", "binpack")


def test_runtime_class_settings_are_the_charts() -> None:
    """`runtimeClassName` reaches HAMi's webhook config; workers get runc, and nvidia where they have GPUs,
    unless the spec lists their handlers."""
    lab = parse_lab(
        "kind: Lab\nspec:\n  hami: {runtimeClassName: nvidia, createRuntimeClass: true}\n  tenants:\n"
        "    - name: a\n      workers:\n        - {name: cpu}\n"
        "        - {name: gpu, gpus: [{type: NVIDIA L4, memory: 23034}], runtimeHandlers: [runc, kata]}\n",
        source="f.yaml",
    )
    assert lab.sharing.runtime_class_name == "nvidia"
    assert [w.runtime_handlers for w in lab.tenant("a").workers] == [None, ["runc", "kata"]]
    assert seed_lab().sharing.runtime_class_name == ""


BAD_MEMORY = """\
apiVersion: tenantgpu.io/v1alpha1
kind: Lab
spec:
  tenants:
    - name: tenant-a
      workers:
        - name: w1
          gpus:
            - type: NVIDIA L4
              memory: -5
"""


def test_error_names_field_and_line() -> None:
    with pytest.raises(LabSpecError) as info:
        parse_lab(BAD_MEMORY, source="lab.yaml")
    message = str(info.value)
    assert message.startswith("lab.yaml:10: spec.tenants[0].workers[0].gpus[0].memory:")
    assert "greater than 0" in message


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ("kind: Lab\nspec:\n  tenants:\n    - name: Tenant_A\n", 4, "spec.tenants[0].name", "DNS label"),
        ("kind: Lab\nspec:\n  tenants: []\n", 3, "spec.tenants", "at least 1"),
        ("kind: Lab\nspec:\n  tenantz: []\n", 3, "spec.tenantz", "Extra inputs"),
        (
            "kind: Lab\nspec:\n  hami:\n    gpuSchedulerPolicy: tightest\n  tenants: [{name: a}]\n",
            4,
            "spec.hami.gpuSchedulerPolicy",
            "'spread'",
        ),
        (
            "kind: Lab\nspec:\n  kubernetesVersion: v1.20.0\n  tenants: [{name: a}]\n",
            3,
            "spec.kubernetesVersion",
            "27",
        ),
        (
            "kind: Lab\nspec:\n  tenants:\n    - name: a\n      workers: [{name: w, cpu: lots}]\n",
            5,
            "spec.tenants[0].workers[0].cpu",
            "quantity",
        ),
        (
            "kind: Lab\nspec:\n  tenants:\n    - name: a\n      workers: [{name: w}]\n    - name: b\n"
            "      workers: [{name: w}]\n",
            2,
            "spec",
            "worker 'w' appears more than once",
        ),
        (
            "kind: Lab\nspec:\n  tenants:\n    - name: a\n      workers:\n        - name: w\n          gpus:\n"
            "            - {type: T4, memory: 15360, count: 2, uuids: [GPU-1]}\n",
            8,
            "spec.tenants[0].workers[0].gpus[0]",
            "count is 2",
        ),
        (
            "kind: Lab\nspec:\n  tenants:\n    - name: a\n      workers:\n        - name: w\n"
            "          runtimeHandlers: [runc, Kata_VM]\n",
            7,
            "spec.tenants[0].workers[0].runtimeHandlers",
            "'Kata_VM' must be a DNS label",
        ),
        (
            "kind: Lab\nspec:\n  hami:\n    runtimeClassName: nvidia\n  tenants: [{name: a}]\n",
            3,
            "spec.hami",
            "needs createRuntimeClass: true",
        ),
        (
            "kind: Lab\nspec:\n  hami:\n    runtimeClassName: NVIDIA\n    createRuntimeClass: true\n"
            "  tenants: [{name: a}]\n",
            4,
            "spec.hami.runtimeClassName",
            "DNS subdomain",
        ),
    ],
)
def test_mistakes_are_reported_with_line_and_field(text: str, line: int, field: str, words: str) -> None:
    with pytest.raises(LabSpecError) as info:
        parse_lab(text, source="f.yaml")
    message = str(info.value)
    assert message.startswith(f"f.yaml:{line}: {field}:"), message
    assert words in message


def test_wrong_kind_and_bad_yaml() -> None:
    with pytest.raises(LabSpecError, match=r"^f.yaml:1: kind: expected 'Lab'"):
        parse_lab("kind: Pod\n", source="f.yaml")
    with pytest.raises(LabSpecError, match=r"^f.yaml:3: not valid YAML"):
        parse_lab("kind: Lab\nspec: [\n", source="f.yaml")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(LabSpecError, match="cannot read the lab file"):
        load_lab(tmp_path / "missing.yaml")
