"""``capture --try-streams N`` and ``--try-compile GLOB``: what the options accept and refuse
before any GPU work, wherever they come from (command line, YAML, environment), and which
modules a glob compiles (graphscope/capture/compile.py ``targets``, on CPU modules)."""

from __future__ import annotations

import os

import pytest

from graphscope._errors import ConfigError
from tests.conftest import SAMPLES


def _main(args, tmp_path):
    from graphscope.cli.main import main

    out = tmp_path / "b"
    return main(["capture", os.path.join(SAMPLES, "branches.py"), "-o", str(out), *args]), out


@pytest.mark.parametrize("args,msg", [
    (["--mode", "callables", "--try-compile", "L.left"],
     "--try-compile takes --mode step or forward, not 'callables'"),
    (["--try-compile", " "], "command line: try_compile must be a module glob such as "
                            "'L.blocks.*', not empty"),
    (["--mode", "callables", "--try-compile", "L", "--nproc", "2"],
     "--try-compile takes --mode step or forward"),  # the launcher refuses, not each rank
])
def test_try_compile_refused_before_any_work(tmp_path, capsys, args, msg):
    code, out = _main(args, tmp_path)
    err = capsys.readouterr().err
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize("mode", ["step", "forward", "callables"])
def test_try_streams_is_taken_by_every_model_mode(mode):
    # GIVEN --try-streams 4 in each mode of a model file (and --try-compile where it applies)
    from graphscope.capture import check_capture_options
    from graphscope.capture.config import CaptureConfig

    compile_glob = None if mode == "callables" else "L.left"
    cfg = CaptureConfig(mode=mode, try_streams=4, try_compile=compile_glob).validate()
    # THEN the options pass the checks made before any GPU work
    check_capture_options(cfg)


