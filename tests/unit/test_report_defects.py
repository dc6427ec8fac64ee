"""Issue 29's report defects: what `report` and `dump` print on the recorded bundles (CPU)."""

import json
import os
import shutil

import pytest

from graphscope.bundle import read_bundle
from graphscope.cli.main import main
from graphscope.graphs.model import unique_short_names
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
    assert any(line.startswith("replays: ") for line in out.splitlines())


# ------------------------------------------------------------------ 2: forward-only bundles
def test_forward_only_bundle_claims_no_backward_coverage(capsys, monkeypatch):
    out = _report(capsys, monkeypatch, os.path.join(DATA, "decode_kv_forward"))
    cov = next(line for line in out.splitlines() if "module coverage" in line)
    assert "fwd 100.0%" in cov and "bwd" not in cov
    rows = [line for line in out.splitlines() if line.startswith("│ bucket")]
    assert len(rows) == 3
    for row in rows:  # replays and traced replays: the header's 4, not "-"
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[3] == "4" and cells[4] == "4", row


# ------------------------------------------------------------------ 3: shared memory pools
def test_a_shared_pool_is_shown_once(tmp_path, capsys, monkeypatch):
    b = _copy(tmp_path, "run_partial_network")

    def share(gs):
        for i, g in enumerate(gs):
            g["info"]["pool_id"] = [0, 1] if i < 4 else [0, 2 + i]
    _edit_graphs(b, share)
    out = _report(capsys, monkeypatch, str(b), "--recompute")
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
