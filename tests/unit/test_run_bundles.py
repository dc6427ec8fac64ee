"""`graphscope run` bundles recorded on the H200 (tests/data/run_*), read on a CPU: graphs
named by capture site, per-graph replay counts and pool memory, report --graph, DOT, the
attribution of optimizer, gradient accumulation and compiled (inductor) nodes. Plus the
pieces of `run` that need no GPU: program running, config validation, provenance lookup."""

import json
import os
import sys

import pytest

from graphscope.capture.config import CaptureConfig
from graphscope.capture.run import check_target, run_program
from graphscope.capture.run.provenance import Provenance, module_path
from graphscope.cli.main import main
from graphscope.model.bundle import resolve_graph
from graphscope.model.bundle_io import read_bundle
from graphscope.model.graph import safe_file_stem
from tests.conftest import DATA


def work(b):
    return list(b.work)


def test_decode_bundle_graphs_named_by_site_ordinal_and_shapes(capsys):
    # GIVEN the decode loop's bundle WHEN report --json THEN both buckets are listed
    assert main(["report", os.path.join(DATA, "run_decode"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    names = [g["name"] for g in s["graphs"]]
    assert names == ["decode.py:71 #0 [1,1] [1]", "decode.py:71 #1 [8,1] [1]"]
    for g in s["graphs"]:
        assert g["site"] == "decode.py:71" and g["replays"] == 40 and g["traced_replays"] == 20
        assert g["pool_bytes"] > 0 and g["attributed"] == g["work_nodes"]
        assert g["median_ns"] > 0
    assert s["coverage"]["forward"]["pct"] == 100.0


def test_report_graph_selects_one_graph_and_recomputes_its_time(capsys):
    path = os.path.join(DATA, "run_decode")
    assert main(["report", path, "--graph", "#1", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert [g["name"] for g in s["graphs"]] == ["decode.py:71 #1 [8,1] [1]"]
    # the module table's total is that graph's own time per replay
    root = next(r for r in s["modules"] if r["module"] == "L")
    assert root["median_ns"] == pytest.approx(s["graphs"][0]["median_ns"])


def test_report_graph_that_matches_nothing_names_the_graphs(capsys):
    assert main(["report", os.path.join(DATA, "run_decode"), "--graph", "nope"]) == 2
    err = capsys.readouterr().err
    assert "matches no graph" in err and "decode.py:71 #0" in err


def test_raw_dot_files_have_safe_names_and_dump_reads_them(tmp_path, capsys):
    b = read_bundle(os.path.join(DATA, "run_decode"))
    for g in b.graphs:
        assert os.path.isfile(os.path.join(b.path, g.dot_file))
        assert "/" not in safe_file_stem(g.name) and " " not in safe_file_stem(g.name)
    out = tmp_path / "g.raw.dot"
    assert main(["dump", b.path, "--raw", "--graph", "#0", "-o", str(out)]) == 0
    assert out.read_text().startswith("// generator: graphscope\ndigraph")  # its mark first


def test_dump_raw_of_a_run_bundle_with_the_drivers_dot_of_some_graphs(tmp_path, monkeypatch,
                                                                       capsys):
    # GIVEN a run bundle in which only a site's first graph has the driver's DOT (run reads it
    # before capture_end for a site's first capture; torch destroys the later templates)
    import shutil

    b = read_bundle(os.path.join(DATA, "run_decode"))
    path = tmp_path / "decode.run"
    shutil.copytree(b.path, path)
    later = read_bundle(str(path)).graphs[1]
    os.unlink(path / later.dot_file)
    monkeypatch.chdir(tmp_path)  # dump writes into the current directory
    # WHEN every graph's raw DOT is dumped
    capsys.readouterr()
    assert main(["dump", str(path), "--raw"]) == 0
    out, err = capsys.readouterr()
    # THEN the first graph's is written and the other is named as skipped, with why
    assert out.count("Wrote ") == 1 and safe_file_stem(b.graphs[0].name) in out
    assert "1 graph(s) have no driver DOT, skipped" in err and "keep_graph=True" in err
    # AND asking for that graph alone is a one-line error that says why
    assert main(["dump", str(path), "--raw", "--graph", "#1", "-o", "-"]) != 0
    err = capsys.readouterr().err.strip()
    assert "no raw DOT for graph" in err and "first graph" in err and len(err.splitlines()) == 1
    # AND a bundle with none is refused before anything is written
    os.unlink(path / read_bundle(str(path)).graphs[0].dot_file)
    before = sorted(os.listdir(tmp_path))
    assert main(["dump", str(path), "--raw"]) != 0
    assert "no graph has the driver's DOT" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == before


def test_dump_dot_of_a_run_graph(tmp_path):
    pydot = pytest.importorskip("pydot")
    out = tmp_path / "g.dot"
    assert main(["dump", os.path.join(DATA, "run_whole_network"), "-o", str(out)]) == 0
    (g,) = pydot.graph_from_dot_file(str(out))
    assert g.get_nodes()


def test_training_step_phases_optimizer_and_accumulation():
    b = read_bundle(os.path.join(DATA, "run_train_step_amp"))
    w = work(b)
    assert all(n.annotation.get("module_name") for n in w)
    opt = [n for n in w if n.module == "(optimizer)"]
    assert opt and {n.phase for n in opt} == {"optimizer"}
    assert any(n.annotation.get("optimizer_call") == "zero_grad" for n in opt)
    acc = [n for n in w if n.annotation.get("accumulate_grad")]
    assert acc and {n.phase for n in acc} == {"backward"}
    assert {n.module for n in acc} <= {"L.0", "L.2", "L.4"}
    seed = [n for n in w if n.op == "aten::ones_like"]
    # the loss module, called beside the model in the capture, is a root of its own (the rule)
    assert seed and seed[0].module == "(CrossEntropyLoss)" and seed[0].phase == "backward"


def test_whole_network_loss_module_and_optimizer():
    b = read_bundle(os.path.join(DATA, "run_whole_network"))
    mods = {n.module for n in work(b)}
    assert {"L.0", "L.2", "(MSELoss)", "(optimizer)"} <= mods


def test_graphed_callables_bundle_has_forward_and_backward_graphs():
    b = read_bundle(os.path.join(DATA, "run_partial_network"))
    assert len(b.graphs) == 6
    phases = {g.name: {n.phase for n in g.nodes if n.is_work} for g in b.graphs}
    assert sum(1 for p in phases.values() if p == {"backward"}) == 3, phases
    assert sum(g.info["replays"] for g in b.graphs) == 120


def test_compiled_graph_nodes_placed_by_inductor_provenance():
    b = read_bundle(os.path.join(DATA, "run_compiled"))
    (g,) = b.graphs
    assert g.info["kind"] == "compiled" and "compiled" in g.name
    for n in g.nodes:
        if n.is_work:
            assert n.annotation.get("module_source") == "inductor", n.annotation
            assert n.module.startswith("L")
            fused = n.annotation.get("fused_modules")
            if fused:  # several modules: said so, and the module is their common ancestor
                assert len(fused) > 1 and all(f.startswith(n.module) for f in fused)
    mods = {n.module for n in g.nodes if n.is_work}
    assert {"L.fc1", "L.fc2"} <= mods
    assert any(n.annotation.get("fused_modules") for n in g.nodes)


def test_resolve_graph_exact_prefix_regex():
    b = read_bundle(os.path.join(DATA, "run_decode"))
    assert resolve_graph(b, "decode.py:71 #1 [8,1] [1]").endswith("[8,1] [1]")
    assert resolve_graph(b, r"\[1,1\]").startswith("decode.py:71 #0")


def test_module_path_normalises_dynamo_paths():
    assert module_path("L['self'].blocks[0].attn") == "blocks.0.attn"
    assert module_path("L['self']._modules['fc1']") == "fc1"
    assert module_path("L['self']") == ""


def test_provenance_reads_the_comment_above_the_launch(tmp_path):
    wrapper = tmp_path / "torchinductor_x" / "cabc.py"
    wrapper.parent.mkdir()
    wrapper.write_text(
        "def call(args):\n"
        "    # Topologically Sorted Source Nodes: [linear, relu], Original ATen: [aten.addmm]\n"
        "    buf0 = empty()\n"
        "    triton_poi_fused_0.run(buf0, stream=s)\n"
        "    # Topologically Sorted Source Nodes: [layer_norm], Original ATen: [aten.ln]\n"
        "    triton_per_fused_1.run(buf0, stream=s)\n")
    p = Provenance()
    p.by_file[str(wrapper)] = {"linear": ["fc1"], "relu": ["act"], "layer_norm": ["norm"]}
    a = p.place(f"{wrapper}:4 (call)")  # paths below the model's root, L (the one rule)
    assert a == {"module_name": "L", "module_source": "inductor",
                 "fused_modules": ["L.fc1", "L.act"]}
    assert p.place(f"{wrapper}:6 (call)")["module_name"] == "L.norm"
    unknown = p.place(str(tmp_path / "torchinductor_y" / "z.py") + ":3 (call)")
    assert unknown["module_source"] == "none" and "did not see" in unknown["unplaced_reason"]


def test_run_config_rejects_a_bad_regex():
    from graphscope._errors import ConfigError

    with pytest.raises(ConfigError, match="not a regular expression"):
        CaptureConfig(mode="run", graphs="(").validate()


def test_run_program_argv_exit_codes_and_exceptions(tmp_path, capsys):
    prog = tmp_path / "p.py"
    prog.write_text("import sys\nprint('argv', sys.argv)\nraise SystemExit(int(sys.argv[1]))\n")
    assert run_program(str(prog), ["3"]) == 3
    assert f"argv ['{prog}', '3']" in capsys.readouterr().out
    boom = tmp_path / "boom.py"
    boom.write_text("raise ValueError('bad input')\n")
    assert run_program(str(boom), []) == 1
    assert "ValueError: bad input" in capsys.readouterr().err
    msg = tmp_path / "msg.py"
    msg.write_text("import sys\nsys.exit('fatal')\n")
    assert run_program(str(msg), []) == 1
    assert sys.argv[0] != str(prog)  # restored


def test_run_target_missing_is_one_line(capsys):
    from graphscope._errors import ConfigError

    with pytest.raises(ConfigError, match="no such program file"):
        check_target("/nonexistent/prog.py", False)
    with pytest.raises(ConfigError, match="no module of that name"):
        check_target("no_such_module_xyz", True)


def test_report_json_of_a_graph_never_traced_has_no_times_not_zero(capsys):
    # GIVEN a ladder graph the program never replayed (no timed replay), alone under --graph
    assert main(["report", os.path.join(DATA, "run_ladder"), "--graph", "#0", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["replays"] == 0 and s["graphs"][0]["median_ns"] is None
    # THEN every time in the JSON is null (as the table's "-"), the counts stay
    assert s["replay_kernel_median_ns"] is None and s["replay_span_median_ns"] is None
    assert all(r["median_ns"] is None and r["pct"] is None for r in s["modules"])
    assert s["modules"][0]["kernels"] > 0
    assert all(r["median_ns"] is None for r in s["top_kernels"] + s["top_ops"])
    # AND a timed view keeps its numbers
    assert main(["report", os.path.join(DATA, "run_ladder"), "--json"]) == 0
    t = json.loads(capsys.readouterr().out)
    assert t["replays"] > 0 and t["replay_kernel_median_ns"] > 0
    assert t["modules"][0]["median_ns"] > 0


def test_report_json_keeps_the_module_rows_to_depth(capsys):
    # GIVEN a bundle of two graphs whose module tree is 5 levels deep
    path = os.path.join(DATA, "run_decode")
    assert main(["report", path, "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert max(r["level"] for r in full["modules"]) > 1
    # WHEN --depth 1 THEN the JSON's module rows stop there, as the table's do
    assert main(["report", path, "--json", "--depth", "1"]) == 0
    cut = json.loads(capsys.readouterr().out)
    assert cut["modules"] == [r for r in full["modules"] if r["level"] <= 1]
    assert cut["by_graph"]["rows"] == [r for r in full["by_graph"]["rows"] if r["level"] <= 1]
    assert cut["graphs"] == full["graphs"]
