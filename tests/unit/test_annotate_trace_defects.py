"""annotate-trace on issue 29's defect 5 (a low match is a wrong answer; the output's mode)
and its hostile inputs: each ends in one line, a non-zero exit and nothing written, or in a
correct result."""

from __future__ import annotations

import os
import stat

import pytest

from graphscope.cli.main import main
from tests.conftest import DATA
from tests.unit.test_annotate_trace import _trace, _write


def _run(capsys, *args):
    capsys.readouterr()
    rc = main(["annotate-trace", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("umask", [0o022, 0o027])
@pytest.mark.parametrize("name", ["o.json", "o.json.gz"])
def test_output_mode_follows_the_umask_like_every_output(tmp_path, capsys, umask, name):
    """GIVEN a umask WHEN annotate-trace writes (new, and replacing a 0600 file with --force)
    THEN the file has 0666 less the umask, as every other graphscope output (not mkstemp's
    0600)."""
    tp, ap = _write(tmp_path, *_trace(n_nodes=8, replays=1))
    out = tmp_path / name
    old = os.umask(umask)
    try:
        assert _run(capsys, tp, "-a", ap, "-o", str(out))[0] == 0
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o666 & ~umask
        os.chmod(out, 0o600)
        assert _run(capsys, tp, "-a", ap, "-o", str(out), "--force")[0] == 0
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o666 & ~umask
    finally:
        os.umask(old)


def _one_line(rc, out_path, err, *want):
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert all(w in lines[0] for w in want), lines[0]
    assert not os.path.exists(out_path)
    assert not [p for p in os.listdir(os.path.dirname(out_path)) if p.endswith(".tmp")]


def test_wrong_bundle_is_refused_with_the_figure(tmp_path, capsys):
    """Defect 5: the run_profiled trace against another program's bundle matched 40 of 105
    kernels and exited 0. GIVEN that pair WHEN annotated THEN one line with the figure, exit
    2 and no output; a threshold under the figure writes it, with the figure as a warning."""
    trace = os.path.join(DATA, "run_profiled.trace.json")
    wrong = os.path.join(DATA, "mlp_step")
    out = str(tmp_path / "o.json")
    rc, _, err = _run(capsys, trace, "-a", wrong, "-o", out)
    _one_line(rc, out, err, "matched 40 of 105", "(38.1%)", "--min-match 0.9")
    rc, _, err = _run(capsys, trace, "-a", wrong, "-o", out, "--min-match", "0.35")
    assert rc == 0 and "warning: 40 of 105 graph work events matched" in err
    rc, _, _ = _run(capsys, trace, "-a", os.path.join(DATA, "run_profiled"), "-o", out, "-f")
    assert rc == 0  # its own bundle: 105 of 105


def test_pickle_on_a_trace_without_node_ids_is_refused(tmp_path, capsys):
    """Defect 5: a pickle cannot be joined to a torch <= 2.11 trace (no graph node ids); it
    annotated 0 events and exited 0. Now: refused, saying to pass the bundle."""
    trace = os.path.join(DATA, "run_profiled.trace.json")
    out = str(tmp_path / "o.json")
    rc, _, err = _run(capsys, trace, "-a", os.path.join(DATA, "run_profiled", "annotations.pkl"),
                      "-o", out)
    _one_line(rc, out, err, "matched 0 of 105", "no graph node ids", "-a BUNDLE")


def test_annotations_of_other_graphs_are_refused(tmp_path, capsys):
    """A trace with graph node ids and a pickle of another program (other exec ids): 0 of 180
    graphed events; the right pickle, which leaves 10% of the nodes unannotated, passes
    without a warning (a graph the pickle knows counts whole)."""
    tp, ap = _write(tmp_path, *_trace())
    out = str(tmp_path / "o.json")
    rc, _, err = _run(capsys, tp, "-a", os.path.join(DATA, "mlp_step", "annotations.pkl"),
                      "-o", out)
    _one_line(rc, out, err, "matched 0 of 180", "(0.0%)")
    rc, _, err = _run(capsys, tp, "-a", ap, "-o", out)
    assert rc == 0 and "warning" not in err


def test_a_trace_without_graph_work_is_refused(tmp_path, capsys):
    trace, ann = _trace(n_nodes=4, replays=1)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") not in (
        "kernel", "gpu_memcpy")]
    tp, ap = _write(tmp_path, trace, ann)
    out = str(tmp_path / "o.json")
    rc, _, err = _run(capsys, tp, "-a", ap, "-o", out)
    _one_line(rc, out, err, "no CUDA graph work")
    assert _run(capsys, tp, "-a", ap, "-o", out, "--min-match", "0")[0] == 0


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_min_match_out_of_range_is_refused(tmp_path, capsys, value):
    tp, ap = _write(tmp_path, *_trace(n_nodes=4, replays=1))
    out = str(tmp_path / "o.json")
    rc, _, err = _run(capsys, tp, "-a", ap, "-o", out, "--min-match", value)
    assert rc == 2 and "--min-match" in err and not os.path.exists(out)
