"""What a first-time user's try of the read-only commands on the recorded bundles stumbled on,
each fixed and kept fixed here (CPU)."""

import os

import pytest

from graphscope.cli.main import main
from tests.conftest import DATA


def _run(capsys, monkeypatch, *args, columns=200):
    monkeypatch.setenv("COLUMNS", str(columns))
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("cmd", [["report"], ["dump", "--dot", "-o", "-"]])
def test_an_empty_graph_name_is_refused_not_read_as_every_graph(capsys, monkeypatch, cmd):
    rc, out, err = _run(capsys, monkeypatch, *cmd, os.path.join(DATA, "run_ladder"),
                        "--graph", "")
    assert rc == 2 and not out
    assert "--graph" in err and "is empty" in err and len(err.strip().splitlines()) == 1


def test_a_bucket_is_chosen_by_its_shapes_as_written(capsys, monkeypatch):
    # '[16]' as a regex is a character class (5 graphs); as written it is one bucket's shapes
    rc, out, err = _run(capsys, monkeypatch, "report", os.path.join(DATA, "run_ladder"),
                        "--graph", "[16]")
    assert rc == 0, err
    assert "\n\ngraphs: ladder.py:45 #5 [16] (" in out  # the answer first, then the header


def test_a_regex_still_selects_when_nothing_holds_it_as_written(capsys, monkeypatch):
    rc, out, err = _run(capsys, monkeypatch, "report", os.path.join(DATA, "run_ladder"),
                        "--graph", r"#5 \[1\d\]")
    assert rc == 0, err
    assert "\n\ngraphs: ladder.py:45 #5 [16] (" in out  # the answer first, then the header


def test_diff_of_two_processes_of_one_model_is_no_change_beyond_noise(capsys, monkeypatch):
    # GIVEN two recordings of one model in two processes (+1.7% span, replays 0.1% apart)
    rc, out, err = _run(capsys, monkeypatch, "diff", os.path.join(DATA, "mlp_step"),
                        os.path.join(DATA, "mlp_step_eager"), "--fail-above", "1")
    # THEN the 1% gate holds: the change is within the noise of separate processes
    assert rc == 0, err
    line = out.splitlines()[-1]
    assert line.startswith("pass: span of step 75.7 µs → 77.0 µs (+1.7%, 95% interval "), line
    assert line.endswith("no change beyond noise (limit +1.0% on span)"), line


def test_diff_gate_calls_a_speed_up_a_speed_up(capsys, monkeypatch):
    # GIVEN a recording whose graph got faster than its baseline's
    rc, out, err = _run(capsys, monkeypatch, "diff", os.path.join(DATA, "branches_forward"),
                        os.path.join(DATA, "branches_2s_forward"), "--fail-above", "1")
    assert rc == 0, err
    # THEN the gate's line names the speed-up, not "the worst regression"
    line = out.splitlines()[-1]
    assert line.startswith("pass: span of forward 1.34 ms → 812.2 µs (-39.6%"), line
    assert line.endswith("speed-up (limit +1.0% on span)") and "worst" not in out


def test_critical_path_by_module_says_what_it_leaves_out(capsys, monkeypatch):
    rc, out, err = _run(capsys, monkeypatch, "report", os.path.join(DATA, "mlp_step"))
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if "critical path by module" in ln)
    assert line.endswith("(loss) 9%, 1 more 8%"), line


def test_module_table_title_says_what_the_times_add_up(capsys, monkeypatch):
    rc, out, _ = _run(capsys, monkeypatch, "report", os.path.join(DATA, "run_ladder"))
    assert rc == 0
    assert "GPU time by module (8 graphs' median replays, added)" in out
    assert "kernels: all 10 graphs, 2 of them not traced" in out
    rc, out, _ = _run(capsys, monkeypatch, "report", os.path.join(DATA, "mlp_step"))
    assert "GPU time by module (median per replay)" in out
    rc, out, _ = _run(capsys, monkeypatch, "report", os.path.join(DATA, "mlp_annotate"))
    assert "\nKernels by module\n" in out and "median per replay" not in out
    assert "Diagnosis (no timed replays: node counts)" in out


