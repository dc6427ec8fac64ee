"""Report defects: what `report` and `dump` print on the recorded bundles (CPU)."""

import json
import os
import shutil

import pytest

from graphscope.cli.main import main
from graphscope.model.bundle_io import read_bundle
from graphscope.model.graph import unique_short_names
from tests.conftest import DATA


def _copy(tmp_path, name):
    dst = tmp_path / name
    shutil.copytree(os.path.join(DATA, name), dst)
    return dst


def _report(capsys, monkeypatch, *args, columns=200):
    monkeypatch.setenv("COLUMNS", str(columns))
    rc = main(["report", *args])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


def _edit_graphs(b, fn):
    p = b / "graph.json"
    g = json.loads(p.read_text())
    fn(g["graphs"])
    p.write_text(json.dumps(g))


# ------------------------------------------------------------------ 1: the header
@pytest.mark.parametrize("name", ["mlp_step", "run_decode"])
def test_header_newline_is_a_newline(capsys, monkeypatch, name):
    out = _report(capsys, monkeypatch, os.path.join(DATA, name))
    assert "\\x0a" not in out
    assert any(line.startswith(("replays: ", "traced replays: ")) for line in out.splitlines())


# ------------------------------------------------------------------ 2: forward-only bundles
def test_forward_only_bundle_claims_no_backward_coverage(capsys, monkeypatch):
    out = _report(capsys, monkeypatch, os.path.join(DATA, "decode_kv_forward"), "--no-diagnosis")
    cov = next(line for line in out.splitlines() if "module coverage" in line)
    assert "fwd 100.0%" in cov and "bwd" not in cov
    rows = [line for line in out.splitlines() if line.startswith("│ bucket")]
    assert len(rows) == 3
    for row in rows:  # replays and traced replays: the header's 4, not "-"
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[3] == "4" and cells[4] == "4", row
    head = next(line for line in out.splitlines() if "┃ module" in line)
    assert "bwd" not in head and "fwd" not in head  # no split of what has one phase
    head = next(line for line in _report(capsys, monkeypatch, os.path.join(DATA, "mlp_step"))
                .splitlines() if "┃ module" in line)
    assert "fwd/bwd" in head and "bwd" in head


# ------------------------------------------------------------------ 7: source locations
def test_dot_tooltips_show_sources_relative_to_the_model(capsys):
    assert main(["dump", os.path.join(DATA, "gpt_step"), "--no-collapse", "-o", "-"]) == 0
    dot = capsys.readouterr().out
    assert "source: gpt.py:61 (forward)" in dot and "sample_models/gpt.py" not in dot
    b = read_bundle(os.path.join(DATA, "gpt_step"))  # the bundle keeps them absolute
    assert any(n.source and n.source.startswith("/") for n in b.nodes())


# ------------------------------------------------------------------ 3: shared memory pools
def test_a_shared_pool_is_shown_once(tmp_path, capsys, monkeypatch):
    b = _copy(tmp_path, "run_partial_network")

    def share(gs):
        for i, g in enumerate(gs):
            g["info"]["pool_id"] = [0, 1] if i < 4 else [0, 2 + i]
    _edit_graphs(b, share)
    out = _report(capsys, monkeypatch, str(b), "--recompute", "--no-diagnosis")
    rows = [line for line in out.splitlines() if "partial_network.py" in line and "│" in line]
    assert len(rows) == 6
    sizes = [r for r in rows if "MiB" in r]
    # the four graphs of pool 1: its size once (the largest reading), then "shared pool 1"
    assert "118.0 MiB shared pool 1 (4 graphs)" in rows[0]
    assert all(r.rstrip(" │").endswith("shared pool 1") for r in rows[1:4])
    assert len(sizes) == 3  # pool 1 once, the two private pools
    js = json.loads(_report(capsys, monkeypatch, str(b), "--recompute", "--json"))
    shared = [g["pool_shared"] for g in js["graphs"] if "pool_shared" in g]
    assert [s["first"] for s in shared] == [True, False, False, False]


