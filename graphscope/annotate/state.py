"""The one piece of mutable state the hooks read: the annotated capture being recorded.

``ACTIVE`` is set by :func:`graphscope.annotate.session.session` for exactly the window in
which the CUPTI recorder holds its subscription; every hook (module, autograd, optimizer) is
inert while it is None.
"""

from __future__ import annotations

from typing import Any

ACTIVE: Any = None  # the running graphscope.annotate.session.Session, or None

# A DDPWatch (annotate/training.py) the next annotated captures place DDP's reducer work with;
# set by the capture source around the capture.
DDP: Any = None