def test_memory_by_module_says_what_outside_modules_holds(capsys, monkeypatch):
    # GIVEN a training step's bundle and a forward capture's (a program's ladder)
    rc, out, _ = _run(capsys, monkeypatch, "report", os.path.join(DATA, "mlp_step_eager"))
    assert rc == 0
    step = out[out.index("Memory by module (during capture)"):]
    rc, out, _ = _run(capsys, monkeypatch, "report", os.path.join(DATA, "run_ladder"))
    assert rc == 0
    forward = out[out.index("Memory by module (during capture)"):]
    # THEN each says what the row's time is: torch.cuda.graph's and graphscope's own work
    # around the capture, and the loss, backward and optimizer only where a step has them
    for said in (step, forward):
        assert "(outside modules): the capture window while no module's forward ran: " \
            "torch.cuda.graph's entry and exit" in " ".join(said.split())
    assert "backward pass and optimizer step" in " ".join(step.split())
    assert "backward" not in forward.split("Bucket ladder")[0]


def test_capture_of_a_missing_model_file_says_so_before_asking_for_a_gpu(capsys, monkeypatch,
                                                                         tmp_path):
    monkeypatch.chdir(tmp_path)
    rc, out, err = _run(capsys, monkeypatch, "capture", "nosuch.py")
    assert rc == 2
    assert err.strip() == "graphscope: error: nosuch.py: no such model file"


def test_annotate_trace_help_names_the_default_output_as_written():
    from click.testing import CliRunner

    from graphscope.cli.main import cli

    r = CliRunner().invoke(cli, ["annotate-trace", "--help"], env={"COLUMNS": "200"})
    assert "run.json -> run.annotated.json" in r.output
    assert "TRACE.annotated.json" not in r.output


def test_a_table_too_wide_for_the_terminal_drops_its_rules_before_a_figure_wraps(
        capsys, monkeypatch):
    # at 60 columns the module table's figures were cut ("66.8 …"); without vertical rules
    # it fits whole
    rc, out, _ = _run(capsys, monkeypatch, "report", os.path.join(DATA, "mlp_step"), columns=60)
    assert rc == 0
    table = out[out.index("GPU time by module"):out.index("Top kernels")]
    assert "┃" not in table and "…" not in table
    assert "66.8 µs" in table and "30.4 µs" in table
    assert max(len(x) for x in out.splitlines()) <= 60
    # AND where it fits, the table keeps its rules
    rc, out, _ = _run(capsys, monkeypatch, "report", os.path.join(DATA, "mlp_step"), columns=120)
    assert "┃ module ┃" in out


def test_report_json_has_no_span_per_replay_across_a_programs_graphs(capsys, monkeypatch):
    """A run bundle's JSON gave 'replay_span_median_ns'
    3.34 ms, first start to last end of the i-th replay of 8 graphs the program replays when it
    likes (each graph's own span is at most 0.25 ms); the header leaves it out, the JSON nulls
    it. One graph's span, and a model file's graphs replayed as one step, keep theirs."""
    import json

    def span(*args):
        rc, out, _ = _run(capsys, monkeypatch, "report", *args, "--json")
        assert rc == 0
        return json.loads(out)

    every = span(os.path.join(DATA, "run_ladder"))
    assert every["replay_span_median_ns"] is None and every["replay_kernel_median_ns"] > 0
    one = span(os.path.join(DATA, "run_ladder"), "--graph", "#3")
    assert 0 < one["replay_span_median_ns"] < 300_000
    step = span(os.path.join(DATA, "mlp_callables"))
    assert len(step["graphs"]) > 1 and step["replay_span_median_ns"] > 0


