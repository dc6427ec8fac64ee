"""An annotated session without a GPU: the recorder is replaced, everything else is real.

The scope stack, slots and ownership logic run in the real extension and torch's real
autograd engine; only CUPTI (which needs a GPU) is absent. What a CUPTI callback would store
for a node is what ``native.current_scope()`` returns when the kernel would launch.
"""

import contextlib

from graphscope import annotate as A
from graphscope import native


@contextlib.contextmanager
def fake_session(record_ops=False):
    s = A.Session(record_ops)
    native.open_session(s)
    try:
        s.enter()
        yield s
    finally:
        try:
            s.exit()
        finally:
            native.close_session()


def current():
    """The merged annotation a node created right now would get."""
    return dict(A.TABLES.scopes.annotation(native.current_scope()))
