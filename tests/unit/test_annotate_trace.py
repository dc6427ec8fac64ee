"""annotate-trace against PyTorch 2.14.1's own annotator (taken from the wheel when it is on
this machine) and on the error paths."""

import glob
import gzip
import json
import os
import pickle
import subprocess
import sys
import zipfile
from collections import Counter

import pytest

from graphscope.cli.main import main
from graphscope.trace_annotate import TraceError, annotate_trace_file, load_annotations
from tests.conftest import DATA

EXEC = 7


def _trace(n_nodes=60, replays=3, low32=False, jitter=False):
    """A Kineto-style trace like shared/bench/gen_kineto_trace.py writes, with the cases the
    annotator must handle: side-stream annotations, noise on empty streams, overlaps."""
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
          {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
          {"ph": "M", "name": "thread_name", "pid": 0, "tid": 9, "args": {"name": "stream 9"}}]
    ts, corr = 1000.0, 100
    for _ in range(replays):
        corr += 1
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1,
                   "tid": 1, "ts": ts - 5, "dur": 4.0, "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "step", "pid": 0, "tid": 9,
                   "ts": ts, "dur": 1.0, "args": {}})
        for i in range(n_nodes):
            nid = (EXEC << 32) | i
            args = {"device": 0, "stream": 7, "correlation": corr, "grid": [4, 1, 1],
                    "block": [128, 1, 1], "graph node id": nid}
            if low32:
                args["graph node id"] = i
                args["graph id"] = EXEC
            cat = "gpu_memcpy" if i % 17 == 0 else "kernel"
            dur = 2.0 + i % 5
            ev.append({"ph": "X", "cat": cat, "name": f"k{i % 6}", "pid": 0, "tid": 7,
                       "ts": round(ts, 3), "dur": dur, "args": args})
            ts += dur + (-0.4 if jitter and i % 7 == 3 else 0.5)
        ev.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": ts, "cat": "ac2g",
                   "name": "ac2g", "bp": "e"})
        ts += 20
    ann = {}
    for i in range(n_nodes):
        if i % 10 == 9:
            continue
        d = {"module_name": f"L.layers.{i // 20}.mlp", "name": f"L.layers.{i // 20}.mlp",
             "size": i}
        if i > n_nodes // 2:
            d["autograd_phase"] = "backward"
        if i % 13 == 0:
            d["stream"] = 11
        ann[(EXEC << 32) | i] = [d]
    ann[(EXEC << 32) | 1] = ["legacy string"]
    ann[(EXEC << 32) | 2] = [{"str": "legacy dict"}]
    return {"schemaVersion": 1, "traceEvents": ev, "displayTimeUnit": "ms",
            "deviceProperties": [{"id": 0, "name": "H200"}]}, ann


def _write(tmp_path, trace, ann, gz=False):
    tp = tmp_path / ("t.json.gz" if gz else "t.json")
    with (gzip.open(tp, "wt") if gz else open(tp, "w")) as f:
        json.dump(trace, f)
    ap = tmp_path / "a.pkl"
    with open(ap, "wb") as f:
        pickle.dump(ann, f)
    return str(tp), str(ap)


def _load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def _torch_script(tmp_path):
    wheels = glob.glob("/opt/pypi-more/files/torch-2.14.1-*.whl") + glob.glob(
        os.environ.get("GRAPHSCOPE_TORCH_WHEEL", "/nonexistent"))
    if not wheels:
        pytest.skip("torch 2.14.1 wheel (for its _annotate_cuda_graph_trace.py) not on disk")
    with zipfile.ZipFile(wheels[0]) as z:
        src = z.read("torch/cuda/_annotate_cuda_graph_trace.py")
    p = tmp_path / "torch_annotate.py"
    p.write_bytes(src)
    return str(p)


