"""annotate-trace on a low match (a wrong answer, refused) and on the output's mode
and its hostile inputs: each ends in one line, a non-zero exit and nothing written, or in a
correct result."""

from __future__ import annotations

import json
import os
import pickle
import stat

import pytest

from graphscope.cli.main import main
from graphscope.trace_annotate import TraceError, annotate_trace_file
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


# ---- hostile inputs: one line, exit 2, nothing written; or a correct result ----

E = 7 << 32  # the exec id of _trace()'s graph


def _annotate_with(tmp_path, capsys, ann_bytes, *extra, name="a.pkl"):
    tp, _ = _write(tmp_path, *_trace(n_nodes=8, replays=1))
    ap = tmp_path / name
    ap.write_bytes(ann_bytes)
    out = str(tmp_path / "o.json")
    rc, _, err = _run(capsys, tp, "-a", str(ap), "-o", out, *extra)
    return rc, err, out, str(ap)


@pytest.mark.parametrize("ann", [
    pickle.dumps({1 << 64: [{"a": 1}], E: [{"a": 1}]}),
    pickle.dumps({-1: [{"a": 1}], E: [{"a": 1}]}),
    json.dumps({str(1 << 70): [{"a": 1}], str(E): [{"a": 1}]}).encode(),
], ids=["2^64", "negative", "json-2^70"])
def test_annotation_keys_out_of_range_are_refused(tmp_path, capsys, ann):
    """They ended in OverflowError tracebacks (numpy's uint64 key column)."""
    rc, err, out, ap = _annotate_with(tmp_path, capsys, ann)
    _one_line(rc, out, err, ap, "out of range", "0..2^64-1")


@pytest.mark.parametrize("stream", [1 << 70, (1 << 63) - 1, 1 << 53, -5, float("inf"), 1e300])
def test_annotated_streams_out_of_range_are_refused(tmp_path, capsys, stream):
    """A stream becomes an event's lane: 2^70, inf and 1e300 ended in OverflowError
    tracebacks, 2^63-1 and -5 were written as lanes no JSON reader holds exactly or none
    has."""
    rc, err, out, ap = _annotate_with(tmp_path, capsys, pickle.dumps({E: [{"stream": stream}]}))
    _one_line(rc, out, err, ap, "stream", "out of range")


@pytest.mark.parametrize("stream", ["abc", None, float("nan"), [3]])
def test_streams_that_are_no_integer_leave_the_lane_alone(tmp_path, capsys, stream):
    rc, err, out, _ = _annotate_with(tmp_path, capsys,
                                     pickle.dumps({E | i: [{"stream": stream, "m": i}]
                                                   for i in range(8)}))
    assert rc == 0, err
    kernels = [e for e in json.loads(open(out).read())["traceEvents"]
               if e.get("cat") in ("kernel", "gpu_memcpy")]
    assert len(kernels) == 8 and all(e["tid"] == 7 and "m" in e["args"] for e in kernels)


@pytest.mark.parametrize("value", [str(1 << 70), "-1", str(1 << 53)])
def test_default_stream_out_of_range_is_refused(tmp_path, capsys, value):
    tp, ap = _write(tmp_path, *_trace(n_nodes=4, replays=1))
    out = str(tmp_path / "o.json")
    rc, _, err = _run(capsys, tp, "-a", ap, "-o", out, "--default-stream", value)
    assert rc == 2 and "--default-stream" in err and not os.path.exists(out)
    with pytest.raises(TraceError, match="default_stream .* out of range"):
        annotate_trace_file(tp, ap, out, default_stream=int(value))
    assert not os.path.exists(out)


