"""The CLI through click's CliRunner and end to end through a subprocess."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from graphscope.capture.capabilities import probe
from graphscope.cli.main import cli, main
from tests.conftest import DATA, ROOT

NO_GPU = not probe(try_subscribe=False).gpu


def _fixture(name):
    p = os.path.join(DATA, name)
    if not os.path.isdir(p):
        pytest.skip(f"fixture {name} not recorded")
    return p


def test_help_lists_commands():
    r = CliRunner().invoke(cli, ["--help"])
    assert r.exit_code == 0
    for c in ("capture", "annotate", "dump", "report", "doctor"):
        assert c in r.output


def test_subprocess_help_and_version():
    r = subprocess.run([sys.executable, "-m", "graphscope", "--version"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0 and "graphscope, version" in r.stdout


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU path")
@pytest.mark.parametrize("cmd", ["capture", "annotate"])
def test_capture_without_gpu_is_one_clear_line(cmd, capsys):
    rc = main([cmd, os.path.join(ROOT, "sample_models", "mlp.py")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "needs an NVIDIA GPU" in err[0] and "dump" in err[0]
    assert "graphscope report" in err[0]


def test_doctor_runs_anywhere():
    r = subprocess.run([sys.executable, "-m", "graphscope", "doctor", "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert "can_capture" in d and "header_cupti_api_version" in d
    assert d["gzip"].startswith(("ISA-L (python-isal ", "zlib ("))  # what .gz traces go through
    if NO_GPU:
        assert d["can_capture"] is False and d["problems"]


def test_report_json_and_tables(capsys):
    p = _fixture("mlp_step")
    assert main(["report", p, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["replays"] > 0 and s["modules"][0]["module"] == "L"
    r = CliRunner().invoke(cli, ["report", p, "--depth", "1"], terminal_width=120)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert any(line.startswith("│ L ") for line in lines)
    assert any("fc1" in line for line in lines) and any("(loss)" in line for line in lines)
    assert "Top kernels by time" in r.output and "aten::addmm" in r.output


def test_report_errors_are_one_line(tmp_path, capsys):
    rc = main(["report", str(tmp_path / "missing")])
    err = capsys.readouterr().err.strip().splitlines()
    want = f"graphscope: error: {tmp_path / 'missing'}: no such bundle directory"
    assert rc == 2 and err == [want]


def test_dump_dot_raw_trace_annotations(tmp_path):
    pytest.importorskip("pydot")
    p = _fixture("mlp_step")
    for flag, name in (("--dot", "a.dot"), ("--raw", "r.dot"), ("--trace", "t.json"),
                       ("--annotations", "ann.json")):
        out = tmp_path / name
        rc = main(["dump", p, flag, "-o", str(out)])
        assert rc == 0 and out.exists(), flag
    assert "digraph" in (tmp_path / "a.dot").read_text()
    assert "graph_" in (tmp_path / "r.dot").read_text()
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    ann = json.loads((tmp_path / "ann.json").read_text())
    assert all(int(k) >> 32 for k in ann)
    # a DOT file graphscope wrote is its own: written again without --force; a file of the
    # user's is not
    assert main(["dump", p, "--dot", "-o", str(tmp_path / "a.dot")]) == 0
    (tmp_path / "a.dot").write_text("digraph user {}\n")
    assert main(["dump", p, "--dot", "-o", str(tmp_path / "a.dot")]) == 2  # exists, no --force
    assert main(["dump", p, "--dot", "-o", str(tmp_path / "a.dot"), "--force"]) == 0


def test_dump_without_output_writes_into_the_current_directory(tmp_path, monkeypatch, capsys):
    from graphscope.model.bundle_io import read_bundle

    # GIVEN a recorded bundle in the source tree, and another directory to work in
    src = _fixture("mlp_step")
    beside = sorted(os.listdir(os.path.dirname(src)))
    graph = read_bundle(src).graphs[0].name
    monkeypatch.chdir(tmp_path)
    # WHEN it is dumped without -o
    assert main(["dump", src]) == 0
    # THEN the DOT lands in the current directory, named by the bundle and graph, and the line
    # says where
    name = f"mlp_step.{graph}.dot"
    assert capsys.readouterr().out.strip() == f"Wrote ./{name}"
    assert (tmp_path / name).read_text().startswith("// generator: graphscope\ndigraph")
    # AND nothing is written beside the bundle
    assert sorted(os.listdir(os.path.dirname(src))) == beside


def test_dump_svg_without_graphviz(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` anywhere
    rc = main(["dump", _fixture("mlp_step"), "--format", "svg", "-o", str(tmp_path / "x.svg")])
    assert rc == 2 and "install Graphviz" in capsys.readouterr().err
    assert not (tmp_path / "x.svg").exists()


def test_dump_trace_of_annotate_bundle_explains(capsys):
    rc = main(["dump", _fixture("mlp_annotate"), "--trace", "-o", "-"])
    assert rc == 2 and "no replay events" in capsys.readouterr().err


def test_end_to_end_subprocess_dump_writes_json(tmp_path):
    out = tmp_path / "trace.json"
    r = subprocess.run([sys.executable, "-m", "graphscope", "dump", _fixture("cnn_step"),
                        "--trace", "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"Wrote {out}"
    tr = json.loads(out.read_text())
    assert any(e.get("args", {}).get("autograd_phase") == "backward" for e in tr["traceEvents"])


# ---------------------------------------------------------------- a CLI without side effects
_COUNT = """
import json, sys
from graphscope.cli.main import main
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "mods": sorted(m for m in sys.modules if m == "torch"
                  or m.startswith("graphscope"))}), file=sys.stderr)
