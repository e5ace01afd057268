"""What the kubelet's volume manager needs before a pod's containers are created: the ConfigMaps and
Secrets its `configMap`, `secret` and `projected` volumes name, and kube's words when one is missing.

Until every such volume can be set up, a real kubelet leaves the pod in ContainerCreating and records
a Warning `FailedMount` per volume and attempt, `MountVolume.SetUp failed for volume "<volume>" :
configmap "<name>" not found` (the operation generator's text around the volume plugin's error); an
`optional` source that is missing is left out, and a key the volume's `items` name must be there
(`configmap references non-existent config key: <key>`, `references non-existent secret key: <key>`).
A projected volume reports the errors of all its sources together, as kube's error aggregate prints them.

Pure functions: the kubelet looks the objects up and retries with the volume manager's back-off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# The volume manager retries a failed mount after 0.5 s, doubling up to 2 min 2 s
# (nestedpendingoperations' initialDurationBeforeRetry and maxDurationBeforeRetry).
FIRST_RETRY_SECONDS = 0.5
LAST_RETRY_SECONDS = 122.0
FAILED_MOUNT = "FailedMount"


@dataclass(frozen=True)
class ObjectSource:
    """A ConfigMap (`configmap`) or Secret (`secret`) a volume takes its files from."""

    kind: str
    name: str
    optional: bool
    keys: tuple[str, ...] = ()  # the keys the source's `items` name


@dataclass(frozen=True)
class VolumeNeeds:
    volume: str
    sources: tuple[ObjectSource, ...]
    projected: bool = False


def _source(kind: str, body: Mapping[str, Any], name_field: str) -> ObjectSource:
    keys = tuple(str(item.get("key", "")) for item in body.get("items") or () if isinstance(item, Mapping))
    return ObjectSource(kind, str(body.get(name_field) or ""), bool(body.get("optional")), keys)


def volume_needs(spec: Mapping[str, Any]) -> list[VolumeNeeds]:
    """The pod's volumes that take files from ConfigMaps or Secrets, in the pod's order."""
    needs = []
    for volume in spec.get("volumes") or ():
        name = str(volume.get("name", ""))
        if isinstance(volume.get("configMap"), Mapping):
            needs.append(VolumeNeeds(name, (_source("configmap", volume["configMap"], "name"),)))
        elif isinstance(volume.get("secret"), Mapping):
            needs.append(VolumeNeeds(name, (_source("secret", volume["secret"], "secretName"),)))
        elif isinstance(volume.get("projected"), Mapping):
            sources = []
            for projection in volume["projected"].get("sources") or ():
                if isinstance(projection.get("configMap"), Mapping):
                    sources.append(_source("configmap", projection["configMap"], "name"))
                elif isinstance(projection.get("secret"), Mapping):
                    sources.append(_source("secret", projection["secret"], "name"))
            if sources:
                needs.append(VolumeNeeds(name, tuple(sources), projected=True))
    return needs


def _missing_key(source: ObjectSource, found: Mapping[str, Any]) -> str | None:
    data = {**(found.get("data") or {}), **(found.get("binaryData") or {})}
    if source.optional:
        return None
    for key in source.keys:
        if key not in data:
            if source.kind == "configmap":
                return f"configmap references non-existent config key: {key}"
            return f"references non-existent secret key: {key}"
    return None


def _aggregate(errors: list[str]) -> str:
    """kube's utilerrors aggregate: one error as it is, several (each once) in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def setup_error(needs: VolumeNeeds, lookup: Callable[[str, str], Mapping[str, Any] | None]) -> str | None:
    """Why the volume cannot be set up now (the volume plugin's error), or None. `lookup(kind, name)`
    gives the object in the pod's namespace, None when there is none."""
    errors = []
    for source in needs.sources:
        found = lookup(source.kind, source.name)
        if found is None:
            if not source.optional:
                errors.append(f'{source.kind} "{source.name}" not found')
            continue
        missing = _missing_key(source, found)
        if missing is not None:
            errors.append(missing)
        if errors and not needs.projected:
            break
    return _aggregate(errors) if errors else None


def failed_mount_message(volume: str, error: str) -> str:
    """The operation generator's event text for a failed SetUp."""
    return f'MountVolume.SetUp failed for volume "{volume}" : {error}'


def retry_delay(attempt: int) -> float:
    """The wait before the volume manager's next try, after `attempt` failed ones (1 = the first)."""
    return min(FIRST_RETRY_SECONDS * 2 ** (attempt - 1), LAST_RETRY_SECONDS)