def _key(e):
    return (e.get("ph"), e.get("cat"), e.get("name"), e.get("pid"), e.get("tid"), e.get("ts"))


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("jitter", [False, True])
def test_args_are_a_superset_of_pytorchs_for_the_same_input(tmp_path, gz, jitter):
    script = _torch_script(tmp_path)
    tp, ap = _write(tmp_path, *_trace(jitter=jitter), gz=gz)
    theirs_p = str(tmp_path / ("theirs.json.gz" if gz else "theirs.json"))
    ours_p = str(tmp_path / ("ours.json.gz" if gz else "ours.json"))
    r = subprocess.run([sys.executable, script, tp, "-a", ap, "-o", theirs_p],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    res = annotate_trace_file(tp, ap, ours_p)
    theirs, ours = _load(theirs_p)["traceEvents"], _load(ours_p)["traceEvents"]
    mine = {}
    for e in ours:
        mine.setdefault(_key(e), []).append(e)
    for e in theirs:
        cands = mine.get(_key(e))
        assert cands, f"missing event {_key(e)}"
        o = cands.pop(0)
        for k, v in (e.get("args") or {}).items():
            assert o["args"].get(k) == v, (k, v, o["args"].get(k))
    leftover = [e for v in mine.values() for e in v]
    # ours has more: the modules track, and the processes' own metadata, which PyTorch's
    # script drops with the metadata of emptied lanes when no event sits on tid 0 (its
    # comment means thread_name/thread_sort_index; Perfetto then loses the process names)
    assert leftover and all(e.get("pid") == "graphscope modules" or (
        e.get("ph") == "M" and e.get("name", "").startswith("process_")) for e in leftover)
    assert any(e.get("pid") == "graphscope modules" for e in leftover)
    assert res.annotated_events == 3 * 54
    if jitter:
        assert res.timestamps_fixed > 0 or res.moved_overlapping > 0
    extra = [e for e in ours if e.get("cat") == "graphscope_module"]
    assert extra and all(e["dur"] >= 0 for e in extra)


def test_low32_graph_node_ids_with_graph_id_are_joined(tmp_path):
    tp, ap = _write(tmp_path, *_trace(low32=True))
    out = str(tmp_path / "o.json")
    res = annotate_trace_file(tp, ap, out)
    assert res.annotated_events == 3 * 54  # PyTorch's script matches none of these
    ev = [e for e in _load(out)["traceEvents"] if e.get("cat") == "kernel"]
    assert ev[5]["args"]["module_name"] == "L.layers.0.mlp"


def test_noise_on_empty_streams_removed_and_stream_lanes_named(tmp_path):
    tp, ap = _write(tmp_path, *_trace())
    out = str(tmp_path / "o.json")
    res = annotate_trace_file(tp, ap, out)
    evs = _load(out)["traceEvents"]
    assert res.noise_removed == 3  # the gpu_user_annotation copies on stream 9
    assert not any(e.get("tid") == 9 for e in evs)
    names = {e["tid"]: e["args"]["name"] for e in evs
             if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == 0}
    assert names[11] == "stream 11" and 9 not in names
    assert all(e["args"]["stream"] == 11 for e in evs
               if e.get("args", {}).get("graph node id", 0) & 0xFFFFFFFF == 13)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "gzip"])