def test_a_graph_budget_naming_a_bucket_as_written_checks_that_bucket_only(tmp_path, capsys,
                                                                           monkeypatch):
    """A budget on 'ladder.py:45 #0 [96]' read '[96]' as a
    character class. A pattern that is a graph's name as written picks that graph; a glob
    still picks every match, '[[]' for a literal '['."""
    import json

    from graphscope.analysis.budgets import evaluate, load_budgets
    from graphscope.model.bundle_io import read_bundle

    b = read_bundle(os.path.join(DATA, "run_ladder"))

    def checked(pattern):
        p = tmp_path / "b.yaml"
        p.write_text("graphs:\n  " + json.dumps(pattern) + ": {max_critical_path_us: 1e9}\n")
        return sorted({r.name for r in evaluate(b, load_budgets(str(p)))
                       if r.name.startswith("graphs[")})

    one = checked("ladder.py:45 #3 [32]")
    assert one == ["graphs[ladder.py:45 #3 [32]].critical_path"], one  # checked, not unmatched
    assert len(checked("*[32]*")) == 4  # a class: the names with a 2 or a 3 in them
    assert checked("*[[]32]*") == one


@pytest.mark.parametrize("extra", [["--filter", "fc1"], ["--collapse"], ["--group", "phase"],
                                   ["--depth", "1"]])
@pytest.mark.parametrize("what", ["--trace", "--annotations", "--raw"])
def test_dump_refuses_the_annotated_dots_options_with_another_output(tmp_path, capsys,
                                                                     monkeypatch, what, extra):
    """'--trace --filter fc1' wrote every event, the filter
    dropped in silence (while '--format svg --trace' was refused)."""
    out = tmp_path / "x.out"
    rc, _, err = _run(capsys, monkeypatch, "dump", os.path.join(DATA, "mlp_step"), what,
                      *extra, "-o", str(out))
    assert rc == 2 and "shapes the annotated DOT" in err and extra[0] in err, err
    assert not out.exists()


def test_dump_renders_as_the_output_is_named_and_refuses_a_name_that_says_otherwise(
        tmp_path, capsys, monkeypatch):
    """'--format svg -o g.dot' wrote SVG into a .dot file; '-o g.svg' now renders SVG."""
    import shutil

    dot = tmp_path / "g.dot"
    rc, _, err = _run(capsys, monkeypatch, "dump", os.path.join(DATA, "mlp_step"),
                      "--format", "svg", "-o", str(dot))
    assert rc == 2 and "--format svg writes SVG, not DOT" in err and not dot.exists(), err
    rc, _, err = _run(capsys, monkeypatch, "dump", os.path.join(DATA, "mlp_step"),
                      "--format", "dot", "-o", str(tmp_path / "g.svg"))
    assert rc == 2 and "name the file .dot or pass --format svg" in err, err
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    svg = tmp_path / "g.svg"
    rc, _, err = _run(capsys, monkeypatch, "dump", os.path.join(DATA, "mlp_step"), "-o",
                      str(svg))
    assert rc == 0 and svg.read_text().lstrip().startswith("<?xml"), err


def test_diff_of_a_deep_tree_shows_the_levels_that_fit_and_says_so(capsys, monkeypatch):
    """Diff printed ~200 module rows where report stops at
    the levels that fit and says so; the gate still holds every module."""
    a, b = os.path.join(DATA, "branches_forward"), os.path.join(DATA, "branches_try_streams")
    rc, out, _ = _run(capsys, monkeypatch, "diff", a, b)
    assert rc == 0 and "module rows; showing" in out and "pass --depth N" in out
    shown = sum(1 for ln in out.splitlines() if ln.startswith("│"))
    rc, full, _ = _run(capsys, monkeypatch, "diff", a, b, "--depth", "9")
    assert "module rows; showing" not in full
    assert sum(1 for ln in full.splitlines() if ln.startswith("│")) > shown > 3


def test_a_phase_a_row_has_no_kernels_of_is_blank_in_every_phase_column(capsys, monkeypatch):
    """The module table left 'opt' blank for modules with no
    optimizer kernels but gave the optimizer row '0 ns' under fwd and bwd."""
    rc, out, _ = _run(capsys, monkeypatch, "report", os.path.join(DATA, "run_train_step_amp"))
    row = next(ln for ln in out.splitlines() if ln.startswith("│ (optimizer)"))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert rc == 0 and cells[3] == cells[4] == "" and cells[5].endswith("µs"), cells


