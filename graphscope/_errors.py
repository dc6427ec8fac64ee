"""Errors users must act on. The CLI prints one line per error and exits with ``exit_code``."""

from __future__ import annotations


class GraphscopeError(Exception):
    """Base class: a failure with a message that says what to fix."""

    exit_code = 2


class NativeUnavailableError(GraphscopeError):
    """The compiled extension, libcuda or libcupti could not be loaded."""


class NoGPUError(GraphscopeError):
    """No CUDA device or driver on this machine."""


class CuptiError(GraphscopeError):
    """A CUPTI call failed."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class CuptiSubscriberError(CuptiError):
    """Another CUPTI client holds the one callback subscription of this process (error 39)."""


class CuptiPrivilegesError(CuptiError):
    """The driver refuses profiling to this user (error 35)."""


class ProfilerActiveError(GraphscopeError):
    """torch.profiler is running: graphscope's tracer would steal its activity buffers."""


class CaptureError(GraphscopeError):
    """The CUDA-graph capture of the user's model failed."""


class ModelFileError(GraphscopeError):
    """The model file is missing, fails to import or breaks the model-file convention."""


class ConfigError(GraphscopeError):
    """A YAML config or budgets file has a wrong key or type."""


class BundleError(GraphscopeError):
    """A bundle is missing, incomplete, or of another schema version."""


class AnnotationError(GraphscopeError, TypeError):
    """An annotation passed to mark_kernels / mark_stream is not usable."""
