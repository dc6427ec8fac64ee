"""Module-FQN scopes through *global* module hooks (per-module hooks would trip CG5): the
registered modules' annotations and the two hooks that open and close their scopes inside an
annotated capture window (the rule that names modules is :mod:`.modules`)."""

from __future__ import annotations

import threading
import weakref
from typing import Any, Optional

from .. import native


class ModuleHooks:
    """The modules ``register_module_annotations`` tagged, and the global hooks serving them
    (installed while any module is registered)."""

    def __init__(self) -> None:
        # module -> (annotation, its pickle, backward)
        self.names: weakref.WeakKeyDictionary[Any, tuple[dict[str, Any], bytes, bool]] = (
            weakref.WeakKeyDictionary()
        )
        self.handles: list[Any] = []
        self.local = threading.local()  # per thread: the session each open call pushed in

    def install(self) -> None:
        if self.handles:
            return
        from torch.nn.modules import module as m

        self.handles = [
            m.register_module_forward_pre_hook(self.pre),
            m.register_module_forward_hook(self.post, always_call=True),
        ]

    def uninstall_if_idle(self) -> None:
        if not len(self.names) and self.handles:
            for h in self.handles:
                h.remove()
            self.handles = []

    def _stack(self) -> list[Optional[Any]]:
        stack: list[Optional[Any]] = self.local.__dict__.setdefault("pushed", [])
        return stack

    def pre(self, module: Any, args: Any) -> None:
        entry = self.names.get(module)
        session = native.active_session() if entry is not None else None
        if session is not None:
            assert entry is not None
            session.open_scope(entry[0], entry[2], entry[1])
        self._stack().append(session)

    def post(self, module: Any, args: Any, output: Any) -> None:
        stack = self._stack()
        session = stack.pop() if stack else None
        if session is not None:
            session.close_scope()
