"""Pools once, capture cost, memory by module and the bucket ladder, on recorded bundles (and
the capture meter's arithmetic on allocator entries made up here: it needs no GPU)."""

import dataclasses
import json
import os
import time

import pytest
from rich.console import Console

from graphscope import annotate as ann
from graphscope.analysis.ladder import batch_rows, ladder, structure_key
from graphscope.analysis.memory import by_module, memory_summary, pools
from graphscope.analysis.summary import graph_rows, summarize
from graphscope.annotate.scopes import normalize
from graphscope.capture.meter import OUTSIDE, CaptureMeter
from graphscope.cli.main import main
from graphscope.model.bundle import Bundle
from graphscope.model.bundle_io import read_bundle
from graphscope.render.html import ladder_svg
from graphscope.render.memory import ladder_table
from graphscope.render.terminal import summary_group as render

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
MiB = 1 << 20


def _bundle(name):
    return read_bundle(os.path.join(DATA, name))


def _with_infos(b, infos, names=None):
    graphs = []
    for i, (g, info) in enumerate(zip(b.graphs, infos)):
        graphs.append(dataclasses.replace(g, info={**g.info, **info},
                                          name=names[i] if names else g.name))
    return dataclasses.replace(b, graphs=tuple(graphs))


def _shared_pool_bundle():
    """decode_kv_forward's three buckets as if captured into one shared pool."""
    b = _bundle("decode_kv_forward")
    pool = [0, 7]
    infos = [
        {"pool_id": pool, "pool_bytes": 20 * MiB, "pool_allocated_bytes": 3 * MiB,
         "capture_s": 0.010, "instantiate_s": 0.002, "capture_alloc_bytes": 5 * MiB,
         "capture_live_bytes": 1 * MiB, "capture_peak_bytes": 4 * MiB,
         "capture_segment_bytes": 20 * MiB,
         "memory_by_module": {"L.blocks.0.attn": [3 * MiB, MiB], "L.head": [2 * MiB, 0]},
         "capture_by_module_s": {"L.blocks.0.attn": 0.004, OUTSIDE: 0.006}},
        {"pool_id": pool, "pool_bytes": 22 * MiB, "pool_allocated_bytes": 5 * MiB,
         "capture_s": 0.020, "instantiate_s": 0.003, "capture_alloc_bytes": 6 * MiB,
         "capture_live_bytes": 2 * MiB, "capture_peak_bytes": 5 * MiB,
         "capture_segment_bytes": 2 * MiB,
         "memory_by_module": {"L.blocks.0.attn": [6 * MiB, 2 * MiB]}},
        {"pool_id": [0, 9], "pool_bytes": 2 * MiB, "capture_s": 0.030, "instantiate_s": 0.004},
    ]
    return _with_infos(b, infos)


def test_shared_pool_counted_once_and_total_is_the_union():
    mem = memory_summary(_shared_pool_bundle())
    assert [p["graphs"] for p in mem["pools"]] == [
        ["bucket0 [1,1] [1]", "bucket1 [4,1] [1]"], ["bucket2 [8,1] [1]"]]
    shared = mem["pools"][0]
    assert shared["reserved_bytes"] == 22 * MiB  # the largest reading, once
    assert shared["allocated_bytes"] == 5 * MiB
    assert shared["capture_live_bytes"] == 3 * MiB
    assert mem["total_reserved_bytes"] == 24 * MiB  # not 20 + 22 + 2
    assert [g["pool"] for g in mem["graphs"]] == [1, 1, 2]
    assert mem["capture_s"] == pytest.approx(0.060)
    assert mem["instantiate_s"] == pytest.approx(0.009)


def test_memory_by_module_adds_up_inclusively():
    rows = {r["module"]: r for r in memory_summary(_shared_pool_bundle())["by_module"]}
    assert rows["L.blocks.0.attn"]["alloc_bytes"] == 9 * MiB
    assert rows["L.blocks.0.attn"]["held_bytes"] == 3 * MiB
    assert rows["L"]["alloc_bytes"] == 11 * MiB  # attn + head, inclusive
    assert rows["L.blocks"]["level"] == 1
    assert rows[OUTSIDE]["capture_s"] == pytest.approx(0.006)
    top = [r for r in rows.values() if r["level"] == 0]
    assert sum(r["held_bytes"] for r in top) == 3 * MiB  # = the captures' held bytes


