"""Bundles of model-file workloads recorded on the H200, read on the CPU: forward
buckets, a user step with micro-batches and AdamW, gradient accumulation, DDP over two ranks."""

import json
import os
import subprocess
import sys

from graphscope.analysis.ddp import ddp_rows
from graphscope.analysis.ranks import merge
from graphscope.analysis.summary import modules_by_graph, summarize
from graphscope.model.bundle_io import read_bundle
from graphscope.model.graph import UNATTRIBUTED
from graphscope.model.ranks import read_ranks
from tests.conftest import DATA, ROOT, fixture_bundles


def _b(name):
    return read_bundle(os.path.join(DATA, name))


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "graphscope", *args], capture_output=True,
                          text=True, cwd=ROOT)


def test_forward_buckets_one_graph_and_one_column_each():
    b = _b("decode_kv_forward")
    names = [g.name for g in b.graphs]
    assert names == ["bucket0 [1,1] [1]", "bucket1 [4,1] [1]", "bucket2 [8,1] [1]"]
    assert [g.info["bucket"] for g in b.graphs] == [0, 1, 2]
    work = b.work
    assert all(n.module != UNATTRIBUTED for n in work)
    assert {n.phase for n in work} == {"forward"}
    by = modules_by_graph(b)
    assert by["graphs"] == names
    rows = {r["module"]: r["per_graph_ns"] for r in by["rows"]}
    # each column is that graph's own time: columns of the root add up to the bundle's total
    total = sum(rows["L"])
    per_graph = [r["median_ns"] for r in summarize(b)["graphs"]]
    assert abs(total - sum(per_graph)) / total < 0.05
    out = _cli("report", os.path.join(DATA, "decode_kv_forward"))
    assert out.returncode == 0
    assert "GPU time by module per graph" in out.stdout and "bucket2 [8,1]" in out.stdout


def test_user_step_phases_accumulation_and_optimizer():
    b = _b("train_step_bf16")
    work = b.work
    assert all(n.module != UNATTRIBUTED for n in work)
    assert {n.phase for n in work} == {"forward", "backward", "optimizer"}
    assert b.manifest.get("step") == "user"
    acc = [n for n in work if n.annotation.get("accumulate_grad")]
    # zero_grad(set_to_none=False) keeps .grad: both micro-batches add into it, once per
    # parameter (14: LayerNorm and Linear weights and biases of two blocks, and the head)
    assert len(acc) == 2 * 14
    assert all(n.op == "accumulate_grad" and n.phase == "backward" for n in acc)
    assert {n.module for n in acc} == {
        "L.head", "L.blocks.0.norm", "L.blocks.0.ff.0", "L.blocks.0.ff.2",
        "L.blocks.1.norm", "L.blocks.1.ff.0", "L.blocks.1.ff.2"}
    gacc = [n for n in work if n.annotation.get("grad_accumulation")]
    assert gacc and all(n.module.startswith("L.blocks.1") and n.phase == "backward"
                        for n in gacc)
    s = summarize(b)
    rows = {r["module"]: r for r in s["modules"]}
    assert rows["L.blocks.1"]["acc_kernels"] == len(gacc)
    assert 0 < rows["L.blocks.1"]["acc_ns"] <= rows["L.blocks.1"]["bwd_ns"]
    assert rows["L.blocks.0"]["acc_kernels"] == 0  # its input needs no grad: nothing to add
    assert s["coverage"]["optimizer"]["pct"] == 100.0
    out = _cli("report", os.path.join(DATA, "train_step_bf16"), "--depth", "2")
    assert out.returncode == 0 and "acc" in out.stdout and "(optimizer)" in out.stdout


def test_gpt_residual_accumulation_is_tagged_in_each_block():
    b = _b("gpt_step")
    gacc = [n for n in b.work if n.annotation.get("grad_accumulation")]
    assert gacc and all(n.phase == "backward" and n.op.startswith("aten::add") for n in gacc)
    assert {n.module.split(".")[2] for n in gacc if n.module.startswith("L.blocks.")} == {
        "0", "1"}
    assert all(n.module != UNATTRIBUTED for n in b.work)


def test_ddp_two_ranks_reducer_work_in_backward_per_bucket():
    path = os.path.join(DATA, "ddp_mlp_step")
    ranks = read_ranks(path)
    assert [r for r, _ in ranks] == [0, 1]
    for _, b in ranks:
        work = b.work
        assert all(n.module != UNATTRIBUTED for n in work)
        ddp = [n for n in work if n.module == "(ddp)"]
        assert ddp and all(n.phase == "backward" for n in ddp)
        rows = ddp_rows(b)
        assert [r["bucket"] for r in rows] == [0, 1]
        assert sorted(m for r in rows for m in r["modules"]) == ["L.fc1", "L.fc2", "L.head"]
        assert all(r["comm_nodes"] == 1 and 0 < r["comm_ns"] <= r["median_ns"] for r in rows)
        assert all(0.0 <= r.get("overlap_pct", 0.0) <= 100.0 for r in rows)
        # every node of a bucket touches that bucket: copies in, the scaling, the all-reduce,
        # and the copies back into .grad at the end of backward
        ops = {n.op for n in ddp}
        assert {"c10d::allreduce_", "aten::copy_", "aten::mul.out"} <= ops
    m = merge(ranks)
    assert m["world_size"] == 2 and m["replay_skew"] >= 1.0
    assert [e["rank"] for e in m["ddp"]] == [0, 1]
    out = _cli("report", path)
    assert out.returncode == 0
    assert "DDP gradient buckets per rank" in out.stdout and "L.fc2," in out.stdout
    assert "rank 0 is late to bucket 0" in out.stdout  # the straggler verdict
    js = json.loads(_cli("report", path, "--json").stdout)
    assert any(r["module"] == "(ddp)" for r in js["modules"])


# Unmodified programs whose step does work outside every module by design (a functional loss):
# that work is left unattributed, each node saying why and naming its op.
OUTSIDE_MODULES = {"run_profiled"}


def test_every_recorded_sample_is_fully_attributed():
    """100% of kernel/memcpy/memset nodes carry a module on every sample."""
    for path in fixture_bundles():
        b = read_bundle(path)
        unplaced = [n for n in b.work if n.module == UNATTRIBUTED]
        if os.path.basename(path) in OUTSIDE_MODULES:
            assert unplaced and all(
                n.annotation["unplaced_reason"].startswith("launched outside any module")
                and n.op in n.annotation["unplaced_reason"] for n in unplaced), path
            continue
        assert b.work and not unplaced, (path, [n.exec_node_id for n in unplaced[:5]])