"""
# Modules the commands that read bundles (and --help) must never load: torch, the native
# extension, the capture pipeline and the annotation machinery.
_NEVER = ("torch", "graphscope.native._native", "graphscope.native._opwatch", "graphscope.native",
          "graphscope.capture", "graphscope.annotate", "graphscope.capture.cuda_graphs")


def _imported(*args):
    r = subprocess.run([sys.executable, "-c", _COUNT, *args], capture_output=True, text=True,
                       cwd=ROOT)
    got = json.loads(r.stderr.strip().splitlines()[-1])
    assert got["rc"] == 0, r.stderr
    return got["mods"]


@pytest.mark.parametrize(("args", "bound"), [
    (["--help"], 10),
    # the report of a bundle as captured: its summary.json and diagnosis.json, the report
    # model, the answer and the diagnosis's result types and checks, the terminal view and its
    # renderers; not the nodes, the analysis, nor the ranks, DDP or collectives code
    (["report", "@mlp_step"], 24),
    (["report", "@mlp_step", "--json"], 22),
])
def test_commands_import_only_what_they_use(args, bound):
    args = [_fixture(a[1:]) if a.startswith("@") else a for a in args]
    mods = _imported(*args)
    bad = [m for m in mods if m.startswith(_NEVER)]
    assert not bad, f"graphscope {' '.join(args)} imported {bad}"
    if args[0] == "report":
        unused = [m for m in mods if m.endswith((".ranks", ".ddp", ".collectives"))]
        assert not unused, unused
    assert len(mods) <= bound, f"{len(mods)} graphscope modules (bound {bound}): {mods}"


def test_help_lists_commands_from_the_registry_and_it_matches_the_docstrings():
    import importlib

    import click

    from graphscope.cli.commands import COMMANDS

    for name, (module, attr, short) in COMMANDS.items():
        cmd = getattr(importlib.import_module(module), attr)
        assert cmd.name == name
        assert short == click.utils.make_default_short_help(cmd.help, 10**6), name


def test_shared_options_are_defined_once():
    """Every command's --depth, --json, -f/--force and -v come from cli/options.py."""
    import importlib

    import click

    from graphscope.cli.commands import COMMANDS

    for name, (module, attr, _) in COMMANDS.items():
        cmd = getattr(importlib.import_module(module), attr)
        params = {p.name: p for p in cmd.params}
        assert "verbose" in params, name
        if "depth" in params:
            t = params["depth"].type
            assert isinstance(t, click.IntRange) and t.min == 0, name
        if "force" in params:
            f = params["force"]
            assert f.opts == ["-f", "--force"] and f.is_flag and f.default is False, name
        if "as_json" in params:
            assert params["as_json"].opts == ["--json"], name
        if "output" in params:
            assert params["output"].opts == ["-o", "--output"], name


def test_verbose_after_the_subcommand(tmp_path, capsys):
    missing = str(tmp_path / "missing")
    for args in (["-v", "report", missing], ["report", missing, "-v"],
                 ["report", "--verbose", missing]):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert "No such option" not in err and "Traceback" in err, args
    assert main(["report", missing]) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("cmd", [
    ["capture", "@model", "-o", "@out"],
    ["annotate", "@model", "-o", "@out"],
    ["capture", "@model", "--nproc", "2", "-o", "@out"],
    ["run", "-o", "@out", "@model"],
])
def test_existing_bundle_output_refused_before_any_gpu_work(tmp_path, capsys, cmd):
    out = tmp_path / "b"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    model = os.path.join(ROOT, "sample_models", "mlp.py")
    args = [model if a == "@model" else str(out) if a == "@out" else a for a in cmd]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"graphscope: error: {out} already exists: pass --force to replace it or "
                   "choose -o PATH"], err
    # --force replaces bundles only: a directory of the user's is refused, GPU or not
    assert main([*args, "--force"] if cmd[0] != "run" else
                ["run", "--force", *args[1:]]) == 2
    assert "not a graphscope bundle" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "mine"


