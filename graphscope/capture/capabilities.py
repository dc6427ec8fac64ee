"""What graphscope can do on this machine, found by doing tiny operations (``graphscope doctor``,
the tests' GPU markers): the extension, the GPU, CUPTI and its subscription, the tools-id API,
the op observer, the gzip engine."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

from .. import native
from .._errors import GraphscopeError, NoGPUError


@dataclass(frozen=True)
class Capabilities:
    """What works on this machine, and why not."""

    extension: bool
    gpu: bool
    cupti: bool
    can_subscribe: bool
    tools_id_api: bool
    details: dict[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @property
    def can_capture(self) -> bool:
        return self.extension and self.gpu and self.cupti and self.can_subscribe

    @property
    def reason(self) -> str:
        return "; ".join(self.problems) or "ok"


def gzip_engine() -> str:
    """What annotate-trace inflates and deflates .gz traces with here."""
    from ..trace_annotate.streamio import isal_gzip

    if isal_gzip() is None:
        return "zlib" + (" (GRAPHSCOPE_ZLIB=1)" if os.environ.get("GRAPHSCOPE_ZLIB") == "1" else
                         " (python-isal not installed)")
    from importlib.metadata import version

    return f"ISA-L (python-isal {version('isal')})"


# PyPI's `graphscope` is Alibaba's GraphScope (a graph computing system); its Python client,
# `graphscope-client`, installs a `graphscope` package too. This project is `cudagraph-scope`.
OTHER_GRAPHSCOPE = ("graphscope", "graphscope-client")
OUR_SCRIPT = "graphscope.cli.main:main"  # this project's console script, under any name


def other_graphscope() -> list[tuple[str, str]]:
    """(name, version) of each installed distribution of Alibaba's GraphScope that provides a
    ``graphscope`` import, as this project does: the two overwrite each other's files. Read
    from the installed metadata (``importlib.metadata``), never by importing it."""
    import re
    from importlib.metadata import distributions

    found: dict[str, str] = {}
    for dist in distributions():
        name = re.sub(r"[-_.]+", "-", str((dist.metadata.get_all("Name") or [""])[0])).lower()
        if name in OTHER_GRAPHSCOPE and _provides_graphscope(dist) and not any(
                ep.value == OUR_SCRIPT for ep in dist.entry_points):
            found.setdefault(name, dist.version)
    return sorted(found.items())


def _provides_graphscope(dist: Any) -> bool:
    """Whether ``dist`` installs files of the ``graphscope`` package (its RECORD), or names
    it as a top-level package."""
    files = dist.files or []
    if any(f.parts and f.parts[0] == "graphscope" for f in files):
        return True
    return "graphscope" in (dist.read_text("top_level.txt") or "").split()


def torch_import_error() -> str | None:
    """Why ``import torch`` fails here (None when it works): lint runs models with it."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        return str(exc) or type(exc).__name__
    return None


def probe(try_subscribe: bool = True) -> Capabilities:
    """Check, by doing tiny operations, what graphscope can do here. Never raises."""
    details: dict[str, Any] = {"python": sys.version.split()[0], "gzip": gzip_engine()}
    problems: list[str] = []
    ext = native.maybe_extension()
    if ext is None:
        return Capabilities(False, False, False, False, False, details,
                            (native.import_error(),))
    try:
        import torch

        details["torch"] = torch.__version__
        details["torch_cuda"] = torch.version.cuda
        details["node_creation_hook"] = hasattr(torch.autograd.graph, "node_creation_hook")
        details["torch_graph_annotations"] = hasattr(torch.cuda, "graph_annotations")
        details["op_observer"] = "native" if native.op_observer() is not None else (
            f"python dispatch mode ({native.op_observer_why()})")
    except ImportError:
        problems.append("PyTorch is not installed")
    gpu = cupti = False
    try:
        native.ensure_loaded()
        gpu = cupti = True
        import torch

        details["gpu"] = torch.cuda.get_device_name()
    except GraphscopeError as exc:
        problems.append(str(exc))
        gpu = not isinstance(exc, NoGPUError) and "libcupti" in str(exc)
    raw = ext.probe(try_subscribe and cupti)
    details.update(raw)
    can_sub = raw.get("subscribe") == "ok"
    if cupti and try_subscribe and not can_sub:
        problems.append(str(native.translate(RuntimeError(raw.get("subscribe", "")))))
    tools = bool(raw.get("tools_id_api"))
    if gpu and not tools:
        details["tools_id_note"] = (
            "cudaGraphNodeGetToolsId needs a CUDA >= 13.1 driver: torch's own mark_kernels "
            "records nothing here; graphscope uses CUPTI node ids instead"
        )
    return Capabilities(True, gpu, cupti, can_sub, tools, details, tuple(problems))