def test_old_bundles_have_no_memory_section():
    b = _bundle("run_decode")
    assert memory_summary(b) is None
    assert "memory" not in summarize(b) and "ladder" not in summarize(b)


def test_summary_and_report_show_pools_capture_cost_and_ladder():
    s = summarize(_shared_pool_bundle())
    assert s["memory"]["total_reserved_bytes"] == 24 * MiB and s["ladder"]
    con = Console(width=160, record=True)
    con.print(render(s))
    text = con.export_text()
    assert "Memory pools" in text and "2 pool(s), 24.0 MiB reserved in all" in text
    assert "Capture cost" in text and "Memory by module" in text
    assert "Bucket ladder: forward buckets" in text
    json.dumps(s)


def test_ladder_of_a_run_bundle():
    (site,) = ladder(_bundle("run_decode"), graph_rows(_bundle("run_decode")))
    assert site["site"] == "decode.py:71"
    assert [b["batch"] for b in site["buckets"]] == [1, 8]
    small, big = site["buckets"]
    assert big["ns_per_row"] == pytest.approx(big["median_ns"] / 8)
    assert small["replays"] == 40 and small["median_ns"] > 0
    assert site["never_replayed"] == []
    assert site["ops_recorded"] == 2 and small["ops_recorded"] and big["ops_recorded"]


def test_ladder_says_which_buckets_kept_scopes_only():
    # GIVEN a run bundle whose second bucket was captured past --op-captures
    b = _bundle("run_decode")
    later = dataclasses.replace(b.graphs[1], info={**b.graphs[1].info, "ops_recorded": False})
    b2 = dataclasses.replace(b, graphs=(b.graphs[0], later))
    (site,) = ladder(b2, graph_rows(b2))
    # THEN the bucket says so, the site counts its buckets with ops, and the table tells how
    assert site["ops_recorded"] == 1
    assert [x["ops_recorded"] for x in site["buckets"] if x["name"] == later.name] == [False]
    con = Console(width=200, record=True)
    con.print(ladder_table(site))
    assert ("aten ops, shapes and source lines recorded in 1 of 2 buckets"
            in con.export_text().replace("\n", " "))
    assert site["scopes_counted"] == 0 and "node counts" not in con.export_text()


def test_ladder_says_which_buckets_were_placed_by_node_counts():
    # GIVEN a run bundle whose second bucket was recorded by node counts (no CUPTI)
    b = _bundle("run_decode")
    later = dataclasses.replace(b.graphs[1], info={**b.graphs[1].info, "ops_recorded": False,
                                                   "scopes_from": "node_counts"})
    b2 = dataclasses.replace(b, graphs=(b.graphs[0], later))
    (site,) = ladder(b2, graph_rows(b2))
    # THEN the bucket and the site say so, and so does the table's caption
    assert site["scopes_counted"] == 1
    assert [x["scopes_from"] for x in site["buckets"]] == ["cupti", "node_counts"]
    con = Console(width=200, record=True)
    con.print(ladder_table(site))
    assert ("1 of 2 buckets recorded by node counts, without CUPTI in their captures"
            in con.export_text().replace("\n", " "))


