"""The capture pipeline's shape, on a CPU: one public API as upstream spells it, one naming rule
for modules, one registry of sources."""

from __future__ import annotations

import inspect
import os

import pytest

torch = pytest.importorskip("torch")


def test_make_graphed_callables_has_upstreams_signature_only():
    # GIVEN torch's make_graphed_callables and graphscope's
    import graphscope

    ours = inspect.signature(graphscope.make_graphed_callables).parameters
    theirs = inspect.signature(torch.cuda.make_graphed_callables).parameters
    # THEN the same parameters, in order, with the same kinds and defaults (no out-parameters)
    assert [(p.name, p.kind, p.default) for p in ours.values()] == [
        (p.name, p.kind, p.default) for p in theirs.values()]


def _module_names(path):
    from graphscope.model.bundle_io import read_bundle

    b = read_bundle(path)
    return {n.module for g in b.graphs for n in g.nodes if n.is_work and n.module}


def test_capture_and_run_bundles_of_one_model_name_the_same_modules():
    # GIVEN the decode model captured from its model file (graphscope capture --mode forward)
    # and the same model in an unmodified program (graphscope run), both recorded on the H200
    from tests.conftest import DATA

    captured = _module_names(os.path.join(DATA, "decode_kv_forward"))
    ran = _module_names(os.path.join(DATA, "run_decode"))
    # THEN both name the same modules, by the one rule (L, L.<path>)
    assert captured == ran
    assert "L.blocks.0.attn.qkv" in ran and all(m.startswith("L.") for m in ran)


def test_run_names_the_model_L_and_a_loss_module_beside_it_by_class():
    # GIVEN the module names of graphscope run, in one capture: a model, then a loss module
    from graphscope.annotate.modules import register_module_annotations
    from graphscope.capture.run.names import ModuleNames

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.ReLU()))
    loss = torch.nn.MSELoss()
    names = ModuleNames()
    names.new_window()
    fqns = {id(m): names.fqn(model, m) for m in model.modules()}
    # WHEN the model is named as graphscope capture names it
    h = register_module_annotations(model)
    try:
        from graphscope.annotate import TABLES

        registered = {id(m): a[0]["module_name"] for m, a in TABLES.modules.names.items()}
    finally:
        h.remove()
    # THEN the same names, L first; the loss module is a root of its own, by its class
    assert fqns == registered
    assert sorted(fqns.values()) == ["L", "L.0", "L.1", "L.1.0"]
    assert names.fqn(loss, loss) == "(MSELoss)" and names.fqn(model, loss) is None
    # AND a root keeps its name in a later capture, where a new model is L again
    names.new_window()
    assert names.fqn(loss, loss) == "(MSELoss)"
    other = torch.nn.Linear(1, 1)
    names.new_window()
    assert names.fqn(other, other) == "L"
    # AND the names keep no model alive (a table that held its own root did: a run's every
    # model, and its memory, lived to the end)
    import gc
    import weakref

    gone = weakref.ref(model)
    del model, fqns, h
    gc.collect()
    assert gone() is None and len(names.roots) == 2


def test_one_default_output_rule():
    from graphscope.capture.source import default_output

    assert default_output("models/mlp.py", "capture") == os.path.join(
        "graphscope-out", "mlp.capture")
    assert default_output("pkg.serve", "run", module=True) == os.path.join(
        "graphscope-out", "serve.run")
    assert default_output("profile", "run") == os.path.join("graphscope-out", "profile.run")


def test_bundle_output_refuses_an_existing_path_before_any_work(tmp_path):
    from graphscope.capture.finish import bundle_output
    from graphscope.model.outputs import OutputError
    from graphscope.model.ranks import RankInfo

    (tmp_path / "b").mkdir()
    with pytest.raises(OutputError, match="already exists.*--force"):
        bundle_output(str(tmp_path / "b"), "x.py", "run")
    assert bundle_output(str(tmp_path / "b"), "x.py", "run", force=True) == str(tmp_path / "b")
    assert bundle_output(str(tmp_path / "b"), "x.py", "run", rank=RankInfo(1, 2, 1)) == str(
        tmp_path / "b" / "rank1")


