"""The tensors in a value and their storages: one walk for every place that looks through
op arguments or a model's inputs and outputs (training-step buckets, capture's loss and static
input/output bytes, ``--try-streams``'s plan and output comparison)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 32


def tensors_in(x: Any) -> list[Any]:
    """The tensors in ``x``, in order: a tensor, tuples/lists, mappings (Hugging Face's
    ``ModelOutput`` is one) and dataclass instances, nested up to MAX_DEPTH."""
    import torch

    out: list[Any] = []

    def walk(v: Any, depth: int) -> None:
        if depth > MAX_DEPTH:
            return
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif type(v) is tuple or type(v) is list:  # before the ABC check: the usual case
            for e in v:
                walk(e, depth + 1)
        elif isinstance(v, Mapping):
            for e in v.values():
                walk(e, depth + 1)
        elif isinstance(v, (tuple, list)):
            for e in v:
                walk(e, depth + 1)
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            for f in dataclasses.fields(v):
                walk(getattr(v, f.name, None), depth + 1)

    walk(x, 0)
    return out


def storage_key(t: Any) -> int:
    """The base address of ``t``'s storage (views share it); 0 where it has none."""
    try:
        return int(t.untyped_storage().data_ptr())
    except Exception:  # no storage: a nested, sparse or functional tensor
        return 0