def test_ladder_groups_structure_and_lists_buckets_never_replayed():
    b = _bundle("decode_kv_forward")
    g0 = b.graphs[0]
    # the same kernels and edges with other launch dims: one structure
    regrid = tuple(_node(n, grid=(n.grid[0] * 2 + 1, 1, 1)) for n in g0.nodes)
    twin = dataclasses.replace(g0, name="bucket9 [16,1] [1]", nodes=regrid,
                               info={**g0.info, "shapes": "[16,1] [1]", "replays": 0})
    assert structure_key(twin) == structure_key(g0)
    b2 = dataclasses.replace(b, graphs=b.graphs + (twin,))
    (site,) = ladder(b2, graph_rows(b2))
    assert [x["batch"] for x in site["buckets"]] == [1, 4, 8, 16]
    assert site["never_replayed"] == ["bucket9 [16,1] [1]"]
    same = [s for s in site["structures"] if len(s["graphs"]) > 1]
    assert same == [{"structure": 1, "graphs": ["bucket0 [1,1] [1]", "bucket9 [16,1] [1]"]}]
    # a changed kernel is another structure
    other = tuple(_node(n, kernel=(n.kernel or "") + "x") if i == 0 else n
                  for i, n in enumerate(g0.nodes))
    assert structure_key(dataclasses.replace(g0, nodes=other)) != structure_key(g0)


def _node(n, **changes):
    return dataclasses.replace(n, **changes)


def test_batch_rows():
    assert batch_rows("[8,1] [1]") == 8 and batch_rows("") is None and batch_rows("[3]") == 3


def test_report_ladder_cli(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["report", os.path.join(DATA, "run_decode"), "--ladder", "--no-diagnosis"]) == 0
    out = capsys.readouterr().out
    assert "Bucket ladder: decode.py:71" in out and "time/row" in out
    assert main(["report", os.path.join(DATA, "decode_kv_forward"), "--ladder", "--json",
                 "--no-diagnosis"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [b["batch"] for b in d["ladder"][0]["buckets"]] == [1, 4, 8]
    assert main(["report", os.path.join(DATA, "mlp_step"), "--ladder", "--no-diagnosis"]) == 0
    assert "no capture site captured several graphs" in capsys.readouterr().out


def test_ladder_chart_svg():
    (site,) = ladder(_bundle("decode_kv_forward"), graph_rows(_bundle("decode_kv_forward")))
    svg = ladder_svg(site)
    assert svg.startswith("<svg") and svg.count("<circle") == 6  # 3 buckets x 2 series
    assert "time per replay" in svg and "time per row" in svg


def test_pools_without_ids_are_their_own():
    p = pools([("a", {"pool_bytes": 5}), ("b", {"pool_bytes": 7})])
    assert [x["reserved_bytes"] for x in p] == [5, 7]
    assert by_module([{}]) == []


def _scope(name):
    d, frozen = normalize({"module_name": name})
    return ann.TABLES.scopes.child(-1, d, False, frozen)


def test_meter_attributes_allocations_to_the_scope_active_then():
    m = CaptureMeter(history=False)
    attn, mlp = _scope("L.attn"), _scope("L.mlp")
    m._offset_us = 1000.0  # allocator clock = ours + 1 ms
    m._wall0_ns = 0
    m.marks.extend([(0, -1), (10_000, attn), (20_000, -1), (30_000, mlp), (40_000, -1)])
    seg = [{"address": 1 << 20, "total_size": 4 * MiB}]
    base = 1 << 20

    def e(action, t_us, addr, size):
        return {"action": action, "time_us": 1000 + t_us, "addr": base + addr, "size": size}

    entries = [
        {"action": "segment_alloc", "time_us": 1005, "addr": base, "size": 4 * MiB},
        e("alloc", 12, 0, 1000),         # attn, held
        e("alloc", 15, 4096, 500),       # attn, freed below
        e("free_requested", 18, 4096, 500),
        e("alloc", 35, 8192, 300),       # mlp, held
        e("alloc", 45, 12288, 7),        # outside modules, held
        e("alloc", -3, 16384, 64),       # before the window: another capture's
        {"action": "alloc", "time_us": 1036, "addr": 99 << 30, "size": 1 << 30},  # other pool
    ]
    out = m._attribute(entries, seg, (0, 1))
    assert out["memory_by_module"] == {"L.attn": [1500, 1000], "L.mlp": [300, 300],
                                       OUTSIDE: [7, 7]}
    assert out["capture_alloc_bytes"] == 1807
    assert out["capture_live_bytes"] == 1307
    assert out["capture_peak_bytes"] == 1500
    assert out["capture_segment_bytes"] == 4 * MiB
    spans = m._scope_time(50_000, m.marks, m._names())
    assert spans == {OUTSIDE: pytest.approx(30e-6), "L.attn": pytest.approx(10e-6),
                     "L.mlp": pytest.approx(10e-6)}


def test_meter_uses_the_entry_pool_id_when_given():
    m = CaptureMeter(history=False)
    m.marks.extend([(0, -1)])
    entries = [{"action": "alloc", "time_us": 1, "addr": 5, "size": 10, "pool_id": (0, 1)},
               {"action": "alloc", "time_us": 1, "addr": 6, "size": 20, "pool_id": (0, 2)}]
    assert m._attribute(entries, [], (0, 1))["capture_alloc_bytes"] == 10


def test_bundle_type():
    assert isinstance(_shared_pool_bundle(), Bundle)


def test_html_report_carries_the_ladder_chart():
    from tests.unit.test_html import payload

    p = payload(_bundle("decode_kv_forward"))
    assert len(p["ladder_svg"]) == 1 and "time per row" in p["ladder_svg"][0]
    assert payload(_bundle("mlp_step"))["ladder_svg"] == []


def test_meter_window_end_to_end(monkeypatch):
    """begin/end around a module call, with the allocator faked: the allocation made inside a
    module is its module's; the history is switched on and off; capture time per module."""
    import time

    import torch
    from torch import nn

    from tests.unit._fake import fake_session

    monkeypatch.setenv("GRAPHSCOPE_ALLOC_TRACKER", "history")  # torch's history, faked
    snap = {"segments": [{"address": 4096, "total_size": 2 * MiB, "allocated_size": 1024,
                          "segment_pool_id": (0, 3)}], "device_traces": [[]]}
    history = []
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history",
                        lambda *a, **k: history.append(a[0] if a else k.get("enabled")))
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda *a, **k: snap)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)

    class Alloc(nn.Module):
        def forward(self, x):
            time.sleep(0.002)
            snap["device_traces"][0].append({"action": "alloc", "time_us": time.time_ns() / 1000,
                                             "addr": 4096, "size": 1024})
            time.sleep(0.002)
            return x

    class Graph:
        def pool(self):
            return (0, 3)

    model = nn.Sequential(nn.Identity(), Alloc())
    handle = ann.register_module_annotations(model, backward=False)
    try:
        with fake_session():
            with CaptureMeter(history=True).measure(Graph()) as info:
                model(torch.zeros(1))
    finally:
        handle.remove()
    assert history == ["all", None]
    assert info["pool_id"] == [0, 3] and info["pool_bytes"] == 2 * MiB
    assert info["memory_by_module"] == {"L.1": [1024, 1024]}
    assert info["capture_live_bytes"] == 1024 == info["pool_allocated_bytes"]
    assert info["capture_by_module_s"]["L.1"] >= 0.003
    assert info["capture_s"] >= info["capture_by_module_s"]["L.1"]


