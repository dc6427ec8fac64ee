"""Scope ids and their merged annotation dicts (MK4, MK6, MK12).

A scope pushes an id on the native per-thread stack; CUPTI's GRAPHNODE_CREATED callback stores
the innermost id with the new node (O(1) per node, whatever the nesting depth, and from any
capturing stream). Scope ids index the :class:`ScopeTable` (``TABLES.scopes``,
annotate/tables.py), which keeps each id's merged dict, so nothing is merged per node.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Optional, Union

from .._errors import AnnotationError

PHASE_KEY = "autograd_phase"
MODULE_KEY = "module_name"
Annotation = Union[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Scope:
    """One interned scope: its merged forward dict and the scope its backward work gets."""

    annotation: Mapping[str, Any]
    backward_scope: int  # -1: autograd nodes created here are not annotated in backward
    is_backward: bool
    plain: dict[str, Any] = field(compare=False, repr=False)  # what ``annotation`` shows

    @classmethod
    def of(cls, merged: dict[str, Any], backward_scope: int, is_backward: bool) -> Scope:
        """A scope over ``merged`` (which nobody changes afterwards)."""
        return cls(MappingProxyType(merged), backward_scope, is_backward, merged)


class ScopeTable:
    """scope id -> merged annotation. Interned by (parent, annotation, backward)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._scopes: list[Scope] = []
        self._index: dict[tuple[int, bytes, bool], int] = {}
        # called with (scope id, its backward scope id) for every new scope (the native
        # observer keeps that table for backward attribution: annotate/backward.py)
        self.listener: Optional[Callable[[int, int], None]] = None

    def __len__(self) -> int:
        return len(self._scopes)

    def __getitem__(self, scope_id: int) -> Scope:
        return self._scopes[scope_id]

    def annotation(self, scope_id: int) -> Mapping[str, Any]:
        return self._scopes[scope_id].annotation if scope_id >= 0 else {}

    def plain(self, scope_id: int) -> dict[str, Any]:
        """The scope's merged dict itself, not a copy: read it, never change it."""
        return self._scopes[scope_id].plain if scope_id >= 0 else {}

    def _add(self, key: tuple[int, bytes, bool], make: Any) -> int:
        with self._lock:
            sid = self._index.get(key)
            if sid is None:
                sid = len(self._scopes)
                self._scopes.append(make(sid))
                self._index[key] = sid
                if self.listener is not None:
                    self.listener(sid, self._scopes[sid].backward_scope)
            return sid

    def child(
        self, parent: int, ann: Mapping[str, Any], backward: bool = True,
        frozen: Optional[bytes] = None,
    ) -> int:
        """The scope opened with ``ann`` inside ``parent`` (MK4: inner wins shared keys).

        ``frozen`` is ``pickle.dumps(ann)`` when the caller has it (the interning key).
        """
        key = (parent, frozen if frozen is not None else _freeze(ann), backward)
        sid = self._index.get(key)
        if sid is not None:
            return sid
        p = self._scopes[parent] if parent >= 0 else None
        fwd = {**(p.annotation if p else {}), **ann}
        if p is not None and p.is_backward:
            # A forward scope opened while backward runs: checkpoint recomputation (MK8).
            fwd["recompute"] = True
        base_bwd = self.annotation(p.backward_scope) if p and p.backward_scope >= 0 else None
        if backward:
            bsid = self.backward({**(base_bwd or {}), **ann, PHASE_KEY: "backward"})  # MK6
        elif base_bwd is not None:
            bsid = self.backward(dict(base_bwd))
        else:
            bsid = -1
        in_bwd = bool(p and p.is_backward)
        return self._add(key, lambda sid: Scope.of(fwd, bsid, in_bwd))

    def lookup(self, parent: int, frozen: bytes, backward: bool) -> Optional[int]:
        """The scope :meth:`child` made for (parent, pickled annotation, backward), if any."""
        return self._index.get((parent, frozen, backward))

    def backward(self, ann: Mapping[str, Any]) -> int:
        """A scope pushed while a hooked autograd node executes; nodes made there inherit it."""
        key = (-2, _freeze(ann), True)
        return self._add(key, lambda sid: Scope.of(dict(ann), sid, True))

    def with_base(self, scope_id: int, base: Mapping[str, Any]) -> int:
        """``scope_id``'s dict laid over ``base`` (mark_stream: the stream dict is outermost)."""
        s = self._scopes[scope_id] if scope_id >= 0 else None
        merged = {**base, **(s.annotation if s else {})}
        key = (-3 - scope_id, _freeze(merged), True)
        bwd = s.backward_scope if s else -1
        return self._add(
            key, lambda sid: Scope.of(merged, bwd, bool(s and s.is_backward))
        )


def _freeze(ann: Mapping[str, Any]) -> bytes:
    return pickle.dumps(sorted(ann.items()), protocol=4)



_STR_ANNOTATIONS: dict[str, tuple[dict[str, Any], bytes]] = {}


def normalize(annotation: Annotation, what: str = "mark_kernels") -> tuple[dict[str, Any], bytes]:
    """MK12: a str ``s`` is ``{"name": s}``; keys must be str and values must pickle.

    Returns the dict and its pickle (the scope-interning key).
    """
    if isinstance(annotation, str):
        hit = _STR_ANNOTATIONS.get(annotation)
        if hit is None:
            hit = ({"name": annotation}, pickle.dumps({"name": annotation}, protocol=4))
            if len(_STR_ANNOTATIONS) < 4096:
                _STR_ANNOTATIONS[annotation] = hit
        return dict(hit[0]), hit[1]
    if isinstance(annotation, Mapping):
        ann: dict[str, Any] = dict(annotation)
    else:
        raise AnnotationError(
            f"{what}: annotation must be a str or a dict, not {type(annotation).__name__}"
        )
    for k in ann:
        if not isinstance(k, str):
            raise AnnotationError(f"{what}: annotation key {k!r} is not a str")
    try:
        return ann, pickle.dumps(ann, protocol=4)
    except Exception:
        pass
    for k, v in ann.items():  # find the culprit for the message
        why = _pickle_error(v)
        if why is not None:
            raise AnnotationError(
                f"{what}: value of annotation key {k!r} ({type(v).__name__}) cannot be "
                f"pickled: {why}"
            )
    raise AnnotationError(f"{what}: annotation cannot be pickled")


def _pickle_error(v: Any) -> Optional[str]:
    try:
        pickle.dumps(v, protocol=4)
    except Exception as exc:
        return str(exc)
    return None
