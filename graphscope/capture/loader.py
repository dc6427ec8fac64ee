"""Load a user's model file. This runs the user's code: only capture/annotate call it."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .._errors import ModelFileError

DEFAULT_ENTRY = "graphscope_model"


@dataclass
class ModelSpec:
    """What a model file's entry function returns, normalised."""

    model: Any
    args: tuple[Any, ...]
    loss: Optional[Callable[[Any], Any]] = None
    settings: dict[str, Any] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)
    # input sets, each (args, kwargs): one graph each in --mode forward; () = just args/kwargs
    buckets: tuple[tuple[tuple[Any, ...], dict[str, Any]], ...] = ()
    step: Optional[Callable[..., Any]] = None  # the user's whole step: step(model, *a, **kw)
    path: str = ""
    sha256: str = ""
    entry: str = DEFAULT_ENTRY


def default_model_path() -> str:
    """The default sample model: sample_models/mlp.py at the root of the checkout this
    module lies in (graphscope/capture/loader.py: three directories up)."""
    here = os.path.abspath(__file__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    return os.path.join(root, "sample_models", "mlp.py")


def model_path(model: Optional[str]) -> str:
    """The model file a command runs: MODEL, or the sample MLP of a checkout. A pip install
    has no sample_models/: then the user must name a file, and the error says how."""
    path = model or default_model_path()
    if not model and not os.path.isfile(path):
        raise ModelFileError("no MODEL given, and the default sample model (sample_models/"
                             "mlp.py) comes with a source checkout only: pass a model file "
                             "that defines graphscope_model() (docs/model-files.md)")
    return path


def check_model_file(path: str) -> None:
    """A model file that is not there (or is a directory) refused with one line."""
    if not os.path.isfile(path):
        raise ModelFileError(f"{path}: " + ("a directory, not a model file"
                                            if os.path.isdir(path) else "no such model file"))


def file_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load_model_file(path: str, entry: str = DEFAULT_ENTRY) -> ModelSpec:
    """Import ``path`` and call ``entry()``.

    The entry returns ``(model, args)``, ``(model, args, loss)`` or a dict with keys
    ``model`` and ``args`` (or ``buckets``: several input sets) and optionally ``kwargs``,
    ``loss``, ``step`` and ``settings``.
    """
    check_model_file(path)
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
        found = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_")
                       and getattr(v, "__module__", None) == name and not isinstance(v, type))
        hint = ("define it to return (model, args) or pass --entry NAME" if entry == DEFAULT_ENTRY
                else "pass --entry with one of the file's functions"
                + (f" ({', '.join(found[:8])})" if found else ""))
        raise ModelFileError(f"{path}: defines no function `{entry}()`; {hint}")
    try:
        got = fn()
    except Exception as exc:
        raise ModelFileError(f"{path}: {entry}() raised {type(exc).__name__}: {exc}") from exc
    spec_out = _normalise(got, path, entry)
    spec_out.path = os.path.abspath(path)
    spec_out.sha256 = file_sha256(path)
    spec_out.entry = entry
    return spec_out


_KEYS = ("model", "args", "kwargs", "buckets", "loss", "step", "settings")


def _input_set(x: Any, where: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """One input set: positional args (a tuple/list, or one value), or a dict with ``args``
    and/or ``kwargs``."""
    if isinstance(x, dict) and set(x) <= {"args", "kwargs"} and x:
        args, kwargs = x.get("args", ()), x.get("kwargs", {})
    else:
        args, kwargs = x, {}
    if not isinstance(args, (tuple, list)):
        args = (args,)
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise ModelFileError(f"{where}: kwargs must be a dict of str keys")
    return tuple(args), dict(kwargs)


def _normalise(got: Any, path: str, entry: str) -> ModelSpec:
    where = f"{path}: {entry}()"
    kwargs: Any = {}
    buckets: Any = None
    step: Any = None
    if isinstance(got, dict):
        unknown = set(got) - set(_KEYS)
        if unknown:
            raise ModelFileError(f"{where} returned unknown key(s): {', '.join(sorted(unknown))}"
                                 f" (known: {', '.join(_KEYS)})")
        if "model" not in got or ("args" not in got and "buckets" not in got):
            raise ModelFileError(f"{where} must return a dict with 'model' and 'args' "
                                 "(or 'buckets')")
        if "args" in got and "buckets" in got:
            raise ModelFileError(f"{where}: give 'args' or 'buckets', not both")
        model, args, loss, settings = got["model"], got.get("args", ()), got.get("loss"), \
            got.get("settings", {})
        kwargs, buckets, step = got.get("kwargs", {}), got.get("buckets"), got.get("step")
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
    if loss is not None and not callable(loss):
        raise ModelFileError(f"{where}: loss is not callable")
    if step is not None and not callable(step):
        raise ModelFileError(f"{where}: step is not callable ({type(step).__name__})")
    if not isinstance(settings, dict):
        raise ModelFileError(f"{where}: settings must be a dict")
    if not isinstance(kwargs, dict):
        raise ModelFileError(f"{where}: kwargs must be a dict, not {type(kwargs).__name__}")
    sets: tuple[tuple[tuple[Any, ...], dict[str, Any]], ...] = ()
    if buckets is not None:
        if not isinstance(buckets, (list, tuple)) or not buckets:
            raise ModelFileError(f"{where}: buckets must be a non-empty list of input sets")
        sets = tuple(_input_set(b, f"{where} buckets[{i}]") for i, b in enumerate(buckets))
        if kwargs:  # shared keyword inputs go to every bucket
            sets = tuple((a, {**kwargs, **kw}) for a, kw in sets)
        args, kwargs = sets[0]
    else:
        args, kwargs = _input_set({"args": args, "kwargs": kwargs} if kwargs else args, where)
    return ModelSpec(model=model, args=tuple(args), loss=loss, settings=dict(settings),
                     kwargs=dict(kwargs), buckets=sets, step=step)