def test_run_is_a_registered_source_but_not_a_model_file_mode():
    from graphscope.capture import SOURCES
    from graphscope.capture.config import mode_names

    assert SOURCES["run"].takes == "program"
    assert "run" not in mode_names() and {"step", "forward", "callables"} <= set(mode_names())


def test_run_options_come_through_the_one_config_path(tmp_path):
    # GIVEN a YAML file, the environment and the command line all setting run options
    from graphscope.cli.commands._run import build_config

    y = tmp_path / "g.yaml"
    y.write_text("replays: 5\nskip_replays: 2\ngraphs: decode\n")
    os.environ["GRAPHSCOPE_SKIP_REPLAYS"] = "3"
    try:
        cfg = build_config({"mode": "run", "model": "p.py", "replays": 7}, str(y))
    finally:
        del os.environ["GRAPHSCOPE_SKIP_REPLAYS"]
    # THEN command line > environment > YAML
    assert (cfg.mode, cfg.replays, cfg.skip_replays, cfg.graphs) == ("run", 7, 3, "decode")


def test_join_traced_rekeys_earlier_instantiates_to_the_last_exec_id():
    # GIVEN records of one node replayed under exec id 3, then (re-instantiated) under exec id 5
    import numpy as np

    from graphscope.capture.replay import join_traced
    from graphscope.native import ActivityRecords

    n = 2
    z = np.zeros(n, dtype=np.uint32)
    recs = ActivityRecords(
        kind=np.zeros(n, dtype=np.int32), start_ns=np.array([100, 300], dtype=np.uint64),
        end_ns=np.array([150, 370], dtype=np.uint64), device=z, stream=z + 7,
        correlation=np.array([1, 2], dtype=np.uint32), graph_id=z,
        graph_node_id=np.array([(3 << 32) | 4, (5 << 32) | 4], dtype=np.uint64),
        grid=np.zeros((n, 3), dtype=np.int32), block=np.zeros((n, 3), dtype=np.int32),
        name_idx=np.zeros(n, dtype=np.int32), bytes=np.zeros(n, dtype=np.uint64), names=[],
        dropped=0)
    # WHEN joined with the rekey {3: 5}
    jr = join_traced([recs], {(5 << 32) | 4: "g"}, keep_events=0, rekey={3: 5})
    # THEN both replays land on the node, and the records themselves are untouched
    assert jr.joined_records == 2 and sorted(jr.durations_ns[(5 << 32) | 4]) == [50, 70]
    assert int(recs.graph_node_id[0]) == (3 << 32) | 4


def _probe(seen):
    """A module class whose forward notes the module scope its work would get."""
    from tests.unit._fake import current

    class Probe(torch.nn.Module):
        def forward(self, x):
            seen.append(current().get("module_name"))
            return x

    return Probe


def test_run_module_hooks_push_scopes_named_by_the_rule():
    # GIVEN graphscope run's module hooks in a (GPU-less) annotated window, and modules that
    # note the module scope their work would get
    from graphscope import native
    from graphscope.capture.run.names import ModuleNames, module_hooks
    from tests.unit._fake import fake_session

    seen = []
    Probe = _probe(seen)

    model = torch.nn.Sequential(Probe(), torch.nn.Sequential(Probe()))
    loss = Probe()
    names = ModuleNames()
    names.new_window()
    first, returned = [], []
    hooks = module_hooks(names, None, lambda m, a: first.append(m),
                         lambda m, out: returned.append((m, out)))
    stats = native.extension().module_call_stats
    stats(True)
    try:
        model(torch.ones(1))  # outside an annotated window: inert, not counted
        assert stats() == (0, 0.0) and seen == [None, None]
        seen.clear()
        # WHEN the program calls the model, then a loss module beside it
        with fake_session():
            loss(model(torch.ones(1)))
    finally:
        for h in hooks:
            h.remove()
    # graphscope's own time in the 5 module calls it scoped, counted (graphscope run's
    # "module_calls" overhead) and reset when read so
    calls, own_s = stats(True)
    assert calls == 5 and 0.0 < own_s < 5.0
    assert stats() == (0, 0.0)
    # THEN the model is L, its submodules L.<path>, the loss module (Probe) by its class
    assert seen == ["L.0", "L.1.0", "(Probe)"]
    assert first == [model, loss]
    # the outermost modules' returns (a graph's static outputs), not their submodules'
    assert [m for m, _ in returned] == [model, loss]