def test_doctor_lists_the_commands_that_work_without_a_gpu_on_one_line(capsys, monkeypatch):
    """Piped, doctor folded the list inside 'graphscope
    lint'. (Only where capture cannot run here, as on this CPU host.)"""
    from graphscope.capture.capabilities import probe

    if probe(try_subscribe=False).can_capture:
        pytest.skip("capture works here: doctor lists no fallback commands")
    rc, out, _ = _run(capsys, monkeypatch, "doctor", columns=100)
    line = next(ln for ln in out.splitlines() if ln.startswith("Commands that work here"))
    assert line.rstrip().endswith("graphscope lint"), out[-400:]


def test_top_kernels_say_memset_and_memcpy_rows_are_memory_nodes(capsys, monkeypatch):
    """'Top kernels by count' listed 'memset' as a kernel."""
    rc, out, _ = _run(capsys, monkeypatch, "report", os.path.join(DATA, "run_ladder"), "--graph",
                      "#0")
    assert rc == 0 and "│ memset " in out
    assert "memcpy and memset rows are the graph's copy and memset nodes, not kernels" in out


@pytest.mark.parametrize("how", ["flag", "env"])
def test_capture_refuses_the_run_mode_before_asking_for_a_gpu(capsys, monkeypatch, how):
    """'capture --mode run' said only 'needs an NVIDIA
    GPU'; the mode is refused first, on any machine."""
    from tests.conftest import SAMPLES

    args = ["capture", os.path.join(SAMPLES, "mlp.py"), "--force", "-o", "/nonexistent/x"]
    if how == "flag":
        args += ["--mode", "run"]
    else:
        monkeypatch.setenv("GRAPHSCOPE_MODE", "run")
    rc, _, err = _run(capsys, monkeypatch, *args)
    assert rc == 2 and "mode 'run' runs a program (graphscope run)" in err, err


def test_capture_nproc_without_a_gpu_is_one_line_not_a_torchrun_per_rank(capsys, monkeypatch,
                                                                        tmp_path):
    from graphscope.capture.capabilities import probe
    from tests.conftest import SAMPLES

    if probe(try_subscribe=False).gpu:
        pytest.skip("a GPU is here: the ranks would run")
    import subprocess

    def no_torchrun(*a, **k):
        raise AssertionError("torchrun was started")

    monkeypatch.setattr(subprocess, "call", no_torchrun)
    rc, _, err = _run(capsys, monkeypatch, "capture", os.path.join(SAMPLES, "mlp.py"),
                      "--nproc", "2", "-o", str(tmp_path / "b"))
    assert rc == 2 and "needs an NVIDIA GPU" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("name", ["graph.json", "manifest.json"])
def test_annotate_trace_names_a_bundle_file_that_is_not_its_annotations(tmp_path, capsys,
                                                                        monkeypatch, name):
    """'-a BUNDLE/graph.json' said "keys must be exec node ids (invalid literal for int()
    ...: 'graphs')"."""
    rc, _, err = _run(capsys, monkeypatch, "annotate-trace",
                      os.path.join(DATA, "run_profiled.trace.json"), "-a",
                      os.path.join(DATA, "run_profiled", name), "-o", str(tmp_path / "t.json"))
    assert rc == 2 and "not an annotation file (its first key is" in err, err
    assert "pass a bundle directory" in err and not (tmp_path / "t.json").exists()


def test_a_config_file_giving_a_key_twice_is_refused_with_its_line(tmp_path, capsys,
                                                                  monkeypatch):
    """A --config file with 'replays' twice kept the last in silence (budgets files already
    refused it; now every YAML file graphscope reads does)."""
    from tests.conftest import SAMPLES

    cfg = tmp_path / "c.yaml"
    cfg.write_text("replays: 5\nmode: step\nreplays: 6\n")
    rc, _, err = _run(capsys, monkeypatch, "capture", os.path.join(SAMPLES, "mlp.py"),
                      "--config", str(cfg))
    assert rc == 2 and f"{cfg}:3: duplicate key 'replays'" in err, err