def test_run_prints_pools_and_ladder_when_recorded():
    # GIVEN the report `graphscope run` prints of the bundle it wrote (the report's own view)
    from graphscope.analysis.report import ReportOptions, build_report
    from graphscope.model.bundle_files import BundleExtras
    from graphscope.render.terminal import print_report

    def printed(bundle, options=ReportOptions()):  # noqa: B008 (frozen)
        con = Console(width=160, record=True)
        print_report(build_report(bundle, BundleExtras(mode="run"), options), con)
        return con.export_text()

    # THEN pools and the bucket ladder show where recorded, and not where not
    text = printed(_shared_pool_bundle(), ReportOptions(full=True))
    assert "Memory pools" in text and "Bucket ladder" in text
    assert "Memory pools" not in printed(_bundle("run_decode"))


def test_capture_window_hooks_do_not_import_dynamo():
    """Importing torch._dynamo takes about a second: a program's capture loop under
    ``graphscope run`` must not pay it when the program never compiles; once dynamo is
    loaded, the hooks are hidden from it."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from graphscope.annotate.training import optimizer_hooks\n"
        "from graphscope.capture.run.names import ModuleNames, module_hooks\n"
        "from graphscope.capture.meter import CaptureMeter\n"
        "hooks = module_hooks(ModuleNames(), None, lambda m, a: None) + optimizer_hooks()\n"
        "m = CaptureMeter(history=False); m._install_hooks(); m._remove_hooks()\n"
        "[h.remove() for h in hooks]\n"
        "assert 'torch._dynamo' not in sys.modules, 'dynamo imported'\n"
        "import torch._dynamo\n"
        "from graphscope.annotate.training import no_dynamo\n"
        "f = no_dynamo(lambda: 1)\n"
        "assert f() == 1 and f is not None and hasattr(f, '_torchdynamo_disable'), dir(f)\n"
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


# ------------------------------------------- the shared-pool ladder recorded on the H200
# tests/data/run_ladder: `graphscope run` of tests/gpu/test_memory_gpu.py's program (ten
# buckets of a 4-block decoder captured largest first into one pool, the two largest never
# replayed); run_ladder.facts.json: what the program measured itself (torch.cuda.memory_reserved
# over the capture loop, and the pool's segments in torch.cuda.memory_snapshot)
def _ladder_facts():
    with open(os.path.join(DATA, "run_ladder.facts.json")) as f:
        return json.load(f)


def test_recorded_ladder_shows_the_shared_pool_once_with_torchs_totals():
    facts = _ladder_facts()
    mem = memory_summary(_bundle("run_ladder"))
    (pool,) = mem["pools"]
    assert len(pool["graphs"]) == len(mem["graphs"]) == 10
    assert pool["reserved_bytes"] == mem["total_reserved_bytes"] == facts["pool_reserved"]
    assert pool["allocated_bytes"] == facts["allocated"]
    # pools plus what the captures reserved outside them add up to memory_reserved's growth
    assert mem["total_reserved_bytes"] + mem["outside_pools_bytes"] == facts["reserved"]
    assert mem["outside_pools_bytes"] == sum(
        v for k, v in facts["other_segments"].items() if not k.endswith(" 0"))


def test_recorded_ladder_memory_by_module_adds_up_to_the_pool():
    facts = _ladder_facts()
    mem = memory_summary(_bundle("run_ladder"))
    top = [r for r in mem["by_module"] if r["level"] == 0]
    assert sum(r["held_bytes"] for r in top) == pytest.approx(facts["allocated"], rel=0.05)
    rows = {r["module"]: r for r in mem["by_module"]}
    assert rows["L.blocks"]["alloc_bytes"] == sum(rows[f"L.blocks.{i}"]["alloc_bytes"]
                                                  for i in range(4))
    for g in mem["graphs"]:
        assert g["capture_s"] > 0 and g["instantiate_s"] > 0


def test_recorded_ladder_view():
    b = _bundle("run_ladder")
    (site,) = ladder(b, graph_rows(b))
    assert [x["batch"] for x in site["buckets"]] == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96]
    assert len(site["never_replayed"]) == 2
    assert all(x["ns_per_row"] > 0 for x in site["buckets"] if x["replays"])
    text = Console(width=200, record=True)
    text.print(render(summarize(b)))
    out = text.export_text()
    assert "1 pool(s)" in out and "more reserved outside the pools" in out
    assert "Bucket ladder" in out and "never replayed: 2 bucket(s)" in out


def _fake_allocator(monkeypatch, snapshot):
    """torch's allocator faked for a meter's windows: ``snapshot`` as ``_snapshot``, device 0,
    scope ids 7 and 8 naming ``L.a`` and ``L.b``; returns a graph class of pool (0, 3)."""
    import torch

    from graphscope.capture import meter as mt

    monkeypatch.setattr(torch.cuda.memory, "_snapshot", snapshot)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(mt, "scope_name", lambda sid: {7: "L.a", 8: "L.b"}.get(sid, OUTSIDE))

    class Graph:
        def pool(self):
            return (0, 3)

    return Graph


def test_meter_reads_kept_history_once_for_consecutive_windows(monkeypatch):
    """`run` keeps the allocator history on across a program's consecutive captures and reads
    it once (its capture loop pays for no snapshot): stop() per window, read() for all gives
    each window what end() gives it alone, the history started once and stopped once."""
    import time

    import torch


    monkeypatch.setenv("GRAPHSCOPE_ALLOC_TRACKER", "history")  # torch's history, faked
    snap = {"segments": [{"address": 4096, "total_size": 2 * MiB, "allocated_size": 3072,
                          "segment_pool_id": (0, 3)}], "device_traces": [[]]}
    history, snaps = [], []
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history",
                        lambda *a, **k: history.append(a[0] if a else k.get("enabled")))
    Graph = _fake_allocator(monkeypatch, lambda *a, **k: snaps.append(1) or snap)

    def window(m, sid, addr, size):
        m.begin()
        m.marks.append((time.time_ns(), sid))
        time.sleep(0.002)
        now_us = time.time_ns() / 1000
        snap["device_traces"][0].append({"action": "segment_alloc", "addr": 1 << 40,
                                         "size": 2 * size, "time_us": now_us})
        snap["device_traces"][0].append({"action": "alloc", "addr": addr, "size": size,
                                         "time_us": now_us})
        time.sleep(0.002)
        m.marks.append((time.time_ns(), -1))
        return m.stop(Graph())

    m = CaptureMeter(history=True, scopes=False, keep_history=True)
    w1 = window(m, 7, 4096, 1024)
    time.sleep(0.002)
    snap["device_traces"][0].append({"action": "alloc", "addr": 9000, "size": 5,  # between
                                     "time_us": time.time_ns() / 1000})
    snap["device_traces"][0].append({"action": "segment_alloc", "addr": 1 << 41, "size": 99,
                                     "time_us": time.time_ns() / 1000})
    w2 = window(m, 8, 8192, 2048)
    assert history == ["all"] and not snaps  # nothing read inside the loop
    assert "pool_bytes" not in w1[0] and "memory_by_module" not in w2[0]
    m.read([w1, w2])
    assert history == ["all", None] and snaps == [1]
    a, b = w1[0], w2[0]
    assert a["memory_by_module"] == {"L.a": [1024, 1024]}
    assert b["memory_by_module"] == {"L.b": [2048, 2048]}
    assert a["pool_bytes"] == b["pool_bytes"] == 2 * MiB
    # memory_reserved's growth per window, from the history's segment events (no
    # memory_reserved() call in the loop); the segment between the windows is neither's
    assert (a["capture_reserved_bytes"], b["capture_reserved_bytes"]) == (2048, 4096)
    assert a["capture_by_module_s"]["L.a"] >= 0.003 and "L.a" not in b["capture_by_module_s"]
    # without keep_history each window reads its own history at end(): the same facts
    single = CaptureMeter(history=True, scopes=False)
    snap["device_traces"][0].clear()
    info, w = window(single, 7, 4096, 1024)
    assert history[-1] is None  # stopped with the window
    single.read([(info, w)])
    assert info["memory_by_module"] == a["memory_by_module"]
    assert info["pool_bytes"] == a["pool_bytes"]



class _FakeTracker:
    """graphscope.native._alloctrace's interface (csrc/alloctrace.cpp), its events given by the test
    as the allocator would hand them to the tracker: kept only while open, up to its cap."""

    ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
               "segment_map", "segment_unmap", "other")

    def __init__(self):
        self.calls, self.rows, self.open, self.cap, self.dropped, self.first_drop = \
            [], [], False, 0, 0, 0

    def start(self, max_events):
        self.calls.append("start")
        self.rows, self.open, self.cap, self.dropped = [], True, max_events, 0

    def resume(self):
        self.calls.append("resume")
        self.open = True

    def pause(self):
        self.open = False

    def take(self):
        self.calls.append("take")
        self.open = False
        out, self.rows = (self.rows, self.dropped, self.first_drop), []
        return out

    def event(self, action, addr, size, pool=(0, 3), device=0):
        if not self.open:
            return
        t = time.time_ns()
        if len(self.rows) >= self.cap:
            self.dropped, self.first_drop = self.dropped + 1, self.first_drop or t
            return
        self.rows.append((t, self.ACTIONS.index(action), device, addr, size, *pool))


def test_meter_reads_the_allocator_tracker_per_window_and_closes_it_between(monkeypatch):
    """Where graphscope.native._alloctrace is built, the meter records the allocator's events with
    it
    instead of torch's history (never switched on): open inside each window only, read once
    for a batch of windows; events of other pools, other devices and between windows are
    nobody's; a full buffer says so for the windows it cut."""
    import torch

    from graphscope import native
    from graphscope.capture import meter as mt

    fake = _FakeTracker()
    monkeypatch.setattr(native, "alloc_tracker", lambda: fake)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history",
                        lambda *a, **k: pytest.fail("torch's history switched on"))
    snap = {"segments": [{"address": 4096, "total_size": 2 * MiB, "allocated_size": 3072,
                          "segment_pool_id": (0, 3)}]}
    Graph = _fake_allocator(monkeypatch, lambda *a, **k: snap)

    def window(m, sid, addr, size):
        m.begin()
        m.marks.append((time.time_ns(), sid))
        fake.event("segment_alloc", 1 << 40, 2 * size)
        fake.event("alloc", addr, size)
        fake.event("alloc", 1 << 42, 77, pool=(0, 0))  # the default pool: not the graph's
        fake.event("alloc", 1 << 43, 55, device=1)  # another device
        fake.event("alloc", addr + 4 * size, size)
        fake.event("free_requested", addr + 4 * size, size)
        m.marks.append((time.time_ns(), -1))
        return m.stop(Graph())

    m = CaptureMeter(history=True, scopes=False, keep_history=True)
    w1 = window(m, 7, 4096, 1024)
    fake.event("alloc", 9000, 5)  # between the windows: the tracker is closed
    w2 = window(m, 8, 8192, 2048)
    assert fake.calls == ["start", "resume"] and not fake.open
    m.read([w1, w2])
    assert fake.calls == ["start", "resume", "take"]
    a, b = w1[0], w2[0]
    assert a["memory_by_module"] == {"L.a": [2048, 1024]}
    assert b["memory_by_module"] == {"L.b": [4096, 2048]}
    assert (a["capture_peak_bytes"], a["capture_live_bytes"]) == (2048, 1024)
    assert (a["capture_reserved_bytes"], b["capture_reserved_bytes"]) == (2048, 4096)
    assert a["pool_bytes"] == b["pool_bytes"] == 2 * MiB
    # a buffer that filled up in the second window: the first is whole, the second says so
    m = CaptureMeter(history=True, scopes=False, keep_history=True)
    monkeypatch.setattr(mt.allocations, "HISTORY_ENTRIES", 6)
    w1 = window(m, 7, 4096, 1024)
    w2 = window(m, 8, 8192, 2048)
    m.read([w1, w2])
    assert w1[0]["memory_by_module"] == {"L.a": [2048, 1024]}
    assert "memory_by_module" not in w2[0] and "overflowed" in w2[0]["memory_note"]
    # as many events kept as HISTORY_ENTRIES, nothing dropped: no ring buffer wrapped
    m = CaptureMeter(history=True, scopes=False, keep_history=True)
    w1 = window(m, 7, 4096, 1024)  # 5 of its 6 events on device 0
    monkeypatch.setattr(mt.allocations, "HISTORY_ENTRIES", 5)
    m.read([w1])
    assert w1[0]["memory_by_module"] == {"L.a": [2048, 1024]}
    # a window captured on device 1, read while device 0 is current: device 1's events
    m = CaptureMeter(history=True, scopes=False, keep_history=True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    m.begin()
    m.marks.append((time.time_ns(), 8))
    fake.event("alloc", 4096, 512, device=1)
    fake.event("alloc", 8192, 256, device=0)  # another thread's, on device 0
    m.marks.append((time.time_ns(), -1))
    w1 = m.stop(Graph())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    m.read([w1])
    assert w1[0]["memory_by_module"] == {"L.b": [512, 512]}
    # before CUDA's init torch's attach would reach no allocator: torch's history instead
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    started = []
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history",
                        lambda *a, **k: started.append(a[0] if a else k.get("enabled")))
    fake.calls.clear()
    CaptureMeter(history=True, scopes=False).begin()
    assert started == ["all"] and fake.calls == []