def _hooked_window(names, model, depth=None, marks=None):
    """One (GPU-less) annotated capture window of graphscope run's module hooks, installed for
    it as graphscope run does, in which the program calls ``model``."""
    from graphscope.capture.run.names import module_hooks
    from tests.unit._fake import fake_session

    names.new_window()
    hooks = module_hooks(names, depth, lambda m, a: None, None, marks)
    try:
        with fake_session():
            model(torch.ones(1))
    finally:
        for h in hooks:
            h.remove()


@pytest.mark.parametrize("log", ["MarkLog", "list"])
def test_run_module_hooks_cache_gives_the_first_calls_scopes_and_marks_them(log):
    # GIVEN graphscope run's module hooks with a depth limit and the meter's marks (the
    # extension's MarkLog, as the meter makes them, or a list)
    import graphscope.capture.run.names as N
    from graphscope import native
    from graphscope.capture.run.names import ModuleNames

    seen = []
    Probe = _probe(seen)

    inner = torch.nn.Sequential(Probe(), torch.nn.Sequential(Probe()))
    model = torch.nn.Sequential(Probe(), inner, inner)  # one module called twice per step
    names = ModuleNames()
    marks = native.extension().MarkLog() if log == "MarkLog" else []
    resolved = []
    real_normalize = N.normalize
    N.normalize = lambda d: resolved.append(d) or real_normalize(d)
    try:
        # WHEN the program runs the model in three capture windows, the hooks installed per
        # window as graphscope run does
        for _ in range(3):
            _hooked_window(names, model, 1, marks)
    finally:
        N.normalize = real_normalize
    # the first window resolves L, L.0, L.1 (deeper modules open no scope); the later ones
    # hit the cache: only the root (an outermost call) is resolved again
    assert [d["module_name"] for d in resolved] == ["L", "L.0", "L.1", "L", "L"]
    assert native.extension().module_scope_cache_size(names.scope_cache[1]) == 5
    # THEN every window gets the first window's scopes; modules deeper than depth 1 (L.1.0,
    # L.1.1.0) run in L.1's
    first = seen[:5]
    assert first == ["L.0", "L.1", "L.1", "L.1", "L.1"]
    assert seen == first * 3
    # and the marks name each scope change in order, every window alike
    marks = list(marks)
    names_marked = [dict(ann_scope(s)).get("module_name") for _, s in marks]
    assert names_marked[:4] == ["L", "L.0", "L", "L.1"]
    assert len(marks) == 3 * (len(marks) // 3) > 0
    assert all(t2 >= t1 for (t1, _), (t2, _) in zip(marks, marks[1:]))


def test_run_module_scopes_leave_torch_as_found_and_skip_other_threads_and_failures():
    # GIVEN graphscope run's module scopes for one window (nn.Module.__call__ wrapped)
    import threading

    from graphscope import native
    from graphscope.capture.run.names import ModuleNames, module_hooks
    from tests.unit._fake import fake_session

    seen = []
    Probe = _probe(seen)

    class Boom(torch.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    model = torch.nn.Sequential(Probe(), Boom())
    real_call = torch.nn.Module.__call__
    names = ModuleNames()
    names.new_window()
    hooks = module_hooks(names, None, lambda m, a: None)
    try:
        with fake_session():
            assert torch.nn.Module.__call__ is not real_call
            depth = native.extension().scope_depth()
            # WHEN a module raises inside the model
            with pytest.raises(ValueError, match="boom"):
                model(torch.ones(1))
            # THEN every scope it opened is closed again
            assert native.extension().scope_depth() == depth
            # AND a module called on another thread opens no scope there
            other = Probe()
            t = threading.Thread(target=other, args=(torch.ones(1),))
            t.start()
            t.join()
    finally:
        for h in hooks:
            h.remove()
    assert seen == ["L.0", None]
    # AND torch's own __call__ is back once the window's handles are removed
    assert torch.nn.Module.__call__ is real_call
    hooks[0].remove()  # twice: a no-op
    assert torch.nn.Module.__call__ is real_call


def test_run_module_scopes_under_torch_compile_in_the_window():
    # GIVEN graphscope run's module scopes installed (a capture window open) and a model
    # compiled for the first time inside that window
    import torch._dynamo

    from graphscope.capture.run.names import ModuleNames, module_hooks
    from tests.unit._fake import fake_session

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(),
                                torch.nn.Sequential(torch.nn.Linear(4, 4)))
    x = torch.ones(2, 4)
    want = model(x)
    names = ModuleNames()
    names.new_window()
    torch._dynamo.reset()
    hooks = module_hooks(names, None, lambda m, a: None)
    try:
        # WHEN the compiled model runs inside the annotated window (graphscope's resolver is
        # called from C while dynamo's frame callback is set)
        with fake_session():
            got = torch.compile(model, backend="eager")(x)
    finally:
        for h in hooks:
            h.remove()
        torch._dynamo.reset()
    # THEN it returns what the model computes, and dynamo never traced graphscope's frames
    # (that failed with an assertion inside dynamo before the resolver ran with it off)
    assert torch.equal(got, want)


def test_run_module_scopes_held_across_a_batch_let_dynamo_compile():
    # GIVEN a model compiled with fullgraph=True (vLLM's way) before graphscope run holds its
    # nn.Module.__call__ for a batch of captures
    import torch._dynamo
    import torch._dynamo.testing

    from graphscope.capture.run.names import ModuleNames, module_hooks
    from tests.unit._fake import fake_session

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    torch._dynamo.reset()
    count = torch._dynamo.testing.CompileCounter()
    f = torch.compile(model, backend=count, fullgraph=True, dynamic=False)
    f(torch.ones(2, 4))
    real_call = torch.nn.Module.__call__
    names = ModuleNames()
    names.new_window()
    hooks = module_hooks(names, None, lambda m, a: None)
    try:
        # WHEN it recompiles for a new shape between two windows of the batch, and inside one
        f(torch.ones(3, 4))
        with fake_session():
            f(torch.ones(5, 4))
        # THEN each compile traced the whole model (torch's own __call__ was in place while
        # dynamo compiled: a C __call__ failed fullgraph compiles), and the patch came back
        assert count.frame_count == 3 and torch.nn.Module.__call__ is not real_call
    finally:
        for h in hooks:
            h.remove()
        torch._dynamo.reset()
    # AND removing it unhooks dynamo's callbacks
    from torch._dynamo.callback import callback_handler

    assert hooks[0].suspend not in callback_handler.start_callbacks
    assert torch.nn.Module.__call__ is real_call


def test_run_module_scopes_let_dynamo_be_imported_during_a_batch():
    # GIVEN a fresh interpreter where torch._dynamo is not imported yet, and graphscope run's
    # nn.Module.__call__ held for a batch
    import subprocess
    import sys

    code = """if True:
        import sys, torch
        assert "torch._dynamo" not in sys.modules
        from graphscope.capture.run.names import ModuleNames, module_hooks
        real = torch.nn.Module.__call__
        names = ModuleNames(); names.new_window()
        (patch,) = module_hooks(names, None, lambda m, a: None)
        import torch._dynamo, torch._dynamo.utils
        from torch._dynamo.callback import callback_handler
        # dynamo kept torch's own __call__, and the patch hooked its compile callbacks
        assert torch._dynamo.utils.unpatched_nn_module_call is real
        assert torch.nn.Module.__call__ is patch.call
        assert patch.suspend in callback_handler.start_callbacks
        m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
        y = torch.compile(m, backend="eager", fullgraph=True)(torch.ones(1, 2))
        patch.remove()
        assert torch.nn.Module.__call__ is real and patch._finder is None
        assert not any(type(f).__name__ == "_DynamoArrival" for f in sys.meta_path)
        print("ok")
    """
    # WHEN dynamo is imported and compiles THEN it works as without graphscope
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-3000:]


