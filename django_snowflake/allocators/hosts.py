"""What a process runs on, as ``WorkerNode.node_type`` records it: a machine or a container."""

from __future__ import annotations

import os
from collections.abc import Mapping

# What a container runtime leaves in a process's view, and an image does not: Docker's,
# containerd's, Podman's and LXC's cgroup names, and the union file systems they mount as /.
CONTAINER_CGROUPS = ("docker", "kubepods", "containerd", "libpod", "lxc", "garden")
CONTAINER_ROOTS = frozenset({"overlay", "aufs", "fuse-overlayfs"})


def node_type(root: str = "/", environ: Mapping[str, str] = os.environ) -> str:
    """``container`` inside Docker, Podman, LXC or Kubernetes; ``actual`` otherwise.

    Only what the runtime puts there counts: Kubernetes' ``KUBERNETES_SERVICE_HOST``, the
    ``container`` variable systemd-nspawn, Podman and LXC set, Podman's
    ``/run/.containerenv``, a runtime's name in this process's cgroup, or a union file system
    mounted as ``/``. ``/.dockerenv`` alone does not: it is a file of the image, so a virtual
    machine booted from an image that was built by Docker (Firecracker, for one) has it too.
    ``root`` and ``environ`` are where to look (the tests give a directory of their own).
    """
    if "KUBERNETES_SERVICE_HOST" in environ or environ.get("container"):
        return "container"
    base = os.path.join(root, "")
    if os.path.exists(base + "run/.containerenv"):
        return "container"
    try:
        with open(base + "proc/self/cgroup") as file:
            cgroups = file.read()
    except OSError:
        cgroups = ""
    if any(f"/{name}" in cgroups or f"{name}-" in cgroups for name in CONTAINER_CGROUPS):
        return "container"
    try:
        with open(base + "proc/self/mountinfo") as file:
            mounts = [line.split(" - ", 1) for line in file]
    except OSError:
        mounts = []
    for before, after in (mount for mount in mounts if len(mount) == 2):
        # mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT ... - FSTYPE SOURCE OPTIONS"
        if before.split()[4] == "/" and after.split()[0] in CONTAINER_ROOTS:
            return "container"
    return "actual"