def test_bundle_output_under_a_file_refused(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    model = os.path.join(ROOT, "sample_models", "mlp.py")
    assert main(["capture", model, "-o", str(f / "b")]) == 2
    assert f"{f} is not a directory" in capsys.readouterr().err


def test_command_modules_have_no_import_time_side_effects():
    """Importing a command's module loads click and cli/options.py only: graphscope's
    machinery is imported inside the command's body, when it runs."""
    from graphscope.cli.commands import COMMANDS

    code = ("import importlib, json, sys\n"
            "before = set(sys.modules)\n"
            "importlib.import_module(sys.argv[1])\n"
            "print(json.dumps(sorted(m for m in set(sys.modules) - before "
            "if m == 'torch' or m.startswith('graphscope'))))\n")
    allowed = {"graphscope", "graphscope._errors", "graphscope._version",
               "graphscope.cli", "graphscope.cli.options", "graphscope.cli.commands"}
    for name, (module, _, _) in sorted(COMMANDS.items()):
        r = subprocess.run([sys.executable, "-c", code, module], capture_output=True,
                           text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        extra = set(json.loads(r.stdout)) - allowed - {module}
        assert not extra, f"importing {name}'s module loads {sorted(extra)}"


def test_a_closed_pipe_is_not_a_failed_gate():
    # GIVEN diff, report and annotate-trace writing into a pipe whose reader has gone
    # (`| head -1` in CI)
    for args in (["report", _fixture("run_ladder")], ["report", _fixture("run_ladder"), "--json"],
                 ["diff", _fixture("branches_forward"), _fixture("branches_2s_forward")],
                 ["annotate-trace", os.path.join(ROOT, "tests", "data", "run_profiled.trace.json"),
                  "-a", _fixture("run_profiled"), "-o", "-"]):
        p = subprocess.Popen([sys.executable, "-m", "graphscope", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        p.stdout.close()  # WHEN the reader closes before the first line
        err = p.stderr.read().decode()
        p.wait(timeout=120)
        # THEN the exit code is the shell's for SIGPIPE (141), not 1 ("regression found"),
        # and nothing is printed about it
        assert p.returncode == 141, (args, p.returncode, err)
        assert err == ""


def test_check_and_diff_say_what_they_compare(tmp_path, capsys):
    # GIVEN a regression budget, and bundles of other models, other graphs or several ranks
    budget = tmp_path / "b.yaml"
    budget.write_text("regression: {max_pct: 10}\n")
    # WHEN check reads a recorded bundle against a baseline of another model
    rc = main(["check", _fixture("mlp_step"), "--budget", str(budget), "--baseline",
               _fixture("branches_forward")])
    err = capsys.readouterr().err
    # THEN it warns as diff does, and the gate fails: it compared no graph
    assert rc == 1 and "different model files" in err, err
    # AND a diff of bundles with different graphs says the totals compare different sets
    main(["diff", _fixture("decode_kv_forward"), _fixture("run_decode")])
    err = capsys.readouterr().err
    assert "3 only in A: bucket0" in err and "2 only in B: decode.py:71 #0" in err, err
    # AND a mistyped bundle path is not a GPU question
    assert main(["check", str(tmp_path / "nope"), "--budget", str(budget)]) == 2
    assert "nope: no such bundle directory or model file" in capsys.readouterr().err
    # AND neither is a file that is no bundle and no model file
    assert main(["check", os.path.join(ROOT, "README.md"), "--budget", str(budget)]) == 2
    assert "README.md: neither a bundle directory nor a model file (.py)" in (
        capsys.readouterr().err)
    # AND a multi-rank directory names the rank bundles to pass
    assert main(["diff", _fixture("ddp_mlp_step"), _fixture("ddp_mlp_step")]) == 2
    err = capsys.readouterr().err
    assert "a multi-rank bundle (2 ranks)" in err and "ddp_mlp_step/rank0" in err, err


def test_report_of_a_graph_never_replayed_shows_no_times(capsys):
    # GIVEN a recorded ladder whose first two buckets the program never replayed while traced
    # WHEN one of them is reported alone
    assert main(["report", _fixture("run_ladder"), "--graph", "#1"]) == 0
    out = capsys.readouterr().out
    # THEN no 0-ns figures stand for "not measured": no per-replay work, no program coverage
    assert "graph work 0 ns" not in out and "0 ns │ 0.0" not in out
    assert "graph coverage" not in out
    assert "29 nodes" in out  # the diagnosis counts nodes, and says so
    assert main(["report", _fixture("run_ladder"), "--graph", "#1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    o = d["diagnosis"]["graphs"][0]
    assert o["critical_path"]["length_ns"] is None and o["critical_path"]["length_nodes"] == 29


def test_dump_refuses_two_outputs_and_keeps_to_its_graph(tmp_path, capsys):
    # GIVEN dump asked for two kinds of output at once, or a rendering of plain text
    assert main(["dump", _fixture("mlp_step"), "--trace", "--raw", "-o", "-"]) == 2
    assert "--raw, --trace: dump writes one of them" in capsys.readouterr().err
    assert main(["dump", _fixture("mlp_step"), "--annotations", "--format", "png", "-o",
                 str(tmp_path / "a.png")]) == 2
    assert "--format png renders the annotated DOT" in capsys.readouterr().err
    assert not (tmp_path / "a.png").exists()
    # WHEN a trace or the annotations are asked for one graph of a ladder
    whole, one = tmp_path / "all.json", tmp_path / "one.json"
    assert main(["dump", _fixture("run_ladder"), "--trace", "-o", str(whole)]) == 0
    assert main(["dump", _fixture("run_ladder"), "--trace", "--graph", "#3", "-o",
                 str(one)]) == 0
    # THEN the trace holds that graph's events only
    ev = [e for e in json.loads(one.read_text())["traceEvents"] if e.get("ph") == "X"]
    ev_all = [e for e in json.loads(whole.read_text())["traceEvents"] if e.get("ph") == "X"]
    assert 0 < len(ev) < len(ev_all)
    capsys.readouterr()
    assert main(["dump", _fixture("run_ladder"), "--annotations", "--graph", "#3", "-o",
                 "-"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 39
    # AND a graph never replayed has no trace to give, said in one line
    assert main(["dump", _fixture("run_ladder"), "--trace", "--graph", "#1", "-o",
                 str(tmp_path / "none.json")]) == 2
    assert "never replayed while traced" in capsys.readouterr().err


def test_an_unwritable_output_directory_is_one_line(capsys):
    # GIVEN an output in a directory nobody may write (as root: /proc refuses new files)
    assert main(["dump", _fixture("mlp_step"), "-o", "/proc/graphscope-test.dot"]) == 2
    err = capsys.readouterr().err
    # THEN one line names the directory, not an "unexpected" error
    assert err.startswith("graphscope: error: /proc: cannot write there"), err
    assert "unexpected" not in err


def test_a_graph_view_keeps_the_launch_queue_of_the_whole_bundle(capsys):
    # GIVEN a ladder whose replays queue behind other graphs' (launch_queued_ns > 0)
    def graph3(args):
        assert main(["report", _fixture("run_ladder"), "--json", *args]) == 0
        d = json.loads(capsys.readouterr().out)["diagnosis"]
        return next(o for o in d["graphs"] if "#3" in o["graph"])

    whole, view = graph3([]), graph3(["--graph", "#3"])
    # THEN the graph's own view gives it the same launch latency and queued time
    assert whole["replays"][0]["launch_queued_ns"] > 0
    for k in ("launch_ns", "launch_queued_ns"):
        assert [m[k] for m in view["replays"]] == [m[k] for m in whole["replays"]]
    assert view["launch_latency_ns"] == whole["launch_latency_ns"]


def test_tables_into_a_pipe_are_not_wrapped_at_80_columns():
    # GIVEN report's output going to a pipe (a file, `| less`, a CI log): no terminal width
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    out = subprocess.run([sys.executable, "-m", "graphscope", "report", _fixture("run_ladder"),
                          "--ladder"], capture_output=True, text=True, cwd=ROOT, env=env,
                         check=True).stdout
    # THEN the ladder's headers and figures are whole (rich's default 80 cut "bucke t"), at
    # 100 columns, with no line ending in spaces
    assert "bucket  batch  replays  time/replay  time/row" in out, out
    assert max(len(line) for line in out.splitlines()) == 100
    assert not [ln for ln in out.splitlines() if ln.endswith(" ")]
    # AND COLUMNS still sets the width
    narrow = subprocess.run([sys.executable, "-m", "graphscope", "report",
                             _fixture("run_ladder"), "--ladder"], capture_output=True,
                            text=True, cwd=ROOT, env={**env, "COLUMNS": "80"}, check=True).stdout
    assert "time/row ┃" not in narrow and max(len(x) for x in narrow.splitlines()) <= 80