def ann_scope(sid):
    from graphscope import annotate as A

    return A.TABLES.scopes.annotation(sid) if sid >= 0 else {}


def test_run_command_wires_options_to_the_run_source(tmp_path, monkeypatch, capsys):
    # GIVEN graphscope run with options, and the library call it makes replaced (no GPU here)
    import graphscope.capture as C
    from graphscope.capture.source import RawCapture
    from graphscope.cli.main import main

    prog = tmp_path / "serve.py"
    prog.write_text("pass\n")
    seen = {}

    def fake(cfg, job, argv=None):
        seen.update(cfg=cfg, job=job)
        job.exit_code = 3
        return RawCapture([], meta={"observed_captures": 2, "warnings": ["w1"]}), None

    monkeypatch.setattr(C, "run_program_capture", fake)
    # WHEN it runs a program that captures no graph and exits 3
    rc = main(["run", "--no-ops", "--replays", "4", "--graphs", "dec", str(prog), "a", "-b"])
    # THEN one config reaches the run source, and the program's exit code comes back
    cfg, job = seen["cfg"], seen["job"]
    assert (cfg.mode, cfg.replays, cfg.graphs, cfg.record_ops, cfg.output) == (
        "run", 4, "dec", False, None)
    assert (job.target, job.args, job.module) == (str(prog), ["a", "-b"], False)
    assert rc == 3
    err = capsys.readouterr().err
    assert "graphscope: warning: w1" in err and "2 capture(s) seen" in err


