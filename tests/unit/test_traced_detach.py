"""graphscope run's traced replays: consecutive traced replays share one tracing window, and
CUPTI is detached as each window closes (on the H200 an attached CUPTI, its activity records once
on, left later captures and eager launches ~20% slower: bench/probes/after_trace_gpu.py). The
tracer and the detach are faked here; the window logic is real."""

import contextlib
import types

import pytest
import torch

from graphscope import native
from graphscope.capture.program.traced import TracedReplays


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


@pytest.fixture
def fake(monkeypatch):
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
    """What the patched replay does with graph g."""
    g.replays += 1
    if t.wanted(g):
        t.run(g, lambda: events.append(f"replay {g.name}"))
    else:
        t.close()
        events.append(f"plain {g.name}")


def test_one_window_for_consecutive_traced_replays_then_detached(fake):
    f = fake()
    t = TracedReplays(_cfg(replays=2), [])
    a, b = _graph("a"), _graph("b")
    for g in (a, b, a, b, a, b):
        _replay(t, g, f.events)
    assert f.events == ["open", "replay a", "replay b", "replay a", "replay b", "close",
                        "detach", "plain a", "plain b"]
    assert t.facts() == {"windows": 1, "open_s": t.facts()["open_s"], "cupti_detached": 1,
                         "detach_s": t.facts()["detach_s"]}


def test_each_window_is_detached_after_it_closes(fake):
    f = fake()
    t = TracedReplays(_cfg(replays=1), [])
    a, b = _graph("a"), _graph("b")
    for g in (a, a, b):  # a traced, a plain (closes), b traced (a second window)
        _replay(t, g, f.events)
    t.close()
    assert f.events == ["open", "replay a", "close", "detach", "plain a", "open", "replay b",
                        "close", "detach"]
    assert t.facts()["windows"] == 2 and t.facts()["cupti_detached"] == 2


def test_why_cupti_stayed_attached_is_kept(fake):
    f = fake("cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    t.close()
    facts = t.facts()
    assert facts["cupti_detached"] == 0
    assert facts["not_detached"].startswith("cuptiSubscribe")


def test_detach_can_be_turned_off(fake, monkeypatch):
    monkeypatch.setenv("GRAPHSCOPE_CUPTI_DETACH", "0")
    f = fake()
    t = TracedReplays(_cfg(replays=1), [])
    _replay(t, _graph("a"), f.events)
    t.close()
    assert "detach" not in f.events
    assert t.facts()["not_detached"] == "GRAPHSCOPE_CUPTI_DETACH=0"


def test_no_window_no_facts(fake):
    fake()
    assert TracedReplays(_cfg(), []).facts() == {}


def test_without_the_extension_detach_says_why(monkeypatch):
    monkeypatch.setattr(native, "_ext", None)
    assert native.cupti_detach() == "the graphscope extension is not loaded"