def test_truncated_or_invalid_input_is_one_clear_error_and_no_output(tmp_path, damage, capsys):
    tp, ap = _write(tmp_path, *_trace(), gz=damage == "gzip")
    data = open(tp, "rb").read()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data = data.replace(b'"ph": "X"', b'"ph": X', 1)
    else:
        data = data[: len(data) // 2]
    with open(tp, "wb") as f:
        f.write(data)
    out = tmp_path / "out.json"
    rc = main(["annotate-trace", tp, "-a", ap, "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and tp in err[0]
    assert os.listdir(tmp_path) == sorted(os.listdir(tmp_path)) and not out.exists()
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


@pytest.mark.parametrize("inflate", ["isal", "zlib"])
def test_gzip_through_isal_or_zlib_same_events_and_same_errors(tmp_path, capsys, monkeypatch,
                                                               inflate):
    """.gz traces go through ISA-L (python-isal) where it is installed, else zlib: the same
    output events either way, a level-1 output any gzip reader reads, and a damaged stream
    (bytes flipped inside the compressed data, or cut) is one clear error, not a traceback."""
    from graphscope.trace_annotate.streamio import isal_gzip

    if inflate == "isal" and isal_gzip() is None:
        pytest.skip("python-isal is not installed")
    monkeypatch.setenv("GRAPHSCOPE_ZLIB", "1" if inflate == "zlib" else "0")
    tp, ap = _write(tmp_path, *_trace(n_nodes=50, replays=3), gz=True)
    out = tmp_path / "o.json.gz"
    assert main(["annotate-trace", tp, "-a", ap, "-o", str(out)]) == 0
    with gzip.open(out, "rb") as f:  # Python's own reader
        got = json.loads(f.read())
    monkeypatch.setenv("GRAPHSCOPE_ZLIB", "1")
    ref = tmp_path / "ref.json"
    assert main(["annotate-trace", tp, "-a", ap, "-o", str(ref)]) == 0
    assert got == _load(str(ref))
    monkeypatch.setenv("GRAPHSCOPE_ZLIB", "1" if inflate == "zlib" else "0")
    data = open(tp, "rb").read()
    for damaged in (data[:20] + bytes(b ^ 0x5A for b in data[20:60]) + data[60:],
                    data[: len(data) * 2 // 3]):
        with open(tp, "wb") as f:
            f.write(damaged)
        capsys.readouterr()
        rc = main(["annotate-trace", tp, "-a", ap, "-f", "-o", str(tmp_path / "d.json")])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and tp in err[0], err


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "unreadable"])
def test_an_input_that_is_no_regular_file_is_one_clear_error(tmp_path, capsys, kind):
    """The trace is read twice (scan, then splice): a directory, a pipe (which would block
    waiting for a second writer) or a device is refused by name, as is an unreadable file."""
    _, ap = _write(tmp_path, *_trace(n_nodes=4, replays=1))
    if kind == "directory":
        tp, want = str(tmp_path / "d"), "is a directory"
        os.mkdir(tp)
    elif kind == "fifo":
        tp, want = str(tmp_path / "p.json"), "not a regular file"
        os.mkfifo(tp)
    elif kind == "device":
        tp, want = "/dev/zero", "not a regular file"
    else:
        if os.geteuid() == 0:
            pytest.skip("root reads any file")
        tp, want = str(tmp_path / "t.json"), "cannot read"
        with open(tp, "w") as f:
            f.write('{"traceEvents": []}')
        os.chmod(tp, 0)
    out = tmp_path / "o.json"
    rc = main(["annotate-trace", tp, "-a", ap, "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and tp in err[0] and want in err[0], err
    assert not out.exists()


def test_a_real_torch_profiler_trace_is_joined_to_its_run_bundle(tmp_path, capsys):
    """Recorded on an H200 (torch 2.11): sample_models/programs/profiled.py under `graphscope
    run` profiles 5 replays of its captured training step itself. Its trace has no graph node
    ids (torch <= 2.11), so each launch is matched to the bundle by kernel sequence: every
    replayed kernel is matched, the module-attributed ones get their module, every one its op,
    shapes and source; the loss work the program does outside modules keeps its reason."""
    trace = os.path.join(DATA, "run_profiled.trace.json")
    bundle = os.path.join(DATA, "run_profiled")
    out = tmp_path / "annotated.json"
    assert main(["annotate-trace", trace, "-a", bundle, "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "matched 105 of 105 graph-launched kernels to the bundle by kernel sequence " \
        "(100.0%)" in printed, printed
    kernels = [e for e in _load(str(out))["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) == 105  # 5 replays x 21 kernels
    assert all(e["args"]["graphscope match"] == "sequence" and e["args"]["op"].startswith(
        "aten::") for e in kernels)
    mods = Counter(e["args"].get("module_name") for e in kernels)
    assert mods["L.0"] == 5 * 4 and mods["(optimizer)"] == 5 and mods[None] == 5 * 5
    # every process keeps its name (the metadata on tid 0 of processes with no tid-0 event)
    src, got = _load(trace)["traceEvents"], _load(str(out))["traceEvents"]

    def procs(evs):
        return {(e.get("pid"), e["name"]) for e in evs
                if e.get("ph") == "M" and e.get("name", "").startswith("process_")}

    assert procs(src) and procs(src) <= procs(got)
    # and the counts printed add up: in - dropped + added = out
    line = printed.splitlines()[0]
    assert line.startswith(f"{len(src)} events in, {len(got)} out: 5 dropped (5 noise"), line
    assert f"{len(got) - len(src) + 5} added (55 module spans" in line, line
    assert all("unplaced_reason" in e["args"] for e in kernels if "module_name" not in e["args"])
    spans = [e for e in _load(str(out))["traceEvents"] if e.get("cat") == "graphscope_module"]
    assert len({e["args"]["correlation"] for e in spans}) == 5  # a module track per replay
    # each replay: the forward's runs, the loss (outside every module) between, the backward's
    # in reverse, the optimizer; siblings one after the other, never nested
    first = [e for e in spans if e["args"]["correlation"] == spans[0]["args"]["correlation"]]
    assert [(e["tid"], e["args"]["module_name"]) for e in first] == [
        (0, "L"), (1, "L.0"), (1, "L.1"), (1, "L.2"), (1, "L.3"), (0, "L"), (1, "L.3"),
        (1, "L.2"), (1, "L.1"), (1, "L.0"), (0, "(optimizer)")]
    for lane in (0, 1):
        row = [e for e in first if e["tid"] == lane]
        assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-3 for a, b in zip(row, row[1:]))


def test_restricted_unpickler_refuses_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    p = tmp_path / "evil.pkl"
    p.write_bytes(pickle.dumps({1: [Evil()]}))
    with pytest.raises(TraceError, match="only plain dicts"):
        load_annotations(str(p))


def test_graphscope_outputs_are_accepted_as_annotations(tmp_path):
    b = os.path.join(DATA, "mlp_step")
    amap_dir, bundle = load_annotations(b)
    amap_json, _ = load_annotations(os.path.join(b, "annotations.json"))
    amap_pkl, _ = load_annotations(os.path.join(b, "annotations.pkl"))
    assert bundle is not None and amap_dir == amap_json == amap_pkl and amap_dir


@pytest.mark.parametrize("name", ["mlp_step", "train_step_bf16", "decode_kv_forward",
                                  "run_decode", "ddp_mlp_step/rank1"])
def test_graphscope_pickle_works_in_pytorchs_annotator(tmp_path, name):
    """PyTorch's own annotator (from the torch 2.14.1 wheel) reads the bundles' pickles."""
    script = _torch_script(tmp_path)
    b = os.path.join(DATA, name)
    with open(os.path.join(b, "annotations.pkl"), "rb") as f:
        amap = pickle.load(f)
    ids = sorted(amap)
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0 * i,
           "dur": 1.0, "args": {"graph node id": nid}} for i, nid in enumerate(ids)]
    tp = tmp_path / "t.json"
    tp.write_text(json.dumps({"traceEvents": ev}))
    out = tmp_path / "o.json"
    r = subprocess.run([sys.executable, script, str(tp), "-a", os.path.join(b, "annotations.pkl"),
                        "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = json.loads(out.read_text())["traceEvents"]
    mods = Counter(e["args"].get("module_name") for e in got if e.get("ph") == "X")
    assert sum(mods.values()) == len(ids) and None not in mods  # every event annotated


def test_saved_kernel_annotations_work_in_pytorchs_annotator(tmp_path):
    """save_kernel_annotations' pickle (nodes as read so far, the rest copied for the file) is
    read by PyTorch's own annotator, each event getting its node's dict."""
    import graphscope
    from graphscope import annotate as A

    script = _torch_script(tmp_path)
    graphscope.clear_kernel_annotations()
    A.TABLES.store.add_template(6, {0: {"module_name": "m.a"}, 1: {"module_name": "m.a"},
                             2: {"module_name": "m.b", "name": "blk"}})
    try:
        A.TABLES.store.rekey(6, 4)
        graphscope.get_kernel_annotations()[4 << 32][0]["module_name"] = "m.read"  # read, changed
        pkl = graphscope.save_kernel_annotations(tmp_path / "a.pkl")
    finally:
        graphscope.clear_kernel_annotations()
    ids = [4 << 32, (4 << 32) | 1, (4 << 32) | 2]
    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.0 * i,
           "dur": 1.0, "args": {"graph node id": nid}} for i, nid in enumerate(ids)]
    tp = tmp_path / "t.json"
    tp.write_text(json.dumps({"traceEvents": ev}))
    out = tmp_path / "o.json"
    r = subprocess.run([sys.executable, script, str(tp), "-a", pkl, "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = [e["args"] for e in json.loads(out.read_text())["traceEvents"] if e.get("ph") == "X"]
    assert [a.get("module_name") for a in got] == ["m.read", "m.a", "m.b"]


def sequence_trace(tmp_path, bundle_name: str) -> str:
    """A torch <= 2.11 style trace (no graph node ids) of one launch of ``bundle_name``'s
    first replay: its kernels in start order, with names and launch dims."""
    from graphscope.model.bundle_io import read_bundle

    bundle = read_bundle(os.path.join(DATA, bundle_name))
    rep0 = sorted((e for e in bundle.events if e["replay"] == 0), key=lambda e: e["start_ns"])
    by_id = {n.exec_node_id: n for n in bundle.work_nodes()}
    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1,
           "ts": 0.0, "dur": 1.0, "args": {"correlation": 5}}]
    for k, e in enumerate(rep0):
        n = by_id[e["exec_node_id"]]
        if n.type != "kernel":
            continue
        ev.append({"ph": "X", "cat": "kernel", "name": n.demangled, "pid": 0, "tid": 7,
                   "ts": 1.0 + k, "dur": 0.5, "args": {"correlation": 5, "grid": list(n.grid),
                                                      "block": list(n.block)}})
    tp = tmp_path / "seq.json"
    tp.write_text(json.dumps({"traceEvents": ev}))
    return str(tp)


def test_trace_without_node_ids_is_matched_by_kernel_sequence(tmp_path):
    """torch <= 2.11: no graph node id on kernel events; match by (name, grid, block) order."""
    b = os.path.join(DATA, "mlp_step")
    tp = sequence_trace(tmp_path, "mlp_step")
    out = tmp_path / "o.json"
    res = annotate_trace_file(str(tp), b, str(out))
    with open(tp) as f:
        kernels = [e for e in json.load(f)["traceEvents"] if e["cat"] == "kernel"]
    assert res.sequence_candidates == len(kernels) and res.match_rate == 100.0
    got = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    assert all(e["args"]["graphscope match"] == "sequence" for e in got)
    assert {e["args"].get("module_name") for e in got} >= {"L.fc1", "L.head"}


@pytest.mark.parametrize("case", [
    b'"name": [}', b"GARBAGE", b"{}{}", b",,", b"]", b"nan", b'"ts": 1e', b"\x00",
])
def test_invalid_json_anywhere_is_refused(tmp_path, capsys, case):
    tp, ap = _write(tmp_path, *_trace(n_nodes=6, replays=1))
    data = open(tp, "rb").read()
    for where in (0, len(data) // 2, len(data)):  # before, inside and after the array
        bad = data[:where] + case + data[where:]
        with open(tp, "wb") as f:
            f.write(bad)
        out = tmp_path / "out.json"
        rc = main(["annotate-trace", tp, "-a", ap, "-o", str(out), "--force"])
        err = capsys.readouterr().err
        try:
            json.loads(bad)
            valid = True
        except ValueError:
            valid = False
        if valid:
            assert rc == 0 and json.load(open(out)) is not None
        else:
            assert rc == 2 and "invalid JSON" in err or "truncated" in err or "no \"trace" \
                in err, (case, where, err)
            assert not out.exists() or rc == 0


def test_kernel_without_ts_gives_valid_json(tmp_path):
    trace, ann = _trace(n_nodes=6, replays=2)
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            e.pop("ts")
            break
    tp, ap = _write(tmp_path, trace, ann)
    out = tmp_path / "out.json"
    assert main(["annotate-trace", tp, "-a", ap, "-o", str(out)]) == 0
    json.loads(out.read_text())  # strict: no NaN literal anywhere
    assert "NaN" not in out.read_text() and "nan," not in out.read_text()


def test_fuzzed_traces_exit_0_only_with_valid_json_out(tmp_path, capsys):
    """Mutated traces: whatever graphscope accepts, it writes as valid JSON."""
    import random

    rng = random.Random(1234)
    tp, ap = _write(tmp_path, *_trace(n_nodes=8, replays=2))
    base = open(tp, "rb").read()
    alphabet = b'{}[],:" 0123456789.eE-+tfnaulrsNX\\'
    accepted = 0
    for i in range(150):
        data = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            op, at = rng.random(), rng.randrange(len(data))
            if op < 0.4:
                data[at] = rng.choice(alphabet)
            elif op < 0.7:
                del data[at:at + rng.randint(1, 8)]
            else:
                data[at:at] = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
        with open(tp, "wb") as f:
            f.write(bytes(data))
        out = tmp_path / f"out{i}.json"
        rc = main(["annotate-trace", tp, "-a", ap, "-o", str(out)])
        capsys.readouterr()
        if rc == 0:
            accepted += 1
            json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in output"))
            try:
                json.loads(bytes(data))
            except ValueError:
                pytest.fail(f"accepted invalid JSON input (mutation {i})")
        else:
            assert rc == 2 and not out.exists()
    assert accepted >= 1  # some mutations (inside strings) stay valid


def test_pickle_length_bomb_is_refused_without_allocating(tmp_path):
    import resource
    import struct

    from graphscope.trace_annotate import TraceError, load_annotations

    p = tmp_path / "bomb.pkl"
    # PROTO 4, BINBYTES8 claiming 2 GiB, then nothing: a reader that trusts the length
    # allocates 2 GiB before noticing the file is 20 bytes long
    p.write_bytes(b"\x80\x04" + b"\x8e" + struct.pack("<Q", 2 << 30) + b"." * 8)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TraceError, match="not an annotation pickle"):
        load_annotations(str(p))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 512 * 1024  # KiB


def test_pickle_of_shared_references_is_bounded(tmp_path):
    from graphscope.trace_annotate import TraceError, load_annotations

    big = {f"k{i}": list(range(200)) for i in range(50)}
    data = {i: [big] for i in range(20000)}  # one dict, referenced 20,000 times
    p = tmp_path / "dag.pkl"
    p.write_bytes(pickle.dumps(data, protocol=4))
    with pytest.raises(TraceError, match="expands to far more"):
        load_annotations(str(p))


def test_one_giant_event_in_a_small_gz_is_refused(tmp_path, capsys):
    tp = tmp_path / "bomb.json.gz"
    with gzip.open(tp, "wb", compresslevel=9) as f:
        f.write(b'{"traceEvents": [{"name": "')
        chunk = b"x" * (1 << 20)
        for _ in range(80):
            f.write(chunk)
        f.write(b'"}]}')
    assert os.path.getsize(tp) < 1 << 20
    _, ap = _write(tmp_path, *_trace(n_nodes=4, replays=1))
    rc = main(["annotate-trace", str(tp), "-a", ap, "-o", str(tmp_path / "o.json")])
    assert rc == 2 and "larger than 64 MiB" in capsys.readouterr().err


def _annotate_bytes(tp, ap, data, out, capsys):
    """Write ``data`` as the trace ``tp``, annotate it into ``out``: (exit code, the output's
    bytes, or the error printed)."""
    with open(tp, "wb") as f:
        f.write(data)
    rc = main(["annotate-trace", tp, "-a", ap, "-f", "-o", str(out)])
    err = capsys.readouterr().err
    return rc, (out.read_bytes() if rc == 0 else err)


def test_split_scanning_equals_the_sequential_scan(tmp_path, capsys, monkeypatch):
    """Each chunk's halves are scanned at once from a guessed event boundary (`}, {`). With
    chunks small enough for that to happen many times per trace, every accepted mutation of a
    trace gives the same output bytes as one scanner walking each chunk alone, and every refused
    one the same error."""
    import random

    from graphscope.trace_annotate import chunks as A

    rng = random.Random(99)
    tp, ap = _write(tmp_path, *_trace(n_nodes=40, replays=3))
    base = open(tp, "rb").read()
    alphabet = b'{}[],:" 0123456789.eE-+tfnaulrsNX\\'

    def run(data, split):
        monkeypatch.setattr(A, "CHUNK_BYTES", 4096)
        monkeypatch.setattr(A, "_SPLIT_MIN", 512 if split else 1 << 40)
        return _annotate_bytes(tp, ap, data, tmp_path / ("split.json" if split else "seq.json"),
                               capsys)

    rc, text = run(base, True)
    assert rc == 0 and (rc, text) == run(base, False)
    for _ in range(60):
        data = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data))
            if rng.random() < 0.5:
                data[at] = rng.choice(alphabet)
            else:
                data[at:at] = b"}, {"  # a fake boundary where the guess may land
        assert run(bytes(data), True) == run(bytes(data), False)


def test_mapped_and_read_inputs_agree(tmp_path, capsys, monkeypatch):
    """A plain .json is memory-mapped (no read copies); GRAPHSCOPE_NO_MMAP=1 reads it block by
    block instead. With chunks small enough for many buffers per trace, both give the same
    output bytes, or the same error, for the trace and for damaged copies of it (cut anywhere,
    bytes changed, text after the array)."""
    import random

    from graphscope.trace_annotate import chunks as A

    rng = random.Random(7)
    tp, ap = _write(tmp_path, *_trace(n_nodes=40, replays=3))
    base = open(tp, "rb").read()
    src = A.source(tp)
    try:
        assert isinstance(src, A._Mapped)
    finally:
        src.close()
    monkeypatch.setattr(A, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(A, "_SPLIT_MIN", 1024)

    def run(data, mapped):
        monkeypatch.setenv("GRAPHSCOPE_NO_MMAP", "0" if mapped else "1")
        return _annotate_bytes(tp, ap, data,
                               tmp_path / ("mapped.json" if mapped else "read.json"), capsys)

    rc, text = run(base, True)
    assert rc == 0 and (rc, text) == run(base, False)
    import mmap

    monkeypatch.setenv("GRAPHSCOPE_NO_MMAP", "0")
    src = A.source(tp)  # pages behind the current chunk leave the mapping as it moves on
    try:
        sizes: list = []
        for _ in A._chunks(src, sizes_out=sizes):
            pass
        assert len(sizes) > 5
        assert src._released >= len(base) - 3 * A.CHUNK_BYTES - mmap.PAGESIZE
    finally:
        src.close()
    cases = [base[: rng.randrange(len(base))] for _ in range(12)]
    cases += [base + b" \n", base + b" {}", base[:-1], base.replace(b"]", b"] ", 1)]
    for _ in range(12):
        data = bytearray(base)
        data[rng.randrange(len(data))] = rng.choice(b'{}[],:" 0x')
        cases.append(bytes(data))
    for data in cases:
        assert run(data, True) == run(data, False)


@pytest.mark.parametrize("shape", ["few_launches", "many_launches"])
def test_module_span_slices_equal_a_python_reference(shape):
    """The native module track: per launch and depth, one slice per run of consecutive events
    (by start, then end) whose module has that prefix, ended at its last end or where the next
    run at its depth or above starts if earlier; an event with no module (-1) ends every run;
    ordered by launch, then (start, depth). Modules share their parents (a tree), events come in
    no order, and overlap (work on several streams)."""
    import random

    import numpy as np

    from graphscope import native

    rng = random.Random(5 if shape == "few_launches" else 6)
    n_mod, n_launch, n = (12, 5, 400) if shape == "few_launches" else (300, 400, 4000)
    prefixes: dict[str, int] = {}
    table = []
    for m in range(n_mod):  # L.<m % 3>.<m % 5>.<m>, cut at a random depth
        parts = ["L", str(m % 3), str(m % 5), str(m)][: rng.randint(1, 4)]
        table.append([prefixes.setdefault(".".join(parts[: d + 1]), len(prefixes))
                      for d in range(len(parts))])
    depth = max(map(len, table))
    rows = np.full((n_mod, depth), -1, dtype=np.int64)
    for m, ids in enumerate(table):
        rows[m, : len(ids)] = ids
    launches = rng.sample(range(-50, 10**6), n_launch)
    corr = np.array([rng.choice(launches) for _ in range(n)], dtype=np.int64)
    leaf = np.array([rng.randrange(-1, n_mod) for _ in range(n)], dtype=np.int64)
    t0 = np.array([float(rng.randrange(0, 2000)) for _ in range(n)])  # some equal starts
    t1 = t0 + np.array([rng.choice([0.0, 1.5, 3.25, rng.uniform(0, 50)]) for _ in range(n)])
    heads = [f'{{"p": {p}, "c": ' for p in range(len(prefixes))]
    events = sorted((c, a, b, lf) for c, lf, a, b in zip(corr.tolist(), leaf.tolist(),
                                                        t0.tolist(), t1.tolist()))
    want = []
    for c in sorted({e[0] for e in events}):
        open_: list[list] = []  # [prefix, lo, hi]
        done = []  # (lo, depth, order, prefix, hi)

        def close(d, at, open_=open_, done=done):
            while len(open_) > d:
                p, lo, hi = open_.pop()
                done.append((lo, len(open_), len(done), p, min(hi, at)))

        for _, a, b, lf in (e for e in events if e[0] == c):
            if lf < 0:
                close(0, a)
                continue
            row, d = table[lf], 0
            while d < len(row) and d < len(open_) and open_[d][0] == row[d]:
                open_[d][2] = max(open_[d][2], b)
                d += 1
            close(d, a)
            open_ += [[p, a, b] for p in row[d:]]
        close(0, float("inf"))
        want += [(c, p, lo, hi) for lo, _, _, p, hi in sorted(done)]
    expect = ",".join(f"{heads[p]}{c}}}, \"ts\": {lo!r}, \"dur\": {hi - lo!r}}}"
                      for c, p, lo, hi in want)
    pieces = native.extension().module_spans(corr.tobytes(), leaf.tobytes(), t0.tobytes(),
                                             t1.tobytes(), rows.tobytes(), depth, heads)
    assert b",".join(pieces).decode() == expect
    # runs, not one slice per (launch, prefix): a prefix's work comes back after other work
    assert len(want) > len({(c, p) for c, p, _, _ in want})
    # and the slices of one launch and depth never overlap, though the events do
    depth_of = {p: k for ids in table for k, p in enumerate(ids)}
    for c in set(corr.tolist()):
        for k in range(depth):
            lane = [(lo, hi) for cc, p, lo, hi in want if cc == c and depth_of[p] == k]
            assert all(h <= lo2 for (_, h), (lo2, _) in zip(lane, lane[1:]))
    assert any(b > a2 for (_, a, b, _), (_, a2, _, _) in zip(events, events[1:]))


@pytest.mark.parametrize("fake_at", ["string", "args", "none"])
def test_split_scan_guess_that_is_no_boundary_falls_back(monkeypatch, fake_at):
    """The guessed boundary inside a string or an args value: the first half stops short of
    it, the speculative half is dropped, and the result is still the sequential scan's."""
    from concurrent.futures import ThreadPoolExecutor

    from graphscope import native
    from graphscope.trace_annotate import chunks as A

    monkeypatch.setattr(A, "_SPLIT_MIN", 64)
    small = [json.dumps({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7,
                         "ts": i, "dur": 1}) for i in range(6)]
    pad = "x" * 400
    if fake_at == "string":
        big = json.dumps({"ph": "X", "cat": "kernel", "name": pad + "}, {" + pad, "ts": 9})
    elif fake_at == "args":
        big = json.dumps({"ph": "X", "args": {"b": pad + pad, "a": [{"x": 1}, {"y": 2}]},
                          "ts": 9})
    else:
        big = json.dumps({"ph": "X", "name": pad + pad, "ts": 9})
    text = ('{"traceEvents": [' + ", ".join(small[:3] + [big] + small[3:]) + "]}").encode()
    pos = text.index(b"[") + 1
    scan = native.extension().scan_events
    with ThreadPoolExecutor(1) as pool:
        got = A._scan_split(scan, text, pos, False, pool)
    assert got == scan(text, pos, False)
    assert got["closed"] and len(got["begin"]) // 8 == 7


# ---- the output writer: O_DIRECT through an aligned staging buffer, or buffered ----


def _write_pieces(path, pieces, **kw):
    from graphscope.trace_annotate.streamio import Writer

    with open(path, "wb") as f, Writer(f, **kw) as w:
        w.reserve(sum(map(len, pieces)) + 12345)
        for p in pieces:
            w.write(p)
    return w


@pytest.mark.parametrize("stage", [8192, 1 << 20])
def test_direct_writer_writes_exactly_the_bytes(tmp_path, monkeypatch, stage):
    import random

    from graphscope.trace_annotate import streamio as AT

    monkeypatch.setattr(AT.DirectSink, "STAGE", stage)
    rng = random.Random(stage)
    pieces = [bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 7, 4096, 9000, 20000])))
              for _ in range(60)]
    w = _write_pieces(tmp_path / "d.json", pieces)
    b = _write_pieces(tmp_path / "b.json", pieces, direct=False)
    assert not b.direct
    expect = b"".join(pieces)
    assert (tmp_path / "d.json").read_bytes() == expect == (tmp_path / "b.json").read_bytes()
    if not w.direct:
        pytest.skip("this file system takes no O_DIRECT: the buffered path was used")


def test_direct_writer_falls_back_when_the_first_write_is_refused(tmp_path, monkeypatch):
    import errno

    from graphscope.trace_annotate import streamio as AT

    def refuse(*a):
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(AT.os, "pwrite", refuse)
    monkeypatch.setattr(AT.DirectSink, "STAGE", 8192)
    pieces = [b"a" * 5000, b"b" * 7000, b"c" * 3]
    w = _write_pieces(tmp_path / "x.json", pieces)
    assert not w.direct
    assert (tmp_path / "x.json").read_bytes() == b"".join(pieces)


def test_direct_writer_reports_a_later_write_error(tmp_path, monkeypatch):
    import errno

    from graphscope.trace_annotate import streamio as AT

    real = AT.os.pwrite

    def full_after_first(fd, data, off):
        if off > 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, off)

    monkeypatch.setattr(AT.os, "pwrite", full_after_first)
    monkeypatch.setattr(AT.DirectSink, "STAGE", 8192)
    with pytest.raises(OSError, match="No space left"):
        _write_pieces(tmp_path / "y.json", [b"z" * 40000])


def test_buffered_output_env_turns_direct_off(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHSCOPE_BUFFERED_OUTPUT", "1")
    assert not _write_pieces(tmp_path / "z.json", [b"q" * 10]).direct


def test_a_trace_graphscope_annotated_already_is_refused_not_annotated_twice(tmp_path, capsys):
    # GIVEN a profiler trace annotated once (its module track added)
    trace = os.path.join(DATA, "run_profiled.trace.json")
    bundle = os.path.join(DATA, "run_profiled")
    once = tmp_path / "once.json"
    assert main(["annotate-trace", trace, "-a", bundle, "-o", str(once)]) == 0
    capsys.readouterr()
    # WHEN its output is annotated again
    twice = tmp_path / "twice.json"
    assert main(["annotate-trace", str(once), "-a", bundle, "-o", str(twice)]) == 2
    # THEN one line says so, and nothing is written (no second module track)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already annotated by graphscope" in err[0], err
    assert not twice.exists()
