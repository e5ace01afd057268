"""A simulated worker node: kubelet (pod lifecycle) and the GPU runtime model."""