# ------------------------------------------------------------------ 6: kernel names
def test_kernel_names_use_the_width_and_never_read_alike(capsys, monkeypatch):
    out = _report(capsys, monkeypatch, os.path.join(DATA, "run_train_step_amp"), "--top", "60")
    gemms = sorted({line.split("│")[1].strip() for line in out.splitlines()
                    if "Kernel2" in line})
    assert gemms == [
        "Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_64x64_nt_align1>",
        "Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align2>",
        "Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_64x2_nn_align2>",
    ]
    js = json.loads(_report(capsys, monkeypatch, os.path.join(DATA, "run_train_step_amp"),
                            "--top", "0", "--json"))
    names = [r["kernel"] for r in js["top_kernels"]]
    b = read_bundle(os.path.join(DATA, "run_train_step_amp"))
    distinct = {n.demangled or n.kernel for n in b.work if n.type == "kernel"}
    assert len(names) == len(set(names)) == len(distinct)


def test_unique_short_names_keep_what_tells_kernels_apart():
    a = "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, F> >(R)"
    b = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, F> >(R)"
    c = "void k<1>(int)"
    d = "void k<1>(float)"
    e = "plain_c_kernel"
    names = unique_short_names([a, b, c, d, e, a])
    assert names[a] == "reduce_kernel<128, 4, ReduceOp<float, F>>"  # short: all of them
    assert names[b] == "reduce_kernel<512, 1, ReduceOp<float, F>>"
    long = [f"void reduce_kernel<{i}, 4, {'x' * 120}>(R)" for i in (1, 2)]
    assert sorted(unique_short_names(long).values()) == ["reduce_kernel<1, …>",
                                                         "reduce_kernel<2, …>"]
    assert names[c] == "k<int>" and names[d] == "k<float>"
    assert names[e] == "plain_c_kernel"
    same = unique_short_names(["void k<1>(int)", "void k<1>(int) "])
    assert sorted(same.values()) == ["k<1> #1", "k<1> #2"]


@pytest.mark.parametrize("kernel", ["[/x]", "evil\x1b[2J\x1b]8;;http://x\x07k"])
def test_kernel_and_op_names_are_not_markup_or_escapes(tmp_path, capsys, monkeypatch, kernel):
    b = _copy(tmp_path, "mlp_step")

    def edit(gs):
        for n in gs[0]["nodes"]:
            if n["type"] == "kernel":
                n["demangled"] = n["kernel"] = kernel
                n["op"] = "aten::" + kernel
                break
    _edit_graphs(b, edit)
    out = _report(capsys, monkeypatch, str(b), "--recompute", "--top", "50")
    assert "\x1b" not in out and "\x07" not in out
    if kernel == "[/x]":
        assert "│ [/x]" in out and "aten::[/x]" in out
    else:
        assert "\\x1b[2J" in out


