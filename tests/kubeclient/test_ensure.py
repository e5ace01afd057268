"""`covers`: when an object the lab wants is already in place, so that starting the lab again writes nothing."""

from __future__ import annotations

from tenantgpu.kubeclient.ensure import covers

DEPLOYED = {
    "metadata": {"name": "hami-scheduler", "namespace": "kube-system", "resourceVersion": "7", "uid": "u"},
    "spec": {
        "replicas": 1,
        "revisionHistoryLimit": 10,  # the API server's default
        "template": {
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "IfNotPresent"}]}
        },
    },
    "status": {"replicas": 1},
}


def test_what_the_server_added_does_not_count_as_a_difference() -> None:
    wanted = {
        "metadata": {"name": "hami-scheduler", "namespace": "kube-system"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    assert covers(DEPLOYED, wanted)


def test_an_empty_value_the_server_left_out_is_in_place() -> None:
    # kube's JSON drops omitempty fields at their zero value: `hostNetwork: false` comes back absent
    assert covers(DEPLOYED, {"spec": {"template": {"spec": {"hostNetwork": False, "volumes": []}}}})
    assert not covers(DEPLOYED, {"spec": {"template": {"spec": {"hostNetwork": True}}}})


def test_a_changed_value_or_list_is_a_difference() -> None:
    assert not covers(DEPLOYED, {"spec": {"replicas": 2}})
    two = [{"name": "c", "image": "i"}, {"name": "d", "image": "i"}]
    assert not covers(DEPLOYED, {"spec": {"template": {"spec": {"containers": two}}}})
    assert not covers(
        DEPLOYED, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "j"}]}}}}
    )
    assert not covers(DEPLOYED, {"metadata": {"labels": {"app": "hami"}}})
