"""Load a user's model file. This runs the user's code: only capture/annotate call it."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ._errors import ModelFileError

DEFAULT_ENTRY = "graphscope_model"


@dataclass
class ModelSpec:
    """What a model file's entry function returns, normalised."""

    model: Any
    args: tuple[Any, ...]
    loss: Optional[Callable[[Any], Any]] = None
    settings: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    sha256: str = ""
    entry: str = DEFAULT_ENTRY


def default_model_path() -> str:
    """The default sample model (sample_models/mlp.py in a checkout)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(here, "sample_models", "mlp.py")


def file_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load_model_file(path: str, entry: str = DEFAULT_ENTRY) -> ModelSpec:
    """Import ``path`` and call ``entry()``.

    The entry returns ``(model, args)``, ``(model, args, loss)`` or a dict with keys
    ``model``, ``args`` and optionally ``loss`` and ``settings``.
    """
    if not os.path.isfile(path):
        raise ModelFileError(f"{path}: no such model file")
    name = "graphscope_user_model_" + hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:8]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelFileError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    here = os.path.dirname(os.path.abspath(path))
    if here not in sys.path:  # as for `python model.py`: sibling modules import
        sys.path.insert(0, here)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ModelFileError(f"{path}: importing it raised {type(exc).__name__}: {exc}") from exc
    fn = getattr(module, entry, None)
    if not callable(fn):
        raise ModelFileError(
            f"{path}: defines no function `{entry}()`; define it to return (model, args) "
            "or pass --entry NAME"
        )
    try:
        got = fn()
    except Exception as exc:
        raise ModelFileError(f"{path}: {entry}() raised {type(exc).__name__}: {exc}") from exc
    spec_out = _normalise(got, path, entry)
    spec_out.path = os.path.abspath(path)
    spec_out.sha256 = file_sha256(path)
    spec_out.entry = entry
    return spec_out


def _normalise(got: Any, path: str, entry: str) -> ModelSpec:
    where = f"{path}: {entry}()"
    if isinstance(got, dict):
        unknown = set(got) - {"model", "args", "loss", "settings"}
        if unknown:
            raise ModelFileError(f"{where} returned unknown key(s): {', '.join(sorted(unknown))}")
        if "model" not in got or "args" not in got:
            raise ModelFileError(f"{where} must return a dict with 'model' and 'args'")
        model, args, loss, settings = got["model"], got["args"], got.get("loss"), got.get(
            "settings", {}
        )
    elif isinstance(got, tuple) and len(got) in (2, 3):
        model, args = got[0], got[1]
        loss = got[2] if len(got) == 3 else None
        settings = {}
    else:
        raise ModelFileError(
            f"{where} must return (model, args), (model, args, loss) or a dict, "
            f"not {type(got).__name__}"
        )
    if not callable(model):
        raise ModelFileError(f"{where}: model is not callable ({type(model).__name__})")
    if not isinstance(args, (tuple, list)):
        args = (args,)
    if loss is not None and not callable(loss):
        raise ModelFileError(f"{where}: loss is not callable")
    if not isinstance(settings, dict):
        raise ModelFileError(f"{where}: settings must be a dict")
    return ModelSpec(model=model, args=tuple(args), loss=loss, settings=dict(settings))
