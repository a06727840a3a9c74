"""The node type a claim records (the admin's and show_worker's "node type"): what the
container runtime leaves in the process's view, not a file the image happens to hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from django_snowflake.allocators.hosts import node_type

VM_ROOT = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
OVERLAY_ROOT = "500 400 0:52 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/docker/l\n"
PLAIN_CGROUP = "0::/\n"


@pytest.mark.parametrize(
    ("files", "environ", "expected"),
    [
        # A Firecracker VM booted from an image Docker built: /.dockerenv is in the image.
        ({".dockerenv": "", "proc/self/mountinfo": VM_ROOT}, {}, "actual"),
        ({"proc/self/mountinfo": VM_ROOT, "proc/self/cgroup": PLAIN_CGROUP}, {}, "actual"),
        # Docker (overlay2, cgroup v2: the cgroup path says nothing).
        ({".dockerenv": "", "proc/self/mountinfo": OVERLAY_ROOT}, {}, "container"),
        # Docker with cgroup v1, and with systemd's cgroup driver.
        ({"proc/self/cgroup": "12:memory:/docker/0123abcd\n"}, {}, "container"),
        ({"proc/self/cgroup": "0::/system.slice/docker-0123abcd.scope\n"}, {}, "container"),
        ({"proc/self/cgroup": "0::/kubepods.slice/kubepods-besteffort.slice\n"}, {}, "container"),
        ({"proc/self/cgroup": "0::/machine.slice/libpod-0123abcd.scope\n"}, {}, "container"),
        ({"run/.containerenv": ""}, {}, "container"),
        ({}, {"container": "podman"}, "container"),
        ({}, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "container"),
        ({}, {}, "actual"),
    ],
)
def test_node_type(
    tmp_path: Path, files: dict[str, str], environ: dict[str, str], expected: str
) -> None:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert node_type(str(tmp_path), environ) == expected
