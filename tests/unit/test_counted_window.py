"""The light window of a counted capture that records no ops (graphscope.annotate.session's
counted_window, what ``graphscope run`` opens for a serving ladder's buckets past their op
captures): module and mark_kernels scopes by node counts with no per-window setup of backward
attribution, and a backward call inside it caught by the counter held for the batch. Counts
faked as in test_nodecount.py; tests/gpu/test_run_gpu.py runs the windows on real captures."""

import pytest
import torch

from graphscope import native
from graphscope.annotate.session import CountedSession, Session, backward_counter, counted_window
from graphscope.native import nodecount


def test_a_counted_window_notes_scopes_without_touching_autograd(ext):
    engine = torch.autograd._engine_run_backward
    with counted_window(nodecount.DEPS, fake=True) as out:
        assert type(native.active_session()) is CountedSession
        assert torch.autograd._engine_run_backward is engine  # nothing patched per window
        nodecount.attach(0)
        native.push_scope(5)
        ext.count_fake_nodes(2)
        native.push_scope(6)
        ext.count_fake_nodes(3)
        native.pop_scope()
        native.pop_scope()
    assert native.active_session() is None and not ext.counting()
    m = out[0]
    assert m.counts.tolist() == [0, 2, 3] and m.scopes.tolist() == [5, 6, -1]
    assert m.how == nodecount.DEPS and m.problem() == ""


def test_a_counted_window_refuses_to_open_inside_another_annotated_capture(ext):
    with counted_window(nodecount.WALK, fake=True):
        with pytest.raises(Exception, match="already running"):
            with counted_window(nodecount.WALK, fake=True):
                pass
    assert native.active_session() is None


def test_backward_inside_a_counted_window_is_counted_by_the_batch_counter(ext):
    engine = torch.autograd._engine_run_backward
    held = backward_counter()
    try:
        x = torch.ones(2, requires_grad=True)
        (x * 2).sum().backward()  # outside a window: not counted, nothing breaks
        with counted_window(nodecount.WALK, fake=True):
            (x * 2).sum().backward()
            torch.autograd.grad((x * 3).sum(), x)
            assert native.active_session().backward_calls == 2
        assert x.grad.tolist() == [4.0, 4.0]
    finally:
        held.remove()
    assert torch.autograd._engine_run_backward is engine


def test_a_full_session_inside_a_held_counter_puts_the_counter_back(ext):
    # the watch holds the counter for a batch and opens a full Session per op capture: the
    # session patches the same entry and must restore the counter, which the batch removes
    engine = torch.autograd._engine_run_backward
    held = backward_counter()
    counter = torch.autograd._engine_run_backward
    s = Session(False)
    native.open_session(s)
    try:
        s.enter()
        assert torch.autograd._engine_run_backward is not counter
        x = torch.ones(2, requires_grad=True)
        (x * 2).sum().backward()
        assert s.backward_calls == 1
    finally:
        s.exit()
        native.close_session()
    assert torch.autograd._engine_run_backward is counter
    held.remove()
    assert torch.autograd._engine_run_backward is engine