def test_meter_falls_back_to_torchs_history_when_the_tracker_will_not_start(monkeypatch):
    """A tracker that cannot attach (an allocator that takes none) leaves the meter on torch's
    allocator history, not without memory by module."""
    import torch

    from graphscope import native

    class Refuses(_FakeTracker):
        def start(self, max_events):
            raise RuntimeError("Allocator not initialized")

    monkeypatch.setattr(native, "alloc_tracker", lambda: Refuses())
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    history = []
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history",
                        lambda *a, **k: history.append(a[0] if a else k.get("enabled")))
    snap = {"segments": [{"address": 4096, "total_size": 2 * MiB, "allocated_size": 1024,
                          "segment_pool_id": (0, 3)}], "device_traces": [[]]}
    Graph = _fake_allocator(monkeypatch, lambda *a, **k: snap)
    m = CaptureMeter(history=True, scopes=False)
    m.begin()
    m.marks.append((time.time_ns(), 7))
    snap["device_traces"][0].append({"action": "alloc", "addr": 4096, "size": 1024,
                                     "time_us": time.time_ns() / 1000})
    m.marks.append((time.time_ns(), -1))
    info = m.end(Graph())
    assert history == ["all", None]
    assert info["memory_by_module"] == {"L.a": [1024, 1024]}


