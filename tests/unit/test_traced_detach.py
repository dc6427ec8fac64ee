"""graphscope run's traced replays: consecutive traced replays share one tracing window, and
CUPTI is detached once no window has been open for DETACH_AFTER_S, at the program's next replay
or capture (on the H200 an attached CUPTI, its activity records once on, left later captures and
eager launches ~20% slower: bench/probes/after_trace_gpu.py; attaching it again costs ~15 ms, so
not at every window). The tracer, the detach and the clock are faked here; the window logic and
the patched replay are real."""

import contextlib
import types

import pytest
import torch

from graphscope import native
from graphscope.capture.program import traced as T
from graphscope.capture.program.traced import DETACH_AFTER_S, TracedReplays


class Fake:
    def __init__(self, detach_answer=""):
        self.events = []
        self.detach_answer = detach_answer

    @contextlib.contextmanager
    def tracing(self):
        self.events.append("open")
        out = []
        yield out
        self.events.append("close")

    def cupti_detach(self):
        self.events.append("detach")
        return self.detach_answer


class Clock:
    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(T, "time", c)
    return c


@pytest.fixture
def fake(monkeypatch, clock):
    def make(detach_answer=""):
        f = Fake(detach_answer)
        monkeypatch.setattr(native, "tracing", f.tracing)
        monkeypatch.setattr(native, "cupti_detach", f.cupti_detach)
        monkeypatch.setattr(native, "tracer_active", lambda: False)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
        return f
    return make


def _cfg(replays=2):
    return types.SimpleNamespace(replays=replays, skip_replays=0, graphs=None, keep_events=False)


def _graph(name):
    return types.SimpleNamespace(raw=object(), traced=0, replays=0, name=name, untraced_why=None)


def _replay(t, g, events):
    """What the patched replay does with graph g (patch.py's replay)."""
    g.replays += 1
    if t.wanted(g):
        t.run(g, lambda: events.append(f"replay {g.name}"))
    else:
        t.close()
        events.append(f"plain {g.name}")
        if t.detach_at is not None:
            t.settle()


def test_one_window_for_consecutive_traced_replays_detached_once_quiet(fake, clock):
    f = fake()
    t = TracedReplays(_cfg(replays=2), [])
    a, b = _graph("a"), _graph("b")
    for g in (a, b, a, b, a, b):
        _replay(t, g, f.events)
    # the window closed at a's untraced replay; no detach yet (it waits for a quiet time)
    assert f.events == ["open", "replay a", "replay b", "replay a", "replay b", "close",
                        "plain a", "plain b"]
    clock.now += DETACH_AFTER_S
    _replay(t, a, f.events)
    assert f.events[-2:] == ["plain a", "detach"]
    _replay(t, b, f.events)  # once detached, replays pass untouched
    assert f.events[-1] == "plain b"
    facts = t.facts()
    assert facts["windows"] == 1 and facts["cupti_detached"] == 1
    assert "attached_at_end" not in facts and "not_detached" not in facts


def test_windows_close_together_cost_one_detach(fake, clock):
    """A serving loop mixing traced and untraced buckets: many windows, CUPTI kept attached
    between them (no ~15 ms attach per window), detached once the windows stop."""
    f = fake()
    t = TracedReplays(_cfg(replays=3), [])
    done, fresh = _graph("done"), _graph("fresh")
    done.traced = 3  # its traced replays are over
    for _ in range(3):
        _replay(t, fresh, f.events)  # traced: opens a window (or joins it)
        clock.now += 0.01
        _replay(t, done, f.events)  # untraced: closes it
        clock.now += 0.01
    assert f.events.count("open") == 3 and "detach" not in f.events
    clock.now += DETACH_AFTER_S
    _replay(t, done, f.events)
    assert f.events.count("detach") == 1
    assert t.facts()["windows"] == 3 and t.facts()["cupti_detached"] == 1


def test_a_capture_after_quiet_detaches_and_one_right_after_does_not(fake, clock):
    f = fake()
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    t.close()  # what capture_begin does first
    t.settle()
    assert "detach" not in f.events  # a capture right after the window: CUPTI stays
    clock.now += DETACH_AFTER_S + 1
    t.settle()
    assert f.events[-1] == "detach"


def test_ending_right_after_the_last_window_says_so(fake, clock):
    f = fake()
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    t.close()
    facts = t.facts()
    assert facts["attached_at_end"] is True and facts["cupti_detached"] == 0


def test_no_detach_while_the_programs_profiler_runs(fake, clock, monkeypatch):
    f = fake()
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    t.close()  # as BEFORE_PROFILER does when the program's profiler opens
    clock.now += DETACH_AFTER_S
    monkeypatch.setattr(T, "profiler_active", lambda: True)
    t.settle()
    assert "detach" not in f.events and t.detach_at is not None  # still due
    monkeypatch.setattr(T, "profiler_active", lambda: False)
    t.settle()
    assert f.events[-1] == "detach" and t.facts()["cupti_detached"] == 1


def test_why_cupti_stayed_attached_is_kept(fake, clock):
    f = fake("cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    t.close()
    clock.now += DETACH_AFTER_S
    t.settle()
    facts = t.facts()
    assert facts["cupti_detached"] == 0 and "attached_at_end" not in facts
    assert facts["not_detached"].startswith("cuptiSubscribe")


def test_detach_can_be_turned_off(fake, clock, monkeypatch):
    monkeypatch.setenv("GRAPHSCOPE_CUPTI_DETACH", "0")
    f = fake()
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    t.close()
    clock.now += DETACH_AFTER_S
    t.settle()
    assert "detach" not in f.events
    assert t.facts()["not_detached"] == "GRAPHSCOPE_CUPTI_DETACH=0"
    assert "attached_at_end" not in t.facts()


def test_no_window_no_facts(fake):
    fake()
    assert TracedReplays(_cfg(), []).facts() == {}


def test_without_the_extension_detach_says_why(monkeypatch):
    monkeypatch.setattr(native, "_ext", None)
    assert native.cupti_detach() == "the graphscope extension is not loaded"