def test_capture_refuses_the_run_mode_in_one_line():
    # GIVEN a config (say from YAML) asking a model-file capture for the program source
    from graphscope._errors import ConfigError
    from graphscope.capture import run_capture
    from graphscope.capture.config import CaptureConfig

    # THEN it says which modes a model file takes, before looking for a GPU
    with pytest.raises(ConfigError, match="runs a program.*callables, forward, step"):
        run_capture(CaptureConfig(mode="run", model="m.py"))


@pytest.mark.parametrize("given,want", [(None, 2), ("all", 0), ("ALL", 0), ("5", 5)])
def test_run_op_captures_option(tmp_path, monkeypatch, given, want):
    # GIVEN graphscope run with or without --op-captures (the library call replaced)
    import graphscope.capture as C
    from graphscope.capture.source import RawCapture
    from graphscope.cli.main import main

    prog = tmp_path / "serve.py"
    prog.write_text("pass\n")
    seen = {}

    def fake(cfg, job, argv=None):
        seen["cfg"] = cfg
        return RawCapture([], meta={}), None

    monkeypatch.setattr(C, "run_program_capture", fake)
    args = ["run"] + (["--op-captures", given] if given else []) + [str(prog)]
    # WHEN it runs THEN the count reaches the config (0: every capture; default: 2)
    assert main(args) == 0
    assert seen["cfg"].op_captures == want


@pytest.mark.parametrize("bad", ["0", "-1", "some"])
def test_run_op_captures_refuses_what_is_not_a_count(tmp_path, capsys, bad):
    from graphscope.cli.main import main

    prog = tmp_path / "serve.py"
    prog.write_text("pass\n")
    assert main(["run", "--op-captures", bad, str(prog)]) != 0
    err = capsys.readouterr().err
    assert "--op-captures" in err and "1 or more" in err and "'all'" in err


def test_run_says_which_sites_kept_scopes_only(tmp_path, monkeypatch, capsys):
    # GIVEN graphscope run of a ladder whose later buckets were captured without ops
    # (the library call replaced; the summary is a recorded run bundle's)
    from types import SimpleNamespace

    import graphscope.capture as C
    from graphscope.analysis.summary import summarize
    from graphscope.capture.source import RawCapture
    from graphscope.cli.main import main
    from graphscope.model.bundle_io import read_bundle

    prog = tmp_path / "serve.py"
    prog.write_text("pass\n")
    bundle = os.path.join(os.path.dirname(__file__), "..", "data", "run_ladder")
    summary = summarize(read_bundle(bundle))
    (site,) = summary["ladder"]
    site["ops_recorded"] = 3  # as ladder() counts a bundle whose buckets 4.. have no ops
    res = SimpleNamespace(summary=summary, bundle_path=bundle, diagnosis_error=None)
    monkeypatch.setattr(C, "run_program_capture", lambda cfg, job, argv=None:
                        (RawCapture([], meta={}), res))
    # WHEN it runs with --op-captures 3
    assert main(["run", "--op-captures", "3", str(prog)]) == 0
    # THEN stderr names the site, how many captures kept scopes only, and the way to get all
    err = capsys.readouterr().err
    assert (f"{site['site']}: aten ops, shapes and source lines recorded in its first 3 "
            f"capture(s); {len(site['buckets']) - 3} later one(s) keep module, phase and memory "
            "scopes (--op-captures all") in err


