"""Regular expressions from users (``--graph``, ``--filter``), matched in bounded time.

Python's ``re`` backtracks: ``(a+)+$`` against a long name takes exponential time. Two guards
(the linear-time ``re2``/``regex``-with-timeout engines are not dependencies):

1. at compile time, patterns whose time can explode are refused with a one-line error: a
   repeat inside a repeat (``(a+)+``, ``(a*)*``, ``(\\w+\\s?)*``) and backreferences;
2. the matching itself runs under a wall-clock budget (``SIGALRM``, which the ``re`` engine
   honours between steps): what is left (``.*.*.*x`` on huge names) ends in a one-line error
   instead of a hang. Off the main thread only the first guard applies.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import signal
import threading
from collections.abc import Iterator
from typing import Any, Optional

from .._errors import GraphscopeError

MATCH_SECONDS = 5.0  # all the matching of one pattern, e.g. against 100,000 graph names
MAX_PATTERN = 1000

try:  # Python 3.11+ (sre_parse warns there); 3.9 and 3.10 have only sre_parse
    _c: Any = importlib.import_module("re._constants")
    _p: Any = importlib.import_module("re._parser")
except ImportError:  # pragma: no cover - Python < 3.11
    _c = importlib.import_module("sre_constants")
    _p = importlib.import_module("sre_parse")


class RegexError(GraphscopeError):
    """A user's pattern that is not a regex, or one that could take unbounded time."""


def _walk(items: Any, in_repeat: bool, what: str) -> None:
    for op, av in items:
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT) or op is getattr(_c, "POSSESSIVE_REPEAT", None):
            lo, hi, sub = av
            many = hi > 1
            if many and in_repeat:
                raise RegexError(f"{what}: a repeat inside a repeat (like (a+)+) can take "
                                 "exponential time: simplify the pattern")
            _walk(sub, in_repeat or many, what)
        elif op in (_c.GROUPREF, getattr(_c, "GROUPREF_EXISTS", None)):
            raise RegexError(f"{what}: backreferences are not supported")
        elif op is _c.SUBPATTERN:
            _walk(av[-1], in_repeat, what)
        elif op is _c.BRANCH:
            for sub in av[1]:
                _walk(sub, in_repeat, what)
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            _walk(av[1], in_repeat, what)
        elif op is getattr(_c, "ATOMIC_GROUP", None):
            _walk(av, in_repeat, what)


def compile_user_regex(pattern: str, what: str) -> re.Pattern[str]:
    """``pattern`` compiled, or a one-line :class:`RegexError` naming ``what`` (the option)."""
    if len(pattern) > MAX_PATTERN:
        raise RegexError(f"{what}: the pattern is longer than {MAX_PATTERN} characters")
    try:
        rx = re.compile(pattern)
        _walk(_p.parse(pattern), False, what)
    except re.error as exc:
        raise RegexError(f"{what}: not a valid regex: {exc}") from None
    except RecursionError:
        raise RegexError(f"{what}: the pattern is nested too deeply") from None
    return rx


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(what: str, seconds: Optional[float] = None) -> Iterator[None]:
    """Matching inside the block ends in a one-line error after ``seconds`` (default
    :data:`MATCH_SECONDS`)."""
    seconds = MATCH_SECONDS if seconds is None else seconds
    if threading.current_thread() is not threading.main_thread() or not hasattr(
            signal, "setitimer"):
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Timeout:
        raise RegexError(f"{what}: matching took more than {seconds:g} s (a pattern that "
                         "backtracks): simplify it") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