# ------------------------------------------------------------------ 4: dump of several graphs
@pytest.mark.parametrize("flag,ext", [("--dot", "dot"), ("--raw", "raw.dot")])
def test_dump_writes_every_graph_or_refuses(tmp_path, monkeypatch, capsys, flag, ext):
    b = _copy(tmp_path, "mlp_callables")
    monkeypatch.chdir(tmp_path)  # dump writes into the current directory
    assert main(["dump", str(b), flag]) == 0
    said = capsys.readouterr()
    for g in ("forward", "backward"):  # "Wrote" on stdout, as for one graph
        out = tmp_path / f"mlp_callables.{g}.{ext}"
        assert out.exists() and f"Wrote ./{out.name}" in said.out and "Wrote" not in said.err
    fwd, bwd = ((tmp_path / f"mlp_callables.{g}.{ext}").read_text() for g in ("forward",
                                                                             "backward"))
    assert fwd != bwd
    # one -o for two graphs: refused, naming them, nothing written
    assert main(["dump", str(b), flag, "-o", str(tmp_path / "one.dot")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 graphs (forward; backward)" in err[0] and "--graph" in err[0]
    assert not (tmp_path / "one.dot").exists()


def test_dump_of_several_graphs_writes_none_if_one_exists(tmp_path, monkeypatch, capsys):
    b = _copy(tmp_path, "mlp_callables")
    monkeypatch.chdir(tmp_path)  # dump writes into the current directory
    (tmp_path / "mlp_callables.backward.dot").write_text("keep")
    assert main(["dump", str(b)]) == 2
    assert not (tmp_path / "mlp_callables.forward.dot").exists()
    assert (tmp_path / "mlp_callables.backward.dot").read_text() == "keep"


# ------------------------------------------------------------------ 18: --graph selection
def _many(n, sites=("decode.py:71",)):
    from graphscope.model.bundle import Bundle
    from graphscope.model.graph import CapturedGraph

    gs = [CapturedGraph(f"{s} #{i} [{i},1]", 0, i, (), ()) for s in sites for i in range(n)]
    return Bundle("/b", {}, tuple(gs), 0)


def test_an_ordinal_or_a_name_selects_one_graph_of_67():
    from graphscope._errors import BundleError
    from graphscope.model.bundle import resolve_graph

    b = _many(67)
    assert resolve_graph(b, "#1") == "decode.py:71 #1 [1,1]"
    assert resolve_graph(b, "#19") == "decode.py:71 #19 [19,1]"
    assert resolve_graph(b, "decode.py:71 #1") == "decode.py:71 #1 [1,1]"  # not #10..#19
    assert resolve_graph(b, "decode.py:71 #6 [6,1]") == "decode.py:71 #6 [6,1]"
    assert resolve_graph(b, r"#4 \[") == "decode.py:71 #4 [4,1]"  # a regex
    with pytest.raises(BundleError, match="matches 10 graphs"):
        resolve_graph(b, r"#5\d")
    two = _many(3, ("a.py:1", "b.py:2"))
    with pytest.raises(BundleError, match="matches 2 graphs; they are: a.py:1 #1 .*; b.py:2 #1"):
        resolve_graph(two, "#1")
    assert resolve_graph(two, "b.py:2 #1") == "b.py:2 #1 [1,1]"


def test_report_graph_ordinal_on_a_run_bundle(capsys, monkeypatch):
    out = _report(capsys, monkeypatch, os.path.join(DATA, "run_decode"), "--graph", "#1")
    assert "decode.py:71 #1 [8,1] [1]" in out and "#0" not in out


# ------------------------------------------------------------------ regexes from users
@pytest.mark.parametrize("cmd", [["report", "--graph"], ["dump", "--filter"]])
@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(\w+\s?)*$", r"(x*)*y", r"(a)\1"])
def test_regexes_that_can_explode_are_refused(capsys, cmd, pattern):
    rc = main([cmd[0], os.path.join(DATA, "run_decode"), cmd[1], "(?!zz)" + pattern])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and cmd[1] in err[0], err


def test_slow_matching_ends_in_an_error_not_a_hang(monkeypatch):
    import time

    from graphscope._errors import GraphscopeError
    from graphscope.model import userregex
    from graphscope.model.bundle import resolve_graph

    monkeypatch.setattr(userregex, "MATCH_SECONDS", 0.5)
    b = _many(3, ("x" * 4000,))
    t = time.monotonic()
    with pytest.raises(GraphscopeError, match="more than 0.5 s"):
        resolve_graph(b, ".*.*.*.*.*.*.*z")  # polynomial, not exponential: not refused
    assert time.monotonic() - t < 5


# ------------------------------------------------------------- a first-time user's first try
def test_report_of_one_graph_keeps_its_span(capsys, monkeypatch):
    # --graph of a one-graph bundle: the bundle's span, not "span 0 ns"
    out = _report(capsys, monkeypatch, os.path.join(DATA, "mlp_step"), "--graph", "step",
                  "--no-diagnosis")
    whole = _report(capsys, monkeypatch, os.path.join(DATA, "mlp_step"), "--no-diagnosis")
    line = next(ln for ln in out.splitlines() if ln.startswith("replays: "))
    assert "span 0 ns" not in line
    assert line == next(ln for ln in whole.splitlines() if ln.startswith("replays: "))


def test_one_graph_of_several_gets_its_own_span_from_its_events():
    from graphscope.model.bundle import only_graph

    b = read_bundle(os.path.join(DATA, "branches_2s_forward"))
    assert len(b.graphs) == 1
    b2 = read_bundle(os.path.join(DATA, "run_decode"))
    g = b2.graphs[1]
    one = only_graph(b2, g.name)
    evs = [e for e in b2.events if e["graph"] == g.name]
    replays = sorted({e["replay"] for e in evs})
    assert len(one.replay_span_ns) == len(replays) > 0
    r0 = [e for e in evs if e["replay"] == replays[0]]
    assert one.replay_span_ns[0] == (max(e["start_ns"] + e["dur_ns"] for e in r0)
                                     - min(e["start_ns"] for e in r0))


def test_run_header_counts_traced_replays_and_traced_graphs(capsys, monkeypatch):
    out = _report(capsys, monkeypatch, os.path.join(DATA, "run_ladder"), "--no-diagnosis")
    line = next(ln for ln in out.splitlines() if ln.startswith("traced replays: "))
    assert line.startswith("traced replays: 3, graph work ")
    assert line.endswith("for one replay of each of the 8 traced graphs (2 captured but never "
                         "replayed)")


def test_module_rows_in_number_order(capsys, monkeypatch):
    out = _report(capsys, monkeypatch, os.path.join(DATA, "branches_forward"), "--no-diagnosis",
                  "--depth", "2")
    rows = [ln.strip("│ ").split(" ")[0] for ln in out.splitlines()
            if ln.startswith("│     ") and ln.strip("│ ").split(" ")[0].isdigit()]
    left = [int(x) for x in rows[:32]]
    assert left == list(range(32)), rows[:12]


def test_diff_places_new_modules_under_their_parent_without_a_percentage(capsys, monkeypatch):
    from graphscope.analysis.diff import diff_summary

    a = read_bundle(os.path.join(DATA, "mlp_step"))
    b = read_bundle(os.path.join(DATA, "gpt_step_eager"))
    d = diff_summary(a, b, depth=1)
    names = [r["module"] for r in d["modules"]]
    assert names.index("L.blocks") < names.index("L.head") < names.index("(loss)")
    new = next(r for r in d["modules"] if r["module"] == "L.blocks")
    assert new["only_in"] == "b" and new["delta_pct"] is None
    monkeypatch.setenv("COLUMNS", "120")
    # a faster graph whose GPU work per module grew (two streams) passes a span gate
    assert main(["diff", os.path.join(DATA, "branches_forward"),
                 os.path.join(DATA, "branches_2s_forward"), "--fail-above", "5",
                 "--depth", "1"]) == 0
    out = capsys.readouterr().out
    assert "total GPU work" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("pass: span of forward 1.34 ms → 812.2 µs (-39.6%"), last
    assert main(["diff", os.path.join(DATA, "mlp_step"), os.path.join(DATA, "gpt_step_eager"),
                 "--depth", "1"]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if "blocks (only in B)" in ln)
    assert row.split("│")[5].strip() == "new", row


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_figures_do_not_break_and_the_per_graph_table_splits_to_fit(capsys, monkeypatch,
                                                                   columns):
    import re

    out = _report(capsys, monkeypatch, os.path.join(DATA, "run_ladder"), "--depth", "1",
                  "--no-diagnosis", "--full", columns=columns)
    assert all(len(ln) <= columns for ln in out.splitlines())
    start = out.index("GPU time by module per graph")
    block = out[start:out.index("Memory pools")]
    # the shared capture site leaves the column headers; every graph is in one of the tables
    assert "per graph of ladder.py:45" in " ".join(x.strip() for x in block.splitlines()[:2])
    heads = re.findall(r"#(\d) \[\d+\]", block)
    assert sorted(set(heads)) == [str(i) for i in range(10)]
    # no figure broken over two lines: each body line's cells are whole figures or empty
    for ln in block.splitlines():
        if ln.startswith("│"):
            for cell in ln.strip("│").split("│")[1:]:
                c = cell.strip()
                assert c in ("", "-") or re.fullmatch(r"\d+(\.\d+)? (ns|µs|ms)", c), ln


def test_keep_figures_only_where_the_table_fits():
    from rich.table import Table

    from graphscope.render.fmt import keep_figures

    t = Table()
    t.add_column("name")
    t.add_column("time", justify="right")
    t.add_row("a long module name", "190.0 µs")
    keep_figures(t, width=80)
    assert t.columns[1].min_width == 8 and not t.columns[0].min_width
    narrow = Table()
    for i in range(12):
        narrow.add_column(f"c{i}")
    narrow.add_row(*["190.0 µs"] * 12)
    keep_figures(narrow, width=80)  # 12 x 11 > 80: rich would crop, so nothing is pinned
    assert all(not c.min_width for c in narrow.columns)


def test_stream_order_edges_say_how_many_more_and_one_node_runs_are_one_node(capsys,
                                                                            monkeypatch):
    out = _report(capsys, monkeypatch, os.path.join(DATA, "mlp_step_eager"), columns=300)
    line = next(ln for ln in out.splitlines()
                if ln.startswith("step: ") and "stream-order-only edge(s) (" in ln)
    assert line.startswith("step: 7 stream-order-only edge(s)") and "… 3 more)" in line
    assert "#15–#15" not in line and "#15 L.head" in line


def test_dump_filter_matching_nothing_is_an_error_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "g.dot"
    assert main(["dump", os.path.join(DATA, "mlp_step"), "--dot", "--filter", "nomatch",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--filter 'nomatch': no node of graph 'step'" in err and not out.exists()
    assert main(["dump", os.path.join(DATA, "mlp_step"), "--dot", "--filter", "fc1",
                 "-o", str(out)]) == 0 and "fc1" in out.read_text()


# ------------------------------------------------------- a first-time user's second try
def test_a_graph_never_timed_has_no_time_in_the_json_not_zero(capsys, monkeypatch):
    # GIVEN a ladder whose first two buckets were never replayed while traced
    s = json.loads(_report(capsys, monkeypatch, os.path.join(DATA, "run_ladder"), "--json",
                           "--recompute"))
    untimed = [g["name"] for g in s["graphs"] if not g.get("traced_replays")]
    assert len(untimed) == 2
    # THEN their time per replay is null (the tables show "-"), not 0 ns
    rows = {g["name"]: g for g in s["graphs"]}
    assert all(rows[n]["median_ns"] is None for n in untimed)
    assert all(g["median_ns"] > 0 for g in s["graphs"] if g["name"] not in untimed)
    # AND so are their columns of module time per graph
    cols = [i for i, n in enumerate(s["by_graph"]["graphs"]) if n in untimed]
    assert cols and all(r["per_graph_ns"][i] is None for r in s["by_graph"]["rows"]
                        for i in cols)
    assert any(r["per_graph_ns"][i] for r in s["by_graph"]["rows"]
               for i in range(len(s["by_graph"]["graphs"])) if i not in cols)
    # AND their critical path's modules are counted in nodes, never in an _ns field
    for o in s["diagnosis"]["graphs"]:
        cp = o["critical_path"]
        unit = "ns" if o["timed"] else "nodes"
        assert cp["modules"] and all(unit in m and ("ns" in m) == o["timed"]
                                     for m in cp["modules"] + cp["modules_rolled_up"])


def test_coverage_reads_forward_first_from_summary_json_and_recomputed(capsys, monkeypatch):
    # summary.json's keys are sorted (backward before forward); the header keeps the step's order
    p = os.path.join(DATA, "mlp_step")
    for extra in ((), ("--recompute",)):
        out = _report(capsys, monkeypatch, p, *extra)
        head = next(ln for ln in out.splitlines() if ln.startswith("graphs: "))
        assert "module coverage fwd 100.0% bwd 100.0%" in head, (extra, head)


def test_ladder_of_a_multirank_bundle_names_the_rank_bundle_to_pass(capsys):
    # GIVEN a multi-rank bundle (its report compares ranks, not a site's buckets)
    rc = main(["report", os.path.join(DATA, "ddp_mlp_step"), "--ladder"])
    err = capsys.readouterr().err.strip().splitlines()
    # THEN one line that says which bundle --ladder takes, not a silent report without it
    assert rc == 2 and len(err) == 1 and "--ladder takes one rank's bundle" in err[0], err
    assert main(["report", os.path.join(DATA, "ddp_mlp_step", "rank0"), "--ladder"]) == 0
    assert "Bucket ladder: no capture site" in capsys.readouterr().out
