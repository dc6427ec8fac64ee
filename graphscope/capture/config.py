"""Capture options and their precedence: command line > environment > YAML > model file >
defaults. The library takes :class:`CaptureConfig`; click types never reach it."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any, Optional

from .._errors import ConfigError
from ..model.yamlfile import read_yaml


@dataclass
class CaptureConfig:
    """Options of `graphscope capture` / `annotate` / `run` and
    :func:`graphscope.profile`."""

    model: Optional[str] = None  # the model file, or the program (mode "run")
    entry: str = "graphscope_model"
    mode: str = "step"  # a name in graphscope.capture.source.SOURCES
    warmup: int = 3
    replays: int = 20
    depth: Optional[int] = None
    backward: bool = True
    record_ops: bool = True
    # mode "run": ops are recorded in the first N captures of each capture site (0: in every
    # capture); a serving ladder's later buckets keep their module, phase and memory scopes
    op_captures: int = 2
    keep_events: int = 3  # replays kept as full events in timeline.json
    output: Optional[str] = None
    force: bool = False
    # mode "run" (a program's own graphs): which replays of each graph are traced
    skip_replays: int = 0  # replays of each graph to let pass before tracing
    graphs: Optional[str] = None  # regex: only graphs whose name matches are traced
    dot: bool = True  # keep the driver's verbose DOT of every graph
    counters: int = 0  # dedicated PM-sampled replays after the timed ones (0: no counters)
    eager_baseline: bool = False  # also run the step eagerly, traced (eager.json)
    try_streams: int = 0  # also capture over N streams, compared and timed (capture/streams.py)
    # a module glob: also capture with the modules it matches compiled (capture/compile.py)
    try_compile: Optional[str] = None

    def validate(self, where: str = "CaptureConfig") -> CaptureConfig:
        for f in fields(self):
            _check(f.name, getattr(self, f.name), where)
        return self


def mode_names() -> list[str]:
    """The registered model-file capture sources (``--mode`` choices; ``run`` takes a program,
    not a model file: it is ``graphscope run``'s)."""
    from .source import SOURCES

    if not SOURCES:  # the sources register when graphscope.capture is imported
        import graphscope.capture  # noqa: F401
    return sorted(n for n, s in SOURCES.items() if s.takes == "model")


_TYPES = {f.name: f.type for f in fields(CaptureConfig)}
ENV_PREFIX = "GRAPHSCOPE_"
_KEYS = {f.name for f in fields(CaptureConfig)}


_NON_NEGATIVE = ("warmup", "replays", "keep_events", "depth", "skip_replays", "counters",
                 "op_captures")
MAX_TRY_STREAMS = 16  # PyTorch hands out streams from a pool of 32 per priority


def _check(key: str, value: Any, where: str) -> Any:
    """The one validation of a config value, wherever it comes from; ``where`` (a file and
    line, an environment variable or the command line) starts the message."""
    if key not in _KEYS:
        raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(_KEYS))})")
    t = _TYPES[key]
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
        "Optional[int]": value is None or (isinstance(value, int) and not isinstance(value, bool)),
        "Optional[str]": value is None or isinstance(value, str),
    }.get(str(t), True)
    if not ok:
        raise ConfigError(f"{where}: key {key!r} must be {t}, not {type(value).__name__}")
    if key in _NON_NEGATIVE and value is not None and value < 0:
        raise ConfigError(f"{where}: {key} must be >= 0, not {value}")
    if key == "try_streams" and (value == 1 or not 0 <= value <= MAX_TRY_STREAMS):
        raise ConfigError(f"{where}: try_streams must be 0 (off) or 2..{MAX_TRY_STREAMS} "
                          f"streams, not {value}")
    if key == "try_compile" and value is not None and not value.strip():
        raise ConfigError(f"{where}: try_compile must be a module glob such as 'L.blocks.*', "
                          "not empty")
    if key == "mode" and value not in [*mode_names(), "run"]:  # run: graphscope run's
        raise ConfigError(f"{where}: mode must be one of {', '.join(mode_names())}, "
                          f"not {value!r}")
    if key == "graphs" and value is not None:
        import re

        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigError(f"{where}: graphs {value!r} is not a regular expression: "
                              f"{exc}") from None
    return value


def load_yaml(path: str) -> dict[str, Any]:
    """Read a graphscope.yaml; wrong keys or types name the file, line and key."""
    node, data = read_yaml(path, "config")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of option: value")
    lines = {}
    if node is not None and hasattr(node, "value"):
        for k, _ in node.value:
            lines[str(k.value)] = k.start_mark.line + 1  # the node's text: "1" for 1
    out = {}
    for k, v in data.items():
        key = str(k).replace("-", "_")
        out[key] = _all_captures(key, v)
        _check(key, out[key], f"{path}:{lines.get(str(k), '?')}")
    return out


def _all_captures(key: str, value: Any) -> Any:
    """``op_captures: all`` (as ``--op-captures all``): every capture, the 0 of the config."""
    if key == "op_captures" and isinstance(value, str) and value.strip().lower() == "all":
        return 0
    return value


def from_env(environ: Optional[dict[str, str]] = None) -> dict[str, Any]:
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for key in ("mode", "warmup", "replays", "depth", "entry", "skip_replays", "graphs",
                "try_streams", "try_compile", "op_captures"):
        raw = env.get(ENV_PREFIX + key.upper())
        if raw is None:
            continue
        t = str(_TYPES[key])
        try:
            v = _all_captures(key, raw)
            out[key] = int(v) if "int" in t and isinstance(v, str) else v
        except ValueError:
            raise ConfigError(f"${ENV_PREFIX}{key.upper()}={raw!r} is not an int") from None
        _check(key, out[key], f"${ENV_PREFIX}{key.upper()}")
    return out


def merge(*layers: dict[str, Any], where: str = "option") -> CaptureConfig:
    """Lowest precedence first; later layers win. ``None`` values never override. The YAML
    and environment layers are checked where they are read (naming file and line, or the
    variable); ``where`` names the rest (the command line)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for k, v in layer.items():
            if v is not None:
                merged[k] = _check(k, v, where)
    return CaptureConfig(**merged)