CRAFTED = {  # opcode sequences the restricted unpickler runs without naming a class
    "unhashable-key": b"\x80\x02}]K\x01s.",  # SETITEM with a list key: TypeError
    "append-to-dict": b"\x80\x02}K\x01a.",  # APPEND onto a dict: AttributeError
    "build-dict": b"\x80\x02}}b.",  # BUILD on a dict: AttributeError
    "setitem-on-list": b"\x80\x02]K\x01K\x02s.",  # SETITEM on a list: IndexError
    "dict-of-list-key": b"\x80\x02(]K\x01d.",  # DICT with a list key: TypeError
    "set-of-list": b"\x80\x04\x8f(]\x90.",  # ADDITEMS of a list: TypeError
    "memo-miss": b"\x80\x02h\x05.",
    "extension-code": b"\x80\x02\x82\x01.",
    "newobj-of-int": b"\x80\x02K\x01)\x81.",
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_crafted_pickles_are_one_clear_error(tmp_path, capsys, name):
    """Type confusion: each crashed the restricted unpickler (a traceback, or the catch-all
    "unexpected error")."""
    rc, err, out, ap = _annotate_with(tmp_path, capsys, CRAFTED[name])
    _one_line(rc, out, err, ap, "not an annotation pickle or JSON")


@pytest.mark.parametrize("lead", [b"\xef\xbb\xbf", b"\t", b"\r\n  ", b"\xef\xbb\xbf\n"],
                         ids=["bom", "tab", "crlf", "bom-newline"])
def test_json_annotations_with_a_bom_or_leading_whitespace_are_read(tmp_path, capsys, lead):
    """Valid JSON was refused: the format was guessed from the first byte."""
    _, ann = _trace(n_nodes=8, replays=1)
    text = json.dumps({str(k): v for k, v in ann.items()}).encode()
    rc, err, out, _ = _annotate_with(tmp_path, capsys, text, name="a.json")
    assert rc == 0, err
    plain = open(out, "rb").read()
    rc, err, out, _ = _annotate_with(tmp_path, capsys, lead + text, "-f", name="a.json")
    assert rc == 0, err
    assert open(out, "rb").read() == plain


def test_a_200000_deep_pickle_has_its_own_message(tmp_path, capsys):
    """It ended in the catch-all "unexpected error" (RecursionError while stringifying)."""
    n = 200_000
    deep = (b"\x80\x02}\x8a\x05" + E.to_bytes(5, "little") + b"]" * n + b"a" * (n - 1)
            + b"s.")
    rc, err, out, ap = _annotate_with(tmp_path, capsys, deep)
    _one_line(rc, out, err, ap, "nested more than 64 levels deep")
    rc, err, out, ap = _annotate_with(tmp_path, capsys, b"[" * n + b"]" * n, "-f",
                                      name="a.json")
    _one_line(rc, out, err, ap, "nested too deeply")


def test_events_without_a_stream_are_annotated(tmp_path, capsys):
    """Graphed events without a tid or args.stream, a ``thread_name`` whose args is no
    object, an ungraphed kernel without a tid: a correct result (the graphed events take
    their lane; the rest stays as it was), valid JSON."""
    trace, ann = _trace(n_nodes=8, replays=1)
    work = [e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy")]
    for e in work[:4]:
        e.pop("tid")
        e["args"].pop("stream")
    meta = next(e for e in trace["traceEvents"] if e.get("name") == "thread_name")
    meta["args"] = 5
    trace["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "eager", "pid": 0,
                                 "ts": 1.0, "dur": 1.0, "args": {}})
    tp, ap = _write(tmp_path, trace, ann)
    out = str(tmp_path / "o.json")
    rc, _, err = _run(capsys, tp, "-a", ap, "-o", out)
    assert rc == 0, err
    got = json.loads(open(out).read())["traceEvents"]
    graphed = [e for e in got if e["ph"] == "X" and "graph node id" in e.get("args", {})]
    assert len(graphed) == 8 and all(e["tid"] == e["args"]["stream"] for e in graphed)
    assert [e for e in got if e.get("name") == "eager"][0].get("tid") is None


def test_bundle_events_without_a_stream_still_match_by_sequence(tmp_path, capsys):
    """A bundle whose timeline events lack "stream" (annotate-trace does not read it): the
    torch <= 2.11 trace is still matched whole."""
    import shutil

    from tests.unit.test_annotate_trace import sequence_trace

    b = tmp_path / "b"
    shutil.copytree(os.path.join(DATA, "mlp_step"), b)
    tl = json.loads((b / "timeline.json").read_text())
    for e in tl["events"]:
        e.pop("stream", None)
    (b / "timeline.json").write_text(json.dumps(tl))
    tp = sequence_trace(tmp_path, "mlp_step")
    out = str(tmp_path / "o.json")
    rc, printed, err = _run(capsys, tp, "-a", str(b), "-o", out)
    assert rc == 0 and "matched 24 of 24" in printed, err


@pytest.mark.parametrize("target", ["/dev/full", "newdir/"])
def test_an_output_that_cannot_be_written_is_one_clear_error(tmp_path, capsys, monkeypatch,
                                                           target):
    """A full device (ENOSPC) and a path that names a directory that is not there ended in
    the catch-all "unexpected error" (OSError); now one line, exit 2, no temp file left."""
    if target == "/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    tp, ap = _write(tmp_path, *_trace(n_nodes=8, replays=1))
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    rc, _, err = _run(capsys, tp, "-a", ap, "-o", target)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and target in lines[0], err
    assert "cannot write" in lines[0] or "names a directory" in lines[0], err
    assert sorted(os.listdir(tmp_path)) == before


def test_native_and_streamio_never_import_the_annotator():
    """The native door, the stream I/O and the output rules never import the annotator (the
    annotator imports them: a cycle otherwise). The dependency goes one way: trace_annotate may
    import
    native and streamio, never the reverse (function-level imports included)."""
    import ast

    import graphscope

    root = os.path.dirname(graphscope.__file__)
    for name in ("native/__init__.py", "trace_annotate/streamio.py", "model/outputs.py"):
        tree = ast.parse(open(os.path.join(root, name)).read())
        imported = [(n.module or "") + ":" + ",".join(a.name for a in n.names)
                    for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                     for a in n.names]
        assert not [m for m in imported if "trace_annotate" in m or "exporters" in m], name


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_a_trace_that_starts_with_a_bom_is_written_without_it(tmp_path, capsys, name):
    """GIVEN a recorded trace with a UTF-8 byte order mark in front (as some Windows editors
    save it), WHEN it is annotated, THEN the output is JSON that json.load reads (it refuses
    a BOM) and the same as the annotation of the trace without one."""
    import gzip

    src = open(os.path.join(DATA, "run_profiled.trace.json"), "rb").read()
    opener = gzip.open if name.endswith(".gz") else open
    for stem, data in (("plain", src), ("bom", b"\xef\xbb\xbf" + src)):
        with opener(tmp_path / f"{stem}.{name}", "wb") as f:
            f.write(data)
        rc, _, err = _run(capsys, str(tmp_path / f"{stem}.{name}"), "-a",
                          os.path.join(DATA, "run_profiled"), "-o",
                          str(tmp_path / f"{stem}.out.{name}"))
        assert rc == 0, err
    with opener(tmp_path / f"bom.out.{name}", "rb") as f:
        out = f.read()
    with opener(tmp_path / f"plain.out.{name}", "rb") as f:
        assert out == f.read()
    assert json.loads(out.decode("utf-8"))["traceEvents"]
