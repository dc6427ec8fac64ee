"""The extension and its door on a machine without a GPU."""

import os
import subprocess
import sys

import pytest

from graphscope import _errors, native
from graphscope.capture import capabilities


def test_import_does_not_import_torch_or_need_a_gpu():
    r = subprocess.run([sys.executable, "-c",
                        "import sys, graphscope; import graphscope.cli.main;"
                        "print('torch' in sys.modules)"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_scope_stack_is_per_thread_and_slot_is_retired():
    import threading

    ext = native.extension()
    ext.push_scope(5)
    other = []
    t = threading.Thread(target=lambda: other.append(ext.current_scope()))
    t.start()
    t.join()
    assert other == [-1] and ext.current_scope() == 5
    assert ext.pop_scope() == 5 and ext.current_scope() == -1
    ext.set_slot(9)
    assert ext.current_scope() == 9
    ext.push_scope(3)
    assert ext.current_scope() == 3  # a pushed scope beats the slot
    ext.pop_scope()
    ext.retire_slots()
    assert ext.current_scope() == -1


def test_probe_without_gpu_says_why():
    caps = capabilities.probe(try_subscribe=True)
    if caps.can_capture:
        pytest.skip("this machine has a GPU")
    assert caps.extension
    assert not caps.can_capture and caps.problems
    assert caps.details["header_cupti_api_version"] >= 130000


@pytest.mark.parametrize(
    ("raw", "cls", "text"),
    [
        ("cupti:39:cuptiSubscribe: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (holder: kineto)",
         _errors.CuptiSubscriberError, "torch.profiler already ran in this process"),
        ("cupti:35:cuptiSubscribe: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
         _errors.CuptiPrivilegesError, "NVreg_RestrictProfilingToAdminUsers=0"),
        ("cupti:1:cuptiActivityEnable: CUPTI_ERROR_INVALID_PARAMETER", _errors.CuptiError,
         "cuptiActivityEnable"),
        ("notloaded:0:libcupti/libcuda not loaded", _errors.NativeUnavailableError, "not loaded"),
        ("plain message", _errors.GraphscopeError, "plain message"),
    ],
)
def test_cupti_errors_become_actionable_graphscope_errors(raw, cls, text):
    err = native.translate(RuntimeError(raw))
    assert type(err) is cls and text in str(err)
    if cls is _errors.CuptiSubscriberError:
        assert "holder: kineto" in str(err) and "fresh process" in str(err)


def test_demangle():
    assert native.demangle("_ZN2at6native3fooEv") == "at::native::foo()"


def test_no_gpu_error_before_touching_cupti():
    caps = capabilities.probe(try_subscribe=False)
    if caps.gpu:
        pytest.skip("this machine has a GPU")
    with pytest.raises(_errors.NoGPUError):
        native.ensure_loaded()


def test_a_torch_profiler_session_counts_as_active_from_start_to_stop():
    """graphscope's tracer and recorder must stay off CUPTI for a whole torch.profiler session:
    also in a schedule's wait and warm-up steps, when torch.profiler is not "enabled" yet but
    Kineto holds (or is about to take) CUPTI's activity API. On the H200, one replay traced in
    a warm-up step left the program's own trace without a GPU event."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    native.watch_profiler()
    native.watch_profiler()  # idempotent
    seen = []
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=1)) as prof:
        for _ in range(5):  # wait, warm-up, active, active, done
            torch.ones(4).sum()
            seen.append((native.profiler_active(),
                         bool(torch.autograd.profiler._is_profiler_enabled)))
            prof.step()
    assert [s[0] for s in seen] == [True] * 5
    assert seen[0][1] is False  # what torch itself says in the wait step
    assert native.profiler_active() is False
    prof2 = profile(activities=[ProfilerActivity.CPU])
    prof2.start()
    assert native.profiler_active()
    prof2.stop()
    assert not native.profiler_active()
    broken = profile(activities=[ProfilerActivity.CPU])
    broken._transit_action = lambda *a: 1 / 0  # its start raises: it never opened
    with pytest.raises(ZeroDivisionError):
        broken.start()
    assert not native.profiler_active()


class _FakeRecorder:
    """The extension's recorder calls, noted (no CUPTI here)."""

    def __init__(self):
        self.calls = []
        self.active = self.held = False

    def recorder_start(self, clear, held=False):
        assert not self.active, "subscribed twice"
        self.active, self.held = True, held
        self.calls.append("subscribe")

    def recorder_stop(self):
        self.active = False
        self.calls.append("unsubscribe")

    def recorder_gate(self, open):
        self.calls.append("gate open" if open else "gate shut")

    def recorder_clear(self):
        self.calls.append("clear")

    def recorder_active(self):
        return self.active

    def recorder_held(self):
        return self.active and self.held


def test_the_held_recorder_subscribes_once_per_batch_and_lets_go_before_a_profiler(
        monkeypatch):
    """graphscope run keeps CUPTI's one subscription across a capture loop (subscribing per
    capture cost ~0.5 ms each on the H200); between windows the callbacks record nothing, and
    the subscription is let go before torch.profiler (Kineto) or any other recording starts."""
    from graphscope.native import recorder

    fake = _FakeRecorder()
    monkeypatch.setattr(recorder, "ensure_loaded", lambda: fake)
    monkeypatch.setattr(recorder, "extension", lambda: fake)
    monkeypatch.setattr(recorder, "_ext", fake)
    monkeypatch.setattr(recorder, "records", lambda: "records")
    held = native.HeldRecorder()
    # WHEN three capture windows run through it
    outs = []
    for _ in range(3):
        with held.window() as out:
            assert fake.calls[-1] in ("subscribe", "gate open")
        outs.append(out)
    # THEN one subscription, each window's records taken and cleared, the gate shut between
    assert fake.calls.count("subscribe") == 1 and "unsubscribe" not in fake.calls
    assert outs == [["records"]] * 3
    assert fake.calls[1:4] == ["gate shut", "clear", "clear"]
    assert held.held and not held.cut
    # AND the profiler hook lets it go (once), as does a plain recording() later
    assert native.release_held in native.BEFORE_PROFILER
    held.release()
    held.release()
    assert fake.calls.count("unsubscribe") == 1 and not held.held
    with held.window():
        pass
    monkeypatch.setattr(recorder, "profiler_active", lambda: False)
    with native.recording():
        assert fake.calls[-2:] == ["unsubscribe", "subscribe"]
        native.release_held()  # a recording() window's subscription is not a held one
        assert fake.calls[-1] == "subscribe" and not held.held
    # AND a window that loses the subscription while open (a profiler starting inside the
    # capture) says so
    with held.window():
        for before in native.BEFORE_PROFILER:
            before()
    assert held.cut and not held.held
    # AND a window refused under a profiler says so, holding nothing
    monkeypatch.setattr(recorder, "profiler_active", lambda: True)
    with pytest.raises(_errors.ProfilerActiveError), held.window():
        pass
    assert not held.held


def test_mark_log_keeps_marks_as_integers_in_order():
    # the capture meter's (time_ns, scope) marks, which graphscope run's C module_call appends
    log = native.extension().MarkLog()
    log.append((10, 3))
    log.extend([(20, -1), (2**62, 7)])
    assert len(log) == 3
    assert list(log) == [(10, 3), (20, -1), (2**62, 7)]
    assert log[-1] == (2**62, 7) and log[0] == (10, 3)
    copy = log.copy()
    log.clear()
    assert len(log) == 0 and len(copy) == 3  # a copy is its own
    with pytest.raises(IndexError):
        copy[3]
    with pytest.raises(ValueError, match="time_ns, scope"):
        log.append((1, 2, 3))
    with pytest.raises(TypeError):
        log.append(("a", 1))


LEFT_INSTALLED = r"""
import torch
from graphscope import native
from graphscope.capture.run.names import ModuleNames, module_hooks
marks = native.extension().MarkLog()
hooks = module_hooks(ModuleNames(), None, lambda m, a: None, None, marks)
torch.nn.Linear(2, 2)(torch.ones(2))  # outside a capture: inert
print("exiting with nn.Module.__call__ still graphscope's")
"""


@pytest.mark.parametrize("report", [False, True])
def test_a_program_exiting_with_the_module_scopes_installed_prints_no_leak_report(report):
    # the meter's MarkLog, held by the C __call__ torch's nn.Module keeps, outlives teardown:
    # nanobind would list it on stderr. GRAPHSCOPE_LEAK_WARNINGS=1 asks for the list
    env = {k: v for k, v in os.environ.items() if k != "GRAPHSCOPE_LEAK_WARNINGS"}
    if report:
        env["GRAPHSCOPE_LEAK_WARNINGS"] = "1"
    r = subprocess.run([sys.executable, "-c", LEFT_INSTALLED], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "still graphscope's" in r.stdout
    assert ("leaked" in r.stderr) == report, r.stderr[-2000:]
