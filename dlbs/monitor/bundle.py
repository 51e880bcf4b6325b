"""The node monitor as one file that a compute node runs without dlbs: a Python zipapp.

`node_monitor_bytes()` packs the stand-alone modules (`STANDALONE`: standard library only,
Python 3.8+, importing only each other) as the package `dlbs_node` with a `__main__` that
runs `node.main`; `python3 dlbs-node-monitor.pyz --help` works on any node. NVIDIA's NVML
binding (`pynvml`, one module of the nvidia-ml-py package that dlbs depends on) goes into the
archive beside them when it is installed here, so that a node reads the GPUs' energy counters
without it (`VENDORED`); without it the node monitor asks nvidia-smi. The archive is the same
bytes for the same sources (fixed dates, fixed order), so it is rewritten only when dlbs or
nvidia-ml-py changed.
"""

from __future__ import annotations

import importlib.util
import io
import os
import zipfile
from pathlib import Path

from dlbs.util.atomic import atomic_write

#: The modules of this package that run on compute nodes, in dependency order.
STANDALONE = ("proc", "bounded", "gpu", "nvml", "rapl", "logmarks", "sampling", "probe", "node")
#: Third-party modules of one file each that the node monitor may import, packed as they are.
VENDORED = ("pynvml",)
PACKAGE = "dlbs_node"
FILE_NAME = "dlbs-node-monitor.pyz"
_MAIN = (f"import sys\nfrom {PACKAGE}.node import main\n\nsys.exit(main())\n")
_HERE = Path(__file__).resolve().parent


def node_monitor_bytes() -> bytes:
    """The zipapp's bytes (deterministic)."""
    files = {"__main__.py": _MAIN, f"{PACKAGE}/__init__.py": '"""dlbs\'s node monitor."""\n'}
    for name in STANDALONE:
        files[f"{PACKAGE}/{name}.py"] = (_HERE / f"{name}.py").read_text()
    for name in VENDORED:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            files[f"{name}.py"] = Path(spec.origin).read_text()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in sorted(files.items()):
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, text)
    return buffer.getvalue()


def write_node_monitor(folder: str) -> str:
    """Put the zipapp in `folder` (unless it is there already, byte for byte); its path."""
    path = os.path.join(folder, FILE_NAME)
    content = node_monitor_bytes()
    try:
        with open(path, "rb") as existing:
            if existing.read() == content:
                return path
    except OSError:
        pass
    atomic_write(path, content, permissions=0o644)
    return path
