"""HAMi's annotation and label keys, exactly as HAMi v2.10 spells them."""

from __future__ import annotations

# node side
NODE_REGISTER = "hami.io/node-nvidia-register"
NODE_SCORE = "hami.io/node-nvidia-score"
NODE_HANDSHAKE = "hami.io/node-handshake"
NODE_LOCK = "hami.io/mutex.lock"
DEVICE_CORDON = "hami.io/device-cordon"

# pod side, written by the scheduler and the device plugin
VGPU_NODE = "hami.io/vgpu-node"
VGPU_TIME = "hami.io/vgpu-time"
DEVICES_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
DEVICES_ALLOCATED = "hami.io/vgpu-devices-allocated"
BIND_PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
BIND_PHASE_ALLOCATING = "allocating"
BIND_PHASE_SUCCESS = "success"
BIND_PHASE_FAILED = "failed"

# pod side, written by users
USE_GPU_TYPE = "nvidia.com/use-gputype"
NOUSE_GPU_TYPE = "nvidia.com/nouse-gputype"
USE_GPU_UUID = "nvidia.com/use-gpuuuid"
NOUSE_GPU_UUID = "nvidia.com/nouse-gpuuuid"
VGPU_MODE = "nvidia.com/vgpu-mode"
NUMA_BIND = "nvidia.com/numa-bind"
NODE_SCHEDULER_POLICY = "hami.io/node-scheduler-policy"
GPU_SCHEDULER_POLICY = "hami.io/gpu-scheduler-policy"
DEVICE_SCORING_WEIGHTS = "hami.io/device-scoring-weights"

# webhook selectors
WEBHOOK_IGNORE_LABEL = "hami.io/webhook"

# container environment the webhook and device plugin inject
ENV_TASK_PRIORITY = "CUDA_TASK_PRIORITY"
ENV_CORE_LIMIT_SWITCH = "GPU_CORE_UTILIZATION_POLICY"