def test_ladder_pools_unknown_in_a_bundle_without_pool_ids():
    # GIVEN a run bundle recorded before graphs carried their pool ids (run_decode), and one
    # with them (run_ladder: one shared pool)
    (old,) = ladder(_bundle("run_decode"), graph_rows(_bundle("run_decode")))
    (new,) = ladder(_bundle("run_ladder"), graph_rows(_bundle("run_ladder")))
    # THEN the old one's pool count is unknown (None), not "0 pools"
    assert old["pools"] is None and new["pools"] == 1


def test_the_ladder_table_fits_80_and_100_columns_and_says_what_it_left_out():
    # GIVEN a program's bucket ladder on narrow terminals
    import subprocess
    import sys

    from tests.conftest import DATA, ROOT

    for width in (80, 100):
        r = subprocess.run([sys.executable, "-m", "graphscope", "report",
                            os.path.join(DATA, "run_compiled_trees")], capture_output=True,
                           text=True, cwd=ROOT, timeout=120,
                           env={**os.environ, "COLUMNS": str(width)})
        part = r.stdout[r.stdout.index("Bucket ladder"):].split("\n\n")[0]
        lines = part.splitlines()
        # THEN every line fits, no header or bucket is cut
        assert all(len(x.rstrip()) <= width for x in lines), part
        assert "[32,256]" in part and "…" not in part
        said = " ".join(part.split())
        if width == 80:  # the three columns it could not fit are said, not cropped
            assert "time/row" not in lines[2] and "time/replay" in lines[2]
            assert ("time/row, new pool and inst. (instantiation): a wider terminal, or "
                    "--json") in said
        else:
            assert "time/row" in part and "new pool" in part and "a wider terminal" not in said


def test_the_capture_cost_table_fits_80_columns_and_says_what_it_left_out():
    import subprocess
    import sys

    from tests.conftest import DATA, ROOT

    r = subprocess.run([sys.executable, "-m", "graphscope", "report",
                        os.path.join(DATA, "demo", "run_decode")], capture_output=True,
                       text=True, cwd=ROOT, timeout=120, env={**os.environ, "COLUMNS": "80"})
    part = r.stdout[r.stdout.index("Capture cost"):r.stdout.index("Memory by module")]
    # THEN it fits with names and figures whole, and says where the other columns are
    assert max(len(x) for x in part.splitlines()) <= 80, part
    assert "│ decode.py:71 #0 [1,1] [1] │" in part and "33.0 MiB" in part
    assert "instantiation, inputs and outputs: a wider terminal, or --json" in " ".join(
        part.split())
