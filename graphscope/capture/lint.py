"""Capture-safety lint on a CPU: run forward and backward once and report what breaks or
silently corrupts CUDA-graph capture, each finding with module FQN and source line.

How: a ``TorchDispatchMode`` sees every aten op (host syncs, data-dependent shapes), a
``TorchFunctionMode`` sees Python-level tensor use (``if tensor:``, printing tensors, factory
calls without a device), global module hooks keep the current module path, and
``torch.cuda.synchronize`` is wrapped for the run. No GPU is needed: the rules are about what
the code asks for, not where it runs.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from .._errors import GraphscopeError
from ..annotate import module_fqn
from ..annotate.ops import default_skip_dirs, user_source
from .loader import ModelSpec

SEVERITIES = ("info", "warning", "error")
NEEDS_TORCH = ("graphscope lint needs PyTorch ({why}): it runs the model on the CPU; install "
               "it (pip install torch)")

# aten ops that copy a device value to the host: a sync, illegal while capturing
_READ = "reads a tensor value on the host (.item(), float(t), int(t) or bool(t))"
# (aten::item where the dispatcher keeps it whole: under torch.inference_mode())
_SYNC_OPS = {"aten::_local_scalar_dense": _READ, "aten::item": _READ,
             "aten::equal": "torch.equal() returns a Python bool: it reads the comparison on "
             "the host"}
# aten ops whose output shape depends on tensor values
_DYNAMIC_OPS = {
    "aten::nonzero": "nonzero() has a data-dependent output shape",
    "aten::nonzero_static": None,
    "aten::masked_select": "masked_select() has a data-dependent output shape",
    "aten::unique_dim": "unique() has a data-dependent output shape",
    "aten::_unique2": "unique() has a data-dependent output shape",
    "aten::unique_consecutive": "unique_consecutive() has a data-dependent output shape",
    "aten::repeat_interleave.Tensor": "repeat_interleave() with tensor repeats has a "
    "data-dependent output shape (pass output_size=)",
    "aten::bincount": "bincount() has a data-dependent output size (its input's maximum, read "
    "on the host)",
}
# index_put with a boolean mask (``x[mask] = v``): the mask's indices are found on the host
_INDEX_PUT = {"aten::index_put", "aten::index_put_", "aten::_index_put_impl",
              "aten::_index_put_impl_"}
_FACTORIES = {"zeros", "ones", "empty", "full", "arange", "rand", "randn", "randint", "eye",
              "linspace", "logspace", "tensor", "as_tensor", "zeros_like", "ones_like"}
_LIKE = {"zeros_like", "ones_like"}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    message: str
    module: Optional[str]
    source: Optional[str]
    count: int = 1

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity, "message": self.message,
                "module": self.module, "source": self.source, "count": self.count}


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    ran_backward: bool = False
    error: Optional[str] = None

    def at_or_above(self, severity: str) -> list[Finding]:
        lvl = SEVERITIES.index(severity)
        return [f for f in self.findings if SEVERITIES.index(f.severity) >= lvl]


class _Collector:
    def __init__(self, skip_dirs: tuple[str, ...]) -> None:
        self.skip_dirs = skip_dirs
        self.modules = threading.local()
        self.found: dict[tuple[str, Optional[str], Optional[str]], list[Any]] = {}
        self.in_forward = False
        self.forward_is_module = False  # a user's step: forward is whatever runs in a module

    def forward(self) -> bool:
        return self.in_forward or (self.forward_is_module and self.module() is not None)

    def module(self) -> Optional[str]:
        stack = self.modules.__dict__.get("stack", [])
        return stack[-1] if stack else None

    def add(self, rule: str, severity: str, message: str) -> None:
        key = (rule, self.module(), user_source(self.skip_dirs))
        hit = self.found.get(key)
        if hit is None:
            self.found[key] = [severity, message, 1]
        else:
            hit[2] += 1

    def findings(self) -> list[Finding]:
        out = [Finding(rule, sev, msg, module, src, n)
               for (rule, module, src), (sev, msg, n) in self.found.items()]
        out.sort(key=lambda f: (-SEVERITIES.index(f.severity), *_line_order(f.source), f.rule))
        return out


def _line_order(source: Optional[str]) -> tuple[int, str, int]:
    """A finding's place in reading order: by file, then line number (``bad.py:9`` before
    ``bad.py:15``); findings about the model as a whole (no line) after those with one."""
    if not source:
        return (1, "", 0)
    file, _, rest = source.partition(":")
    line = rest.split()[0] if rest.split() else ""
    return (0, file, int(line) if line.isdigit() else 0)


def _names_cpu(device: Any) -> bool:
    """Whether ``device`` is the CPU spelled as a string (``"cpu"``, ``"cpu:0"``). Not a
    ``torch.device``: on the CPU that lint runs on, ``x.device`` is one too, and it is what
    the advice asks for."""
    return isinstance(device, str) and device.split(":")[0].strip().lower() == "cpu"


def _modes(col: _Collector) -> tuple[Any, Any]:
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Dispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            name = str(func.name())
            base = name.split(".")[0] if name not in _DYNAMIC_OPS else name
            if name in _SYNC_OPS:
                col.add("host-sync", "error", _SYNC_OPS[name])
            msg = _DYNAMIC_OPS.get(name) or _DYNAMIC_OPS.get(base)
            if msg and name == "aten::repeat_interleave.Tensor" and (
                    (kwargs or {}).get("output_size") is not None):
                msg = None  # its size given: nothing to read on the host
            if msg:
                col.add("data-dependent-shape", "error", msg)
            masked = any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool
                for i in (args[1] if len(args) > 1 and isinstance(args[1], (list, tuple))
                          else ()))
            if base == "aten::index" and masked:
                col.add("data-dependent-shape", "error",
                        "boolean-mask indexing has a data-dependent output shape "
                        "(use torch.where)")
            elif base in _INDEX_PUT and masked and col.forward():  # (its backward: no line)
                col.add("host-sync", "error",
                        "assignment through a boolean mask (x[mask] = v) finds the mask's "
                        "indices on the host (use torch.where or masked_fill_)")
            return func(*args, **(kwargs or {}))

    class Function(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name == "__bool__":
                col.add("tensor-control-flow", "error",
                        "Python control flow on a tensor value (if/while on a tensor): the "
                        "graph records one branch and syncs")
            elif name in ("__repr__", "__str__", "__format__"):
                col.add("print-tensor", "error",
                        "formats a tensor (print/log/f-string): copies it to the host")
            elif name in ("cpu", "numpy", "tolist"):
                col.add("host-sync", "error", f".{name}() copies to the host")
            elif name == "to" and any(_names_cpu(x) for x in (*args[1:], kwargs.get("device"))):
                col.add("host-sync", "error", ".to('cpu') copies to the host")
            elif col.forward() and name in _FACTORIES and getattr(func, "__module__", "") in (
                    "torch", "torch._C._VariableFunctions") and name not in _LIKE:
                device = kwargs.get("device")
                if device is None or _names_cpu(device):
                    how = "without device=" if device is None else f"with device={device!r}"
                    col.add("cpu-tensor-in-forward", "warning",
                            f"torch.{name}() {how} makes a CPU tensor inside "
                            "forward; on the GPU it is copied host-to-device in the captured "
                            "step (pass device=x.device)")
            return func(*args, **kwargs)

    return Dispatch(), Function()


@contextlib.contextmanager
def _module_paths(model: Any, col: _Collector) -> Iterator[None]:
    from torch.nn.modules import module as m

    names = {mod: module_fqn(p) for p, mod in model.named_modules()} if hasattr(
        model, "named_modules") else {}

    def pre(mod: Any, args: Any) -> None:
        col.modules.__dict__.setdefault("stack", []).append(names.get(mod, type(mod).__name__))

    def post(mod: Any, args: Any, out: Any) -> None:
        stack = col.modules.__dict__.setdefault("stack", [])
        if stack:
            stack.pop()

    hs = [m.register_module_forward_pre_hook(pre),
          m.register_module_forward_hook(post, always_call=True)]
    try:
        yield
    finally:
        for h in hs:
            h.remove()


@contextlib.contextmanager
def _wrapped_synchronize(col: _Collector) -> Iterator[None]:
    import torch

    real = torch.cuda.synchronize

    def sync(*a: Any, **k: Any) -> None:
        col.add("host-sync", "error", "torch.cuda.synchronize() inside the step")
        if torch.cuda.is_available():
            real(*a, **k)

    torch.cuda.synchronize = sync
    try:
        yield
    finally:
        torch.cuda.synchronize = real


def _graphing_restrictions(spec: ModelSpec) -> list[Finding]:
    """SPEC CG5: what make_graphed_callables refuses (relevant to --mode callables)."""
    import torch

    out: list[Finding] = []
    model = spec.model
    if isinstance(model, torch.nn.Module):
        for path, mod in model.named_modules():
            if mod._forward_hooks or mod._forward_pre_hooks or mod._backward_hooks:
                out.append(Finding("graphed-module-hooks", "warning",
                                   "module hooks registered: make_graphed_callables refuses "
                                   "the module (--mode callables)", module_fqn(path), None))
        for name, buf in model.named_buffers():
            if buf.requires_grad:
                out.append(Finding("buffer-requires-grad", "warning",
                                   f"buffer {name} requires grad: make_graphed_callables "
                                   "refuses it", None, None))
    for i, a in enumerate(spec.args):
        if not isinstance(a, torch.Tensor):
            out.append(Finding("non-tensor-arg", "warning",
                               f"sample arg {i} is a {type(a).__name__}: make_graphed_callables "
                               "takes tensors only (--mode callables)", None, None))
    return out


def _run_model(spec: ModelSpec, col: _Collector, report: LintReport) -> None:
    """What the capture would run, once, on the CPU: the file's own ``step`` (its forward
    is what runs inside a module), forward of every input bucket (``--mode forward``: no
    backward), or forward + loss + backward with the file's ``kwargs``."""
    import torch

    if spec.step is not None:
        col.forward_is_module = True
        params = list(spec.model.parameters()) if hasattr(spec.model, "parameters") else []
        try:
            spec.step(spec.model, *spec.args, **spec.kwargs)
        except Exception as exc:
            if not _optimizer_needs_gpu(exc):
                raise
            col.add("optimizer-needs-gpu", "info",
                    "the step's optimizer (capturable=True) runs on the GPU only: linted "
                    "everything before its step()")
        report.ran_backward = any(p.grad is not None for p in params)
        return
    if spec.buckets:  # --mode forward: inference only, as the capture runs it
        with torch.inference_mode():
            for args, kwargs in spec.buckets:
                col.in_forward = True
                spec.model(*args, **kwargs)
                col.in_forward = False
        return
    col.in_forward = True
    autocast = torch.is_autocast_enabled() and torch.is_autocast_cache_enabled()
    out = spec.model(*spec.args, **spec.kwargs)
    if autocast or (torch.is_autocast_enabled() and torch.is_autocast_cache_enabled()):
        col.add("autocast-cache", "warning",
                "autocast with cache_enabled=True: graphing needs cache_enabled=False")
    col.in_forward = False
    if spec.loss is not None:
        loss = spec.loss(out)
    else:  # the capture's own default loss: what it backwards, lint backwards
        from .._errors import CaptureError
        from . import default_loss

        try:
            loss = default_loss(out)
        except CaptureError as exc:
            col.add("no-backward", "warning",
                    f"no backward was run: {exc} (the step capture, graphscope capture's "
                    "default, would fail this way; --mode forward captures inference only)")
            return
    if loss is not None and getattr(loss, "requires_grad", False):
        loss.backward()
        report.ran_backward = True


