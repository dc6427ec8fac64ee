"""Op ids and what they stand for: the aten op that launched a node, its input shapes and the
user's source line (:class:`OpRecord`), and an op call's device memory (:class:`OpCall`). Ids
below ``OP_BASE`` are interned here (the dispatch mode, Triton launches); the native op
observer (csrc/opwatch.cpp) keeps its own rows from ``OP_BASE`` on."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Optional, Union

from .. import native

OP_BASE = 1 << 40  # the native observer's first id (csrc/opwatch.cpp kOpBase)
CALL_BASE = 2 << 40  # the native observer's op calls with memory (kCallBase)
PY_CALL_BASE = 3 << 40  # the dispatch mode's op calls with memory


@dataclass(frozen=True)
class OpRecord:
    """The aten op that launched a node, its inputs and the user's source line."""

    op: str
    shapes: str
    source: Optional[str]


Ranges = tuple[tuple[int, int], ...]  # [start, end) device byte ranges


@dataclass(frozen=True)
class OpCall:
    """One op call of a capture: its record and the device memory it read and wrote (its
    tensor arguments' spans; ``(a!)`` arguments, i.e. in-place and ``out=``, and the outputs
    are writes)."""

    op: str
    shapes: str
    source: Optional[str]
    reads: Ranges
    writes: Ranges


def _pairs(flat: Any) -> Ranges:
    return tuple(sorted(set(zip(flat[0::2], flat[1::2]))))


class OpTable:
    """Op ids -> records. Ids below ``OP_BASE`` are interned here (the dispatch mode, Triton
    launches); ``OP_BASE + i`` is row ``i`` of the native observer's table (csrc/opwatch.cpp)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: list[OpRecord] = []
        self._index: dict[OpRecord, int] = {}
        self._native: list[OpRecord] = []
        # op calls with memory: [op id, reads, writes] (flat [s0, e0, ...]); the dispatch
        # mode's (ids from PY_CALL_BASE) and the native observer's (from CALL_BASE), cached
        self._py_calls: list[tuple[int, list[int], list[int]]] = []
        self._native_calls: list[tuple[int, list[int], list[int]]] = []

    def __getitem__(self, op_id: int) -> Union[OpRecord, OpCall]:
        rec = self.get(op_id)
        if rec is None:
            raise KeyError(op_id)
        return rec

    def __len__(self) -> int:
        return len(self._ops)

    def records(self) -> list[OpRecord]:
        """Every record so far: the interned ones, then the native observer's."""
        self._sync_native()
        return self._ops + self._native

    def _sync_native(self) -> None:
        obs = native.op_observer()
        if obs is not None:
            self._native.extend(OpRecord(*row) for row in obs.table(len(self._native)))

    def new_call(self, op_id: int) -> tuple[int, list[int], list[int]]:
        """A dispatch-mode op call of ``op_id``: its id and the (reads, writes) lists to fill."""
        reads: list[int] = []
        writes: list[int] = []
        with self._lock:
            self._py_calls.append((op_id, reads, writes))
            return PY_CALL_BASE + len(self._py_calls) - 1, reads, writes

    def _call(self, call_id: int) -> Optional[tuple[int, list[int], list[int]]]:
        if call_id >= PY_CALL_BASE:
            i = call_id - PY_CALL_BASE
            return self._py_calls[i] if i < len(self._py_calls) else None
        i = call_id - CALL_BASE
        if i >= len(self._native_calls):
            obs = native.op_observer()
            if obs is not None:
                self._native_calls.extend(obs.calls(len(self._native_calls)))
        return self._native_calls[i] if i < len(self._native_calls) else None

    def get(self, op_id: int) -> Optional[Union[OpRecord, OpCall]]:
        """The record of ``op_id`` (an :class:`OpCall` for a call id), or None for -1 and
        unknown ids."""
        if op_id >= CALL_BASE:
            call = self._call(op_id)
            rec = self.get(call[0]) if call is not None else None
            if call is None or not isinstance(rec, OpRecord):
                return None
            return OpCall(rec.op, rec.shapes, rec.source, _pairs(call[1]), _pairs(call[2]))
        if 0 <= op_id < len(self._ops):
            return self._ops[op_id]
        i = op_id - OP_BASE
        if i < 0:
            return None
        if i >= len(self._native):
            self._sync_native()
        return self._native[i] if i < len(self._native) else None

    def intern(self, rec: OpRecord) -> int:
        oid = self._index.get(rec)
        if oid is not None:
            return oid
        with self._lock:
            oid = self._index.setdefault(rec, len(self._ops))
            if oid == len(self._ops):
                self._ops.append(rec)
            return oid

