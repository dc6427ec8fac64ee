"""Many GPUs, the parts that run on CPUs: the rank-bundle layout, the merge, the
launcher arguments and torchrun's environment. The GPU capture itself needs nvidia-h200-x2."""

import json
import os
import shutil

import numpy as np
import pytest

from graphscope._errors import BundleError
from graphscope.analysis.ranks import merge
from graphscope.cli.main import main
from graphscope.model.bundle_io import read_bundle, write_bundle
from graphscope.model.ranks import (
    NVLINK_MULTICAST_OFF,
    is_multirank,
    rank_from_env,
    rank_output,
    read_ranks,
    torchrun_argv,
    torchrun_env,
)
from tests.conftest import DATA


def _two_ranks(tmp_path, slow=1.5):
    """rank0 = the recorded mlp bundle; rank1 = the same with L.fc2 slower by `slow`x."""
    base = tmp_path / "multi"
    base.mkdir()
    shutil.copytree(os.path.join(DATA, "mlp_step"), base / "rank0")
    b = read_bundle(os.path.join(DATA, "mlp_step"))
    durations = {}
    for n in b.work:
        f = slow if n.module == "L.fc2" else 1.0
        durations[str(n.exec_node_id)] = [int(x * f) for x in n.durations_ns]
    totals = np.array(list(durations.values())).sum(axis=0).tolist()
    manifest = {k: v for k, v in b.manifest.items() if k not in ("schema_version", "files")}
    write_bundle(str(base / "rank1"), manifest={**manifest, "rank": {"rank": 1}},
                 graphs=list(b.graphs),
                 timeline={"replays": b.replays, "durations_ns": durations,
                           "replay_kernel_ns": totals, "replay_span_ns": totals,
                           "events": list(b.events)})
    return str(base)


def test_layout_and_merge_skew(tmp_path):
    path = _two_ranks(tmp_path)
    assert is_multirank(path) and not is_multirank(os.path.join(path, "rank0"))
    m = merge(read_ranks(path))
    rows = {r["module"]: r for r in m["modules"]}
    fc2 = rows["L.fc2"]
    assert fc2["slowest_rank"] == 1
    assert fc2["per_rank_ns"][1] == pytest.approx(1.5 * fc2["per_rank_ns"][0], rel=0.01)
    assert fc2["skew"] == pytest.approx(fc2["per_rank_ns"][1] / fc2["median_ns"])
    assert rows["L.fc1"]["skew"] == pytest.approx(1.0)
    assert m["replay_skew"] > 1.0 and [c["kernels"] for c in m["collectives"]] == [0, 0]


def test_missing_rank_is_an_error(tmp_path):
    path = _two_ranks(tmp_path)
    shutil.move(os.path.join(path, "rank1"), os.path.join(path, "rank2"))
    with pytest.raises(BundleError, match=r"ranks \[0, 2\].*missing"):
        read_ranks(path)


def test_report_and_trace_of_a_multirank_bundle(tmp_path, capsys):
    path = _two_ranks(tmp_path)
    assert main(["report", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["world_size"] == 2
    assert main(["report", path]) == 0
    assert "rank 1" in capsys.readouterr().out
    out = tmp_path / "t.json"
    assert main(["dump", path, "--trace", "-o", str(out)]) == 0
    names = {e["args"]["name"] for e in json.loads(out.read_text())["traceEvents"]
             if e.get("name") == "process_name"}
    assert {"rank 0: GPU (graph replays)", "rank 1: GPU (graph replays)"} <= names


def test_torchrun_launcher_and_environment():
    argv = ["capture", "m.py", "--nproc", "2", "-o", "out", "--nproc=2"]
    cmd = torchrun_argv(2, argv)
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    assert cmd[5:] == ["-m", "graphscope", "capture", "m.py", "-o", "out"]
    env = torchrun_env({"PATH": "/bin", "NCCL_NVLS_ENABLE": "1"})
    assert all(env[k] == v for k, v in NVLINK_MULTICAST_OFF.items()) and env["PATH"] == "/bin"
    info = rank_from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert info is not None and rank_output("b", info) == os.path.join("b", "rank1")
    assert rank_from_env({}) is None


def test_rank_env_under_real_torchrun_with_gloo(tmp_path):
    """torchrun (CPU, gloo) starts two ranks that see their RANK/WORLD_SIZE as graphscope
    reads them and agree through an all-reduce."""
    import subprocess
    import sys

    script = tmp_path / "probe.py"
    script.write_text(
        "import torch, torch.distributed as dist\n"
        "from graphscope.model.ranks import rank_from_env\n"
        "info = rank_from_env()\n"
        "dist.init_process_group('gloo')\n"
        "t = torch.tensor([info.rank + 1.0]); dist.all_reduce(t)\n"
        f"open(r'{tmp_path}/rank%d.txt' % info.rank, 'w').write("
        "'RANK %d %d %d' % (info.rank, info.world_size, int(t.item())))\n"
        "dist.destroy_process_group()\n")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node=2", str(script)], capture_output=True, text=True,
                       timeout=240, env=torchrun_env())
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [(tmp_path / f"rank{i}.txt").read_text() for i in range(2)]
    assert lines == ["RANK 0 2 3", "RANK 1 2 3"]