def test_a_program_runs_on_a_settled_heap():
    # GIVEN graphscope run about to start a program (runner.settled_heap around its run), in a
    # fresh interpreter (a test process may have a frozen heap already: torch's compile
    # workers freeze theirs)
    import subprocess
    import sys

    code = """if True:
        import gc
        from graphscope.capture.run.runner import settled_heap
        assert gc.get_freeze_count() == 0
        with settled_heap():
            frozen = gc.get_freeze_count()
            mine = [object() for _ in range(1000)]
            assert frozen > 0 and gc.get_freeze_count() == frozen, frozen
        assert gc.get_freeze_count() == 0
        gc.freeze()
        had = gc.get_freeze_count()
        with settled_heap():
            assert gc.get_freeze_count() == had
        assert gc.get_freeze_count() == had
        print("ok")
    """
    # WHEN the program runs THEN what existed before it is frozen out of collections, what the
    # program makes is not, and afterwards the heap is as it was; a heap frozen by someone else
    # is left to them
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


def test_run_module_scope_cache_forgets_a_module_that_died_when_its_address_is_reused():
    # GIVEN graphscope run's cached module scopes, after a window that called L.a
    import gc

    from graphscope.capture.run.names import ModuleNames

    seen = []
    Probe = _probe(seen)

    class Parent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Probe()
            self.order = ["a"]

        def forward(self, x):
            for name in self.order:
                x = getattr(self, name)(x)
            return x

    model = Parent()
    names = ModuleNames()
    _hooked_window(names, model)
    old = id(model.a)
    # WHEN the program drops L.a and a new module, made at the same address, is L.c
    gc.disable()  # (the object's block is freed last: one of the next objects of its size,
    try:  # the first or the second as measured, takes it)
        del model.a
        made = []
        for _ in range(1000):
            made.append(Probe.__new__(Probe))
            if id(made[-1]) == old:
                break
        new = made.pop()
        del made
    finally:
        gc.enable()
    assert id(new) == old, "CPython gave the dropped module's address to no new module"
    Probe.__init__(new)
    model.c = new
    model.order = ["c"]
    _hooked_window(names, model)
    # THEN the new module gets its own scope, not the dead one's cached at its address
    assert seen == ["L.a", "L.c"]
    # AND a module added to the model later is named by its path too, and one the model calls
    # without holding it (in a plain list) by its class, as an outermost module is
    model.d = Probe()
    model.loose = [Probe()]
    model.order = ["d"]
    _hooked_window(names, model)
    model.forward = lambda x: model.loose[0](x)
    _hooked_window(names, model)
    _hooked_window(names, model)
    assert seen[2:] == ["L.d", "(Probe)", "(Probe)"]


def test_run_first_call_sees_keyword_arguments():
    # GIVEN graphscope run's module hooks and a model called as transformers' models are,
    # with its input by keyword
    from graphscope.capture.run.names import ModuleNames, describe_shapes, module_hooks
    from tests.unit._fake import fake_session

    class KwModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, input_ids=None, scale=1.0):
            return self.lin(input_ids) * scale

    model = KwModel()
    got = []
    names = ModuleNames()
    names.new_window()
    hooks = module_hooks(names, None, lambda m, a: got.append(describe_shapes(a)))
    try:
        # WHEN it is called by keyword, and with a positional and a keyword argument
        with fake_session():
            out = model(input_ids=torch.ones(8, 4), scale=2.0)
        names.new_window()
        with fake_session():
            model(torch.ones(3, 4), scale=torch.ones(1))
    finally:
        for h in hooks:
            h.remove()
    # THEN the first call's shapes name its tensors (a bucket's batch size comes from them),
    # the keyword ones too, and the call's result is the model's own
    assert got == ["[8,4]", "[3,4] [1]"]
    assert torch.equal(out, model(input_ids=torch.ones(8, 4), scale=2.0))