def test_a_config_key_that_is_not_text_is_named_by_its_line(tmp_path, capsys, monkeypatch):
    from tests.conftest import SAMPLES

    cfg = tmp_path / "c.yaml"
    cfg.write_text("replays: 5\n1: 2\n")
    rc, _, err = _run(capsys, monkeypatch, "capture", os.path.join(SAMPLES, "mlp.py"),
                      "--config", str(cfg))
    assert rc == 2 and f"{cfg}:2: unknown key '1'" in err, err  # was '{cfg}:?'


def test_graph_and_Graph_without_a_gpu_say_so_in_one_line():
    """torch's own errors were 'Tried to instantiate dummy base class CUDAGraph' and
    'torch.cuda.Stream requires CUDA support'."""
    import torch

    import graphscope
    from graphscope._errors import NoGPUError

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    for make, name in ((lambda: graphscope.Graph(), "Graph"),
                       (lambda: graphscope.graph(object()), "graph")):
        with pytest.raises(NoGPUError, match=f"graphscope.{name} needs a CUDA GPU"):
            make()


def test_api_misuses_are_named_not_raw_errors(tmp_path):
    """Mark_stream(None, ...) raised int()'s TypeError,
    save_kernel_annotations(a directory) named an internal temp file, a negative depth was
    taken."""
    import graphscope
    from graphscope._errors import AnnotationError

    with pytest.raises(AnnotationError, match="stream must be a torch.cuda.Stream"):
        graphscope.mark_stream(None, "side")
    with pytest.raises(IsADirectoryError, match=f"{tmp_path}: is a directory"):
        graphscope.save_kernel_annotations(str(tmp_path))
    assert not [p for p in os.listdir(tmp_path.parent) if ".tmp" in p and p.startswith(
        tmp_path.name)]
    import torch

    with pytest.raises(ValueError, match="depth must be None or an int >= 0"):
        graphscope.register_module_annotations(torch.nn.Linear(2, 2), depth=-1)
    with pytest.raises(TypeError, match="takes a torch.cuda.CUDAGraph, not object"):
        graphscope.remap_to_exec_graph(object())  # returned 0, as for a graph with nothing


def test_a_bundle_output_that_is_a_file_is_refused_without_advising_force(tmp_path, capsys,
                                                                          monkeypatch):
    """'capture -o /dev/null' advised --force, which was then refused too."""
    from tests.conftest import SAMPLES

    f = tmp_path / "a_file"
    f.write_text("x")
    rc, _, err = _run(capsys, monkeypatch, "capture", os.path.join(SAMPLES, "mlp.py"), "-o",
                      str(f))
    assert rc == 2 and "exists and is not a bundle directory" in err and "pass --force" not in err


@pytest.mark.parametrize(("command", "text", "keys", "other"), [
    (["run", "--config", "{cfg}", "-o", "{out}", "{prog}"],
     "replays: 5\ntry_streams: 2\ncounters: 3\n", "counters, try_streams", "capture"),
    (["capture", "{prog}", "--config", "{cfg}", "-o", "{out}"],
     "replays: 5\nop_captures: 3\ngraphs: x\n", "graphs, op_captures", "run"),
])
def test_a_config_key_the_command_does_not_read_is_named(tmp_path, capsys, monkeypatch,
                                                        command, text, keys, other):
    """'run --config' ignored try_streams and counters in silence, capture op_captures and
    graphs: a project's one file may hold both, so it is a
    warning, not an error."""
    from tests.conftest import SAMPLES

    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    argv = [a.format(cfg=cfg, out=tmp_path / "b", prog=os.path.join(SAMPLES, "mlp.py"))
            for a in command]
    _, _, err = _run(capsys, monkeypatch, *argv)
    assert (f"warning: {cfg}: {keys}: graphscope {other}'s option(s), not read by "
            f"graphscope {command[0]}") in err, err