def _optimizer_needs_gpu(exc: BaseException) -> bool:
    """A capturable torch.optim optimizer refusing CPU tensors (it is the GPU's step)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    return "capturable" in str(exc) and any(
        f"torch{os.sep}optim{os.sep}" in fr.filename for fr in frames[-3:])


def _user_frame(exc: BaseException, skip_dirs: tuple[str, ...]) -> Optional[str]:
    """``file:line (function)`` of the innermost frame of ``exc``'s traceback in the user's
    code (not torch's or graphscope's): where the model failed."""
    import traceback

    for fr in reversed(traceback.extract_tb(exc.__traceback__)):
        if not fr.filename.startswith(skip_dirs) and not fr.filename.startswith("<"):
            return f"{fr.filename}:{fr.lineno} ({fr.name})"
    return None


def lint_model(spec: ModelSpec) -> LintReport:
    """Run one step of ``spec`` on the CPU (see :func:`_run_model`) and collect findings."""
    col = _Collector(default_skip_dirs())
    report = LintReport()
    dispatch, function = _modes(col)
    printed = io.StringIO()  # the model's own prints stay out of the report
    try:
        with _module_paths(spec.model, col), _wrapped_synchronize(col), \
                contextlib.redirect_stdout(printed), function, dispatch:
            _run_model(spec, col, report)
    except Exception as exc:  # the user's model failed on CPU: still report what was seen
        where = _user_frame(exc, col.skip_dirs)
        report.error = f"{type(exc).__name__}: {exc}" + (f" (at {where})" if where else "")
    report.findings = col.findings() + _graphing_restrictions(spec)
    return report


# ------------------------------------------------------------------ in a child process
LINT_TIMEOUT_S = 120.0


def lint_in_child(path: str, entry: str, timeout: float = LINT_TIMEOUT_S) -> LintReport:
    """Lint ``path`` in a child interpreter: the model cannot end the run early with
    ``sys.exit``, hang it with a loop or a non-daemon thread, or print into our output. Its
    exit, a timeout or a crash is a finding (rule ``exit``/``timeout``)."""
    import importlib.util
    import json
    import subprocess
    import sys
    import tempfile

    if importlib.util.find_spec("torch") is None:  # before a child fails on it at import
        raise GraphscopeError(NEEDS_TORCH.format(why="No module named 'torch'"))
    with tempfile.TemporaryDirectory(prefix="graphscope-lint-") as tmp:
        out = os.path.join(tmp, "report.json")
        cmd = [sys.executable, "-c",
               "from graphscope.capture.lint import _child_main; _child_main()",
               path, entry, out]
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return LintReport([Finding(
                "timeout", "error", f"the model did not finish within {timeout:.0f} s on the "
                "CPU (an endless loop at import or in forward, or a thread that never ends)",
                None, path)], error=f"timed out after {timeout:.0f} s")
        if os.path.exists(out):
            with open(out, encoding="utf-8") as f:
                data = json.load(f)
            if "no_torch" in data:
                raise GraphscopeError(NEEDS_TORCH.format(why=data["no_torch"]))
            if "load_error" in data:
                from .._errors import ModelFileError

                raise ModelFileError(data["load_error"])
            return LintReport([Finding(**d) for d in data["findings"]],
                              ran_backward=bool(data["ran_backward"]), error=data["error"])
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        why = (f"exited with code {proc.returncode}" if proc.returncode >= 0
               else f"was killed by signal {-proc.returncode}")
        return LintReport([Finding(
            "exit", "error", f"the model {why} while being linted (sys.exit() or os._exit() at "
            "import, in graphscope_model() or in forward): graphscope could not check it"
            + (f"; last output: {err[-1][:200]}" if err else ""), None, path)],
            error=f"the model {why}")


def _cpu_for_cuda() -> None:
    """On a machine without CUDA (a CI runner), ``.cuda()`` of a tensor or module returns it on
    the CPU, as lint runs the whole model there: a model file that moves its target to the GPU
    (docs/model-files.md's example) is linted, not failed. Only in lint's child process."""
    import torch

    if torch.cuda.is_available():
        return

    def stay(self: Any, *a: Any, **k: Any) -> Any:
        return self

    torch.Tensor.cuda = stay  # type: ignore[method-assign]
    torch.nn.Module.cuda = stay  # type: ignore[method-assign]


def _child_main() -> None:
    """The child: load, lint, write the report as JSON, and leave at once (os._exit: a
    thread the model started must not keep the process alive)."""
    import json
    import sys

    path, entry, out = sys.argv[1:4]
    try:
        _cpu_for_cuda()
    except ImportError as exc:  # torch is missing or broken: said first, not as the model's exit
        data: dict[str, Any] = {"no_torch": str(exc)}
    else:
        data = _lint_data(path, entry)
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, out)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _lint_data(path: str, entry: str) -> dict[str, Any]:
    """The child's report of MODEL as JSON data (a model file that cannot load: its error)."""
    from .._errors import ModelFileError
    from .loader import load_model_file

    try:
        spec = load_model_file(path, entry)
        report = lint_model(spec)
    except ModelFileError as exc:
        return {"load_error": str(exc)}
    return {"findings": [f.to_json() for f in report.findings],
            "ran_backward": report.ran_backward, "error": report.error}
