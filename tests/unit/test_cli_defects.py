"""Command, install and config defects, and the hostile CLI inputs: each test fails
without its fix."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from graphscope.capture.capabilities import probe
from graphscope.cli.main import main
from tests.conftest import DATA, ROOT, SAMPLES

NO_GPU = not probe(try_subscribe=False).gpu
LINT_MODELS = os.path.join(ROOT, "tests", "lint_models")


def _fixture(name):
    p = os.path.join(DATA, name)
    if not os.path.isdir(p):
        pytest.skip(f"fixture {name} not recorded")
    return p


# ------------------------------------------------------------------ 11: lint of every sample
@pytest.mark.parametrize("name", ["decode_kv", "train_step_bf16"])
def test_lint_runs_kwargs_buckets_and_step_samples(name, capsys):
    rc = main(["lint", os.path.join(SAMPLES, f"{name}.py"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["error"] is None, out
    assert not [f for f in out["findings"] if f["severity"] == "error"], out


def test_lint_buckets_run_as_inference():
    """decode_kv's caches are written in forward: under inference_mode as --mode forward
    captures, not as buffers that require grad."""
    from graphscope.capture.lint import lint_model
    from graphscope.capture.loader import load_model_file

    rep = lint_model(load_model_file(os.path.join(SAMPLES, "decode_kv.py")))
    assert rep.error is None and rep.findings == [], rep.findings


def test_lint_user_step_runs_forward_and_backward():
    from graphscope.capture.lint import lint_model
    from graphscope.capture.loader import load_model_file

    rep = lint_model(load_model_file(os.path.join(SAMPLES, "train_step_bf16.py")))
    assert rep.error is None and rep.ran_backward
    assert [f.rule for f in rep.findings] == ["optimizer-needs-gpu"]


# ------------------------------------------------------------------ 12: the command typed
@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU path")
def test_run_without_gpu_names_run(tmp_path, capsys):
    prog = tmp_path / "hello.py"
    prog.write_text("print('hello')\n")
    assert main(["run", "-o", str(tmp_path / "out"), str(prog)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "graphscope run needs an NVIDIA GPU" in err[0], err
    assert "profile" not in err[0]


# ------------------------------------------------------------------ 14: YAML values
@pytest.mark.parametrize(("text", "line", "want"), [
    ("replays: 5\nmode: graph\n", 2, "mode must be one of"),
    ("warmup: -1\n", 1, "warmup must be >= 0"),
    ("mode: step\n\ndepth: -2\n", 3, "depth must be >= 0"),
])
def test_yaml_bad_values_name_file_line_and_key(tmp_path, text, line, want):
    from graphscope._errors import ConfigError
    from graphscope.capture.config import load_yaml

    p = tmp_path / "gs.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_yaml(str(p))
    assert str(e.value).startswith(f"{p}:{line}: {want}"), str(e.value)


def test_env_and_command_line_bad_values_name_their_source(tmp_path, capsys):
    from graphscope._errors import ConfigError
    from graphscope.capture.config import from_env

    with pytest.raises(ConfigError, match=r"^\$GRAPHSCOPE_MODE: mode must be one of"):
        from_env({"GRAPHSCOPE_MODE": "graph"})
    cfg = tmp_path / "gs.yaml"
    cfg.write_text("mode: nope\n")
    rc = main(["capture", os.path.join(SAMPLES, "mlp.py"), "--config", str(cfg),
               "-o", str(tmp_path / "b")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == (f"graphscope: error: {cfg}:1: mode must be one of callables, "
                               "forward, step, not 'nope'"), err


# ------------------------------------------------------------------ 15: doctor
def _doctor(*args, env=None):
    return subprocess.run([sys.executable, "-m", "graphscope", "doctor", *args],
                          capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU path")
def test_doctor_without_gpu_says_what_it_could_not_check():
    r = _doctor()
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    row = next(ln for ln in r.stdout.splitlines() if "CUPTI subscription free" in ln)
    assert "not checked" in row and " no " not in row, row
    for c in ("report", "dump", "diff", "annotate-trace", "lint"):
        assert f"graphscope {c}" in out, c
    assert "Graphviz" in out and "Chromium" in out
    d = json.loads(_doctor("--json").stdout)
    assert "graphviz_dot" in d and "chromium" in d


def test_doctor_without_torch_says_so_once(tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    r = _doctor(env=env)
    assert r.returncode in (0, 2), r.stderr
    assert r.stdout.count("PyTorch is not installed") <= 1, r.stdout
    assert "Traceback" not in r.stderr


# ------------------------------------------------------------------ 16: no sample_models/
@pytest.mark.parametrize("cmd", ["lint", "capture"])
def test_no_model_without_samples_says_what_to_pass(tmp_path, monkeypatch, capsys, cmd):
    import graphscope.capture.loader as loader

    monkeypatch.setattr(loader, "default_model_path", lambda: str(tmp_path / "mlp.py"))
    assert main([cmd, "-o", str(tmp_path / "b")] if cmd == "capture" else [cmd]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no MODEL given" in err[0] and "pass a model file" in err[0], err
    assert "no such model file" not in err[0]


# ------------------------------------------------------------------ stdout: one document
def test_report_html_to_stdout_is_one_document(tmp_path):
    p = _fixture("mlp_step")
    r = subprocess.run([sys.executable, "-m", "graphscope", "report", p, "--html", "-"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.lstrip().lower().startswith("<!doctype html")
    assert r.stdout.rstrip().endswith("</html>"), r.stdout[-200:]
    assert "Top kernels" not in r.stdout.split("</html>")[-1]


def test_two_documents_on_stdout_refused(capsys):
    p = _fixture("mlp_step")
    assert main(["report", p, "--json", "--html", "-"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.strip() == ("graphscope: error: --json and --html would both write to "
                               "stdout; give --html a file name")


# ------------------------------------------------------------------ run as python does
def test_run_module_in_current_directory_is_found(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    rc = main(["run", "-o", str(tmp_path / "out"), "-m", "pkg.mod"])
    err = capsys.readouterr().err
    assert "no module of that name" not in err
    if NO_GPU:
        assert rc == 2 and "graphscope run needs an NVIDIA GPU" in err


def test_program_argv0_kept_as_typed(tmp_path, monkeypatch):
    from graphscope.capture.run import run_program

    (tmp_path / "prog.py").write_text(
        "import sys, os\nopen('seen.txt', 'w').write(sys.argv[0] + '|' + __file__ + '|' "
        "+ __name__)\n")
    monkeypatch.chdir(tmp_path)
    assert run_program("prog.py", ["x"]) == 0
    argv0, file, name = (tmp_path / "seen.txt").read_text().split("|")
    assert argv0 == "prog.py" and file == str(tmp_path / "prog.py") and name == "__main__"


def test_unrelated_baseline_warns_as_diff_does():
    from graphscope.analysis.diff import diff_summary
    from graphscope.cli.commands._compare import unrelated_warnings
    from graphscope.model.bundle_io import read_bundle

    a, b = read_bundle(_fixture("mlp_step")), read_bundle(_fixture("cnn_step"))
    warns = unrelated_warnings(a, b, diff_summary(a, b))
    assert any("different model files" in w for w in warns), warns
    assert unrelated_warnings(a, a, diff_summary(a, a)) == []


# ------------------------------------------------------------------ one-line refusals
def test_lint_table_when_the_model_exits(tmp_path, capsys):
    p = tmp_path / "bye.py"
    p.write_text("import sys\nsys.exit(0)\n")
    rc = main(["lint", str(p), "--timeout", "30"])
    out = capsys.readouterr().out
    assert rc == 2 and "exit" in out and "bye.py" in out, out  # could not be linted


@pytest.mark.parametrize("value", ["nan", "inf", "0.5"])
def test_lint_timeout_must_be_finite(value, capsys):
    assert main(["lint", os.path.join(LINT_MODELS, "good.py"), "--timeout", value]) == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and "must be a number of seconds" in err
    assert "unexpected" not in err


@pytest.mark.parametrize("key", ["1", "null", "true"])
def test_budget_module_keys_must_be_text(tmp_path, capsys, key):
    b = tmp_path / "budgets.yaml"
    b.write_text(f"modules:\n  {key}:\n    max_kernels: 3\n")
    assert main(["check", os.path.join(SAMPLES, "mlp.py"), "--budget", str(b)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{b}:2: module pattern" in err[0], err
    assert "unexpected" not in err[0]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("what", ["--trace", "--annotations"])
def test_disk_full_is_one_line(capsys, what):
    rc = main(["dump", _fixture("mlp_step"), what, "-o", "/dev/full"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == ["graphscope: error: /dev/full: cannot write the output (No "
                               "space left on device); nothing was written"], err


def test_output_naming_a_missing_directory(tmp_path, capsys):
    p = _fixture("mlp_step")
    assert main(["dump", p, "--trace", "-o", str(tmp_path / "newdir") + "/"]) == 2
    assert "names a directory; give a file name" in capsys.readouterr().err
    assert main(["dump", p, "--trace", "-o", str(tmp_path / "newdir" / "t.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["report", p, "--html", str(tmp_path / "newdir") + "/"]) == 2
    assert "names a directory" in capsys.readouterr().err
    assert not (tmp_path / "newdir").exists()


def test_junit_xml_is_well_formed_with_control_characters():
    from graphscope.analysis.budgets import CheckResult
    from graphscope.render.junit import junit_xml

    pat = "L.\x01blocks\x1b[31m.*\x7f"
    xml = junit_xml([CheckResult(f"modules[{pat}]", False, None, None,
                                 f"no module matches {pat!r} \x00")])
    root = ET.fromstring(xml)
    case = root.find("testcase")
    assert case is not None and "\\x01blocks\\x1b" in case.get("name")
    assert root.get("failures") == "1"


def test_check_outputs_refused_before_the_capture(tmp_path, capsys):
    b = tmp_path / "budgets.yaml"
    b.write_text("total: {max_kernels: 300}\n")
    model = os.path.join(SAMPLES, "mlp.py")
    assert main(["check", model, "--budget", str(b), "--json", "--junit", "-"]) == 2
    assert capsys.readouterr().err.strip() == ("graphscope: error: --json and --junit would "
                                               "both write to stdout; give --junit a file name")
    out = tmp_path / "kept"
    out.mkdir()
    assert main(["check", model, "--budget", str(b), "-o", str(out)]) == 2
    assert "already exists: pass --force" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_disk_full_in_any_writer_is_one_line_not_a_bug(capsys):
    """annotate-trace writes through its own stack: a full disk is still the user's to fix."""
    trace = os.path.join(DATA, "run_profiled.trace.json")
    if not os.path.exists(trace):
        pytest.skip("fixture run_profiled.trace.json not recorded")
    rc = main(["annotate-trace", trace, "-a", _fixture("run_profiled"), "-o", "/dev/full"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "No space left on device" in err[0], err
    assert "unexpected" not in err[0]


def test_budget_capture_values_name_the_budgets_file(tmp_path, capsys):
    b = tmp_path / "budgets.yaml"
    b.write_text("capture: {mode: graph}\ntotal: {max_kernels: 3}\n")
    assert main(["check", os.path.join(SAMPLES, "mlp.py"), "--budget", str(b)]) == 2
    # (and its line)
    assert capsys.readouterr().err.strip() == (f"graphscope: error: {b}:1: capture: mode must "
                                               "be one of callables, forward, step, not 'graph'")


def test_bad_mode_on_the_command_line_is_one_line(tmp_path, capsys):
    assert main(["capture", "--mode", "nope", "-o", str(tmp_path / "b")]) == 2
    assert capsys.readouterr().err.strip() == ("graphscope: error: command line: mode must be "
                                               "one of callables, forward, step, not 'nope'")


@pytest.mark.parametrize("argv, msg", [
    (["report", "--deph", "1", "x"], "No such option '--deph'"),
    (["reprot", "x"], "No such command 'reprot'. Did you mean 'report'?"),
    (["xyzzy", "x"], "No such command 'xyzzy'."),
    (["report", "--depth", "-1", "x"], "Invalid value for '--depth'"),
    (["report"], "Missing argument 'BUNDLE'"),
])
def test_usage_errors_are_one_line(capsys, argv, msg):
    from graphscope.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("graphscope: error: ") and msg in err
    assert "--help'" in err


@pytest.mark.parametrize("flag,ext", [("--trace", "trace.json"),
                                      ("--annotations", "annotations.json")])
def test_dump_of_every_graph_is_named_by_the_bundle_not_its_first_graph(tmp_path, monkeypatch,
                                                                        capsys, flag, ext):
    # GIVEN a bundle of two graphs (make_graphed_callables' forward and backward), copied
    import shutil

    from graphscope.model.bundle_io import read_bundle

    path = tmp_path / "callables"
    shutil.copytree(os.path.join(DATA, "mlp_callables"), path)
    monkeypatch.chdir(tmp_path)
    # WHEN all of it is dumped without --graph
    assert main(["dump", str(path), flag]) == 0
    out = capsys.readouterr().out
    # THEN the file is named by the bundle (it holds both graphs)
    assert out.strip() == f"Wrote ./callables.{ext}"
    assert (tmp_path / f"callables.{ext}").is_file()
    # AND with --graph, by that graph
    from graphscope.model.graph import safe_file_stem

    g = read_bundle(str(path)).graphs[1].name
    assert main(["dump", str(path), flag, "--graph", g]) == 0
    assert capsys.readouterr().out.strip() == f"Wrote ./callables.{safe_file_stem(g)}.{ext}"


def test_dump_trace_of_a_multi_rank_bundle_says_where_it_wrote(tmp_path, monkeypatch, capsys):
    # GIVEN a multi-rank bundle in one directory, and another directory to work in
    import shutil

    shutil.copytree(os.path.join(DATA, "ddp_mlp_step"), tmp_path / "in" / "ddp")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    # WHEN its trace is dumped without -o
    assert main(["dump", "../in/ddp/", "--trace"]) == 0
    # THEN it is named by the bundle, written in the current directory, and said so
    assert capsys.readouterr().out.strip() == "Wrote ./ddp.trace.json"
    assert (tmp_path / "work" / "ddp.trace.json").is_file()


def test_the_no_gpu_error_lists_check_bundle(capsys):
    from graphscope.capture import GPU_NEEDED

    assert "check BUNDLE" in GPU_NEEDED.format(cmd="check", why="none")


def test_op_captures_all_is_accepted_from_the_environment_and_a_config_file(tmp_path):
    # as on the command line (--op-captures all): every capture, the config's 0
    from graphscope.capture.config import from_env, load_yaml

    assert from_env({"GRAPHSCOPE_OP_CAPTURES": "all"}) == {"op_captures": 0}
    assert from_env({"GRAPHSCOPE_OP_CAPTURES": "3"}) == {"op_captures": 3}
    p = tmp_path / "c.yaml"
    p.write_text("op_captures: all\nreplays: 2\n")
    assert load_yaml(str(p)) == {"op_captures": 0, "replays": 2}
    p.write_text("op_captures: some\n")
    with pytest.raises(Exception, match="c.yaml:1: key 'op_captures' must be int"):
        load_yaml(str(p))


@pytest.mark.parametrize("argv", [
    ["report", "{missing}", "--html", "{out}"],
    ["dump", "{missing}", "-o", "{out}"],
    ["annotate-trace", "{missing}", "-a", "{missing}", "-o", "{out}"],
])
def test_a_missing_input_is_named_before_an_existing_output(tmp_path, capsys, argv):
    """A typo in the input path was answered 'OUT already exists: pass --force', advice that
    fixes nothing: the missing input is named first, the existing output left alone."""
    out = tmp_path / "out.file"
    out.write_text("keep")
    missing = str(tmp_path / "nosuch")
    rc = main([a.format(missing=missing, out=out) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2 and f"{missing}: no such file or directory" in err, err
    assert "--force" not in err and out.read_text() == "keep"


def test_one_model_file_changed_between_captures_is_not_called_two_files():
    from types import SimpleNamespace

    from graphscope.cli.commands._compare import unrelated_warnings

    def bundle(sha):
        return SimpleNamespace(manifest={"model": {"path": "/m/branches.py", "sha256": sha}},
                               graphs=[SimpleNamespace(name="forward")])

    d = {"modules": [{"only_in": None}]}
    warns = unrelated_warnings(bundle("a"), bundle("b"), d)
    assert warns == ["the bundles come from different versions of /m/branches.py (its "
                     "contents changed between the captures)"]
    assert unrelated_warnings(bundle("a"), bundle("a"), d) == []


def test_markdown_on_stdout_with_a_page_written_keeps_stdout_one_document(tmp_path):
    # GIVEN report --markdown >> $GITHUB_STEP_SUMMARY with the page written beside it
    import subprocess
    import sys

    from tests.conftest import DATA, ROOT

    page = tmp_path / "r.html"
    r = subprocess.run([sys.executable, "-m", "graphscope", "report",
                        os.path.join(DATA, "mlp_step"), "--markdown", "--html", str(page)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    # THEN stdout is the Markdown alone, and "Wrote" goes to stderr
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("## graphscope report") and "Wrote" not in r.stdout
    assert f"Wrote {page}" in r.stderr and page.exists()


def test_markdown_keeps_templated_kernel_names_as_text():
    # GIVEN kernel names with template brackets (GitHub drops what reads as an HTML tag)
    from markdown_it import MarkdownIt

    from graphscope.render.markdown import cell

    name = cell("Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>")
    md = "| kernel |\n|---|\n| " + name + " |\n"
    html = MarkdownIt("commonmark").enable("table").render(md)
    # THEN the rendered cell shows the whole name as text, no tag
    assert "<td>Kernel2&lt;cutlass_80_simt_sgemm_64x64_8x5_tn_align1&gt;</td>" in html
    assert cell("`graphscope capture m.py --try-compile 'L.*'`").startswith("`")


def test_a_cpu_only_torch_is_named_so_not_cuda_none():
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None or torch.cuda.is_available():
        pytest.skip("a CUDA build of torch: its CUDA version is named")
    from click.testing import CliRunner

    from graphscope.cli.main import cli

    out = CliRunner().invoke(cli, ["doctor"], env={"COLUMNS": "200"}).output
    assert "a CPU-only build" in out and "CUDA None" not in out


def test_without_model_a_checkout_uses_its_sample_model(capsys, monkeypatch, tmp_path):
    # GIVEN a source checkout (this one) and no MODEL, from another directory
    from graphscope.capture.loader import default_model_path

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert default_model_path() == os.path.join(root, "sample_models", "mlp.py")
    monkeypatch.chdir(tmp_path)
    # WHEN lint runs on the default model (a CPU run of it)
    rc = main(["lint"])
    out, err = capsys.readouterr()
    # THEN it runs the checkout's sample MLP, as `make demo`'s capture does on a GPU
    assert rc == 0, err
    assert "graphscope lint:" in out