def test_without_a_gpu_the_modes_that_now_take_try_streams_fail_on_the_gpu_only(
        tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, out = _main(["--mode", "step", "--try-streams", "2"], tmp_path)
    err = capsys.readouterr().err
    assert code == 2 and "needs an NVIDIA GPU" in err and "try-streams" not in err


def test_try_compile_from_yaml_and_environment_name_where(tmp_path, capsys):
    from graphscope.capture.config import from_env
    from graphscope.cli.main import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text("mode: forward\ntry_compile: ''\n")
    assert main(["capture", "--config", str(cfg), "-o", str(tmp_path / "b")]) == 2
    assert f"{cfg}:2: try_compile must be a module glob" in capsys.readouterr().err
    assert from_env({"GRAPHSCOPE_TRY_COMPILE": "L.h.*"}) == {"try_compile": "L.h.*"}
    with pytest.raises(ConfigError, match=r"\$GRAPHSCOPE_TRY_COMPILE: try_compile must be"):
        from_env({"GRAPHSCOPE_TRY_COMPILE": ""})
    cfg.write_text("try_compile: 3\n")
    with pytest.raises(ConfigError, match="key 'try_compile' must be Optional\\[str\\], not int"):
        from graphscope.capture.config import load_yaml

        load_yaml(str(cfg))


def test_run_says_it_does_not_read_try_compile(tmp_path, capsys):
    from graphscope.cli.commands._run import build_config

    cfg = tmp_path / "c.yaml"
    cfg.write_text("try_compile: L.*\nreplays: 5\n")
    build_config({}, str(cfg), "run")
    assert (f"warning: {cfg}: try_compile: graphscope capture's option(s), not read by "
            "graphscope run") in capsys.readouterr().err


# ----------------------------------------------------------------- which modules compile

torch = pytest.importorskip("torch")


def _branches():
    import importlib.util

    spec = importlib.util.spec_from_file_location("branches", os.path.join(SAMPLES,
                                                                            "branches.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.TwoBranch(d=8, depth=2)


def test_a_glob_compiles_the_outermost_matches():
    from graphscope.capture.compile import targets

    model = _branches()
    t = targets(model, "L.left*")
    # THEN L.left is compiled, and its submodules (matched too) are compiled inside it
    assert t.paths == ["L.left"]
    assert t.nested == ["L.left.0", "L.left.0.0", "L.left.0.1", "L.left.1", "L.left.1.0",
                        "L.left.1.1"]
    assert targets(model, "L.*.1.0").paths == ["L.left.1.0", "L.right.1.0"]
    assert targets(model, "L").paths == ["L"] and targets(model, "L").nested == []


def test_a_glob_that_matches_no_module_is_refused_naming_some():
    from graphscope.capture.compile import targets

    with pytest.raises(ConfigError) as e:
        targets(_branches(), "blocks.*", "branches.py")
    msg = str(e.value)
    assert msg.startswith("--try-compile 'blocks.*' matches no module of branches.py (its "
                          "modules: L, L.left, L.left.0, L.left.0.0, L.left.0.1, L.left.1 ... "
                          "(15 in all)); module paths are named L, L.<path>")


def test_patched_forwards_are_scoped_and_put_back():
    from graphscope.capture.compile import patched, targets

    model = _branches()
    x = torch.randn(3, 8)
    before = model(x)
    t = targets(model, "L.right")
    with patched(t, compiled=False):
        assert "forward" in model.right.__dict__  # the scoped wrapper
        assert torch.equal(model(x), before)  # outside a capture the scope is a no-op
    assert "forward" not in model.right.__dict__
    assert torch.equal(model(x), before)


def test_compiled_forwards_are_made_once_and_train():
    # GIVEN a branch compiled by dynamo (the "eager" backend: no inductor on this machine)
    from graphscope.capture.compile import patched, targets

    model = _branches()
    x = torch.randn(3, 8)
    ref = model(x)
    t = targets(model, "L.left")
    t.backend = "eager"
    # WHEN the model runs forward and backward through it, in two captures' worth of patching
    for _ in range(2):
        with patched(t, compiled=True):
            out = model(x)
            out.sum().backward()
    # THEN it computes what the eager model computes, its compiled forward was made once,
    # and the module's own forward is back
    assert torch.allclose(out, ref) and len(t.compiled) == 1
    assert model.left[0][0].weight.grad is not None
    assert "forward" not in model.left.__dict__


def test_compiled_forwards_compile_under_graphscopes_op_mode():
    # GIVEN a capture that records ops through a TorchDispatchMode (a stream is marked, or DDP
    # is scoped): dynamo runs every frame eagerly while one is active
    from torch._dynamo.utils import counters
    from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode

    from graphscope.capture.compile import patched, targets

    class Recording(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    model = _branches()
    x = torch.randn(3, 8)
    ref = model(x)
    t = targets(model, "L.left")
    t.backend = "eager"
    seen = []
    inner = model.left.forward

    def spy(*a):
        seen.append(_get_current_dispatch_mode())
        return inner(*a)

    model.left.forward = spy
    before = counters["stats"]["unique_graphs"]
    # WHEN the compiled module runs inside that mode
    with Recording(), patched(t, compiled=True):
        out = model(x)
    # THEN dynamo compiled it (no mode active inside), and it computes what eager computes
    assert counters["stats"]["unique_graphs"] > before
    assert seen and all(m is None for m in seen)
    assert torch.allclose(out, ref)


def test_compiled_code_warms_up_on_the_branch_the_capture_takes():
    # GIVEN code that branches on whether a capture is under way (transformers builds an
    # attention mask instead of checking the data when it is)
    torch = pytest.importorskip("torch")
    from graphscope.capture.compile import told_capturing

    def mask_or_none():
        return "mask" if torch.cuda.is_current_stream_capturing() else None

    real = torch.cuda.is_current_stream_capturing  # (a CPU build cannot answer it)
    # THEN inside told_capturing it takes the capture's branch, through either name
    with told_capturing():
        assert mask_or_none() == "mask"
        assert torch.cuda.graphs.is_current_stream_capturing() is True
    # AND torch's function is back afterwards, also when the body raised
    assert torch.cuda.is_current_stream_capturing is real
    with pytest.raises(KeyError), told_capturing():
        raise KeyError("x")
    assert torch.cuda.is_current_stream_capturing is real
    assert torch.cuda.graphs.is_current_stream_capturing is real


def test_a_compile_that_took_no_effect_is_told_by_its_kernels():
    from graphscope.capture.compile import same_kernels
    from graphscope.model.graph import Node

    def nodes(*names):
        return [Node("g", i, i, "kernel", kernel=k) for i, k in enumerate(names)] + [
            Node("g", 99, 99, "memset")]

    eager = nodes("add", "mul", "add")
    # the same kernels in another order: dynamo ran the module eagerly
    assert same_kernels(eager, nodes("mul", "add", "add"))
    # fused, or one kernel more or less: compiled code
    assert not same_kernels(eager, nodes("triton_poi_fused_add_mul_0"))
    assert not same_kernels(eager, nodes("add", "mul"))
