"""graphscope run's traced replays: consecutive traced replays share one tracing window, and
CUPTI is detached as each window closes, after its synchronize (on the H200 an attached CUPTI,
its activity records once on, left later captures and eager launches ~20% slower:
bench/probes/after_trace_gpu.py; a detach put off to a later replay crashed the program's next
launch: tests/gpu/test_run_gpu.py::test_cupti_detached_while_the_program_replays_back_to_back).
Not while the program's torch.profiler runs: then it is made at the next replay or capture. The
tracer, the detach and the clock are faked here; the window logic and the patched replay are
real."""

import contextlib
import types

import pytest
import torch

from graphscope import native
from graphscope.capture.run import traced as T
from graphscope.capture.run.traced import TracedReplays


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
        monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: f.events.append("sync"))
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


def test_one_window_for_consecutive_traced_replays_detached_as_it_closes(fake, clock):
    f = fake()
    t = TracedReplays(_cfg(replays=2), [])
    a, b = _graph("a"), _graph("b")
    for g in (a, b, a, b, a, b):
        _replay(t, g, f.events)
    # the window closed at a's untraced replay: synchronized, the tracer stopped, then CUPTI
    # detached (nothing of the program's still running on the GPU)
    assert f.events == ["open", "replay a", "replay b", "replay a", "replay b", "sync",
                        "close", "sync", "detach", "plain a", "plain b"]
    _replay(t, a, f.events)  # once detached, replays pass untouched
    assert f.events[-1] == "plain a"
    facts = t.facts()
    assert facts["windows"] == 1 and facts["cupti_detached"] == 1
    assert "attached_at_end" not in facts and "not_detached" not in facts


def test_every_window_is_detached_after_it(fake, clock):
    """A serving loop mixing traced and untraced buckets: each window attaches CUPTI again
    (~15 ms on the H200) and detaches it as it closes."""
    f = fake()
    t = TracedReplays(_cfg(replays=3), [])
    done, fresh = _graph("done"), _graph("fresh")
    done.traced = 3  # its traced replays are over
    for _ in range(3):
        _replay(t, fresh, f.events)  # traced: opens a window
        clock.now += 0.01
        _replay(t, done, f.events)  # untraced: closes it
        clock.now += 0.01
    assert f.events.count("open") == 3 and f.events.count("detach") == 3
    assert t.facts()["windows"] == 3 and t.facts()["cupti_detached"] == 3


def test_a_capture_closes_the_window_and_detaches(fake, clock):
    f = fake()
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    t.close()  # what capture_begin does first
    assert f.events[-1] == "detach"
    t.settle()  # and then: nothing more is due
    assert f.events.count("detach") == 1 and "attached_at_end" not in t.facts()


def test_no_detach_while_the_programs_profiler_runs(fake, clock, monkeypatch):
    f = fake()
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    monkeypatch.setattr(T, "profiler_active", lambda: True)
    t.close()  # as BEFORE_PROFILER does when the program's profiler opens
    assert "detach" not in f.events and t.detach_at is not None  # still due
    assert t.facts()["attached_at_end"] is True  # the program could end there
    monkeypatch.setattr(T, "profiler_active", lambda: False)
    clock.now += 1
    t.settle()  # the program's next replay or capture, its profiler gone
    assert f.events[-1] == "detach" and t.facts()["cupti_detached"] == 1
    assert "attached_at_end" not in t.facts()


def test_why_cupti_stayed_attached_is_kept(fake, clock):
    f = fake("cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    t.close()
    facts = t.facts()
    assert facts["cupti_detached"] == 0 and "attached_at_end" not in facts
    assert facts["not_detached"].startswith("cuptiSubscribe")


def test_detach_can_be_turned_off(fake, clock, monkeypatch):
    monkeypatch.setenv("GRAPHSCOPE_CUPTI_DETACH", "0")
    f = fake()
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    t.close()
    t.settle()
    assert "detach" not in f.events
    assert t.facts()["not_detached"] == "GRAPHSCOPE_CUPTI_DETACH=0"
    assert "attached_at_end" not in t.facts()


def test_no_window_no_facts(fake):
    fake()
    assert TracedReplays(_cfg(), []).facts() == {}


def test_without_the_extension_detach_says_why(monkeypatch):
    monkeypatch.setattr(native.loader, "_ext", None)
    assert native.cupti_detach() == "the graphscope extension is not loaded"
