"""The straggler verdict on the recorded two-rank GPT-2 fixtures (DDP and FSDP2, rank 1
spinning at the start of transformer.h.0.mlp's forward; bench/record_ranks_fixtures.py
records them on 2 GPUs): the same checks as the GPU test makes on a fresh recording."""

import os

import pytest

from tests.conftest import DATA
from tests.gpu.test_ranks_gpu import check_attribution, check_ddp, check_fsdp2

CHECKS = {"ddp": (check_ddp, "(ddp)"), "fsdp2": (check_fsdp2, "(fsdp)")}


@pytest.mark.parametrize("scenario", sorted(CHECKS))
def test_recorded_straggler_is_named(scenario):
    path = os.path.join(DATA, f"{scenario}_gpt2_straggler")
    if not os.path.isdir(path):
        pytest.skip(f"{path} not recorded yet: python bench/record_ranks_fixtures.py on a "
                    "machine with 2 GPUs")
    check, scope = CHECKS[scenario]
    check_attribution(path, scope)
    check(path)


SPIN_NS = 2_000_000


def _inject_spin(tmp_path, spin_ns=SPIN_NS):
    """The recorded DDP bundle as it would be had rank 1 spun ``spin_ns`` on its GPU right
    after L.fc1's first kernel: a spin_kernel node there (in L.fc1's forward scope), rank 1's
    later events that much later on its own clock, and bucket 0's all-reduce on both ranks
    re-timed from the shifted arrival (each rank ends it together; its own time stays)."""
    import json
    import shutil

    import numpy as np

    from tests.unit.test_ranks_collectives import DDP, _nccl_ids

    out = tmp_path / "spin"
    shutil.copytree(DDP, out)
    first = _nccl_ids()[0]
    base = first & ~0xFFFFFFFF
    spin = base | 41
    r1 = out / "rank1"
    g = json.loads((r1 / "graph.json").read_text())
    step = g["graphs"][0]
    step["nodes"].append({"local_id": 41, "exec_node_id": spin, "type": "kernel",
                          "kernel": "_Z11spin_kernell", "demangled": "spin_kernel(long)",
                          "annotation": {"module_name": "L.fc1"}, "grid": [1, 1, 1],
                          "block": [1, 1, 1], "smem": 0})
    step["edges"] += [[0, 41], [41, 1]]
    (r1 / "graph.json").write_text(json.dumps(g))
    d = {r: np.load(out / f"rank{r}" / "durations.npy") for r in (0, 1)}
    t = {r: json.loads((out / f"rank{r}" / "timeline.json").read_text()) for r in (0, 1)}
    # bucket 0: arrivals on the end clock, rank 1's later by the spin; the last arrival plus
    # the collective's own time ends it on both ranks
    rows = [np.flatnonzero(d[r][:, 0] == first)[0] for r in (0, 1)]
    d0, d1 = d[0][rows[0], 1:].copy(), d[1][rows[1], 1:].copy()
    own = np.minimum(d0, d1)
    a0, a1 = -d0, -d1 + spin_ns
    end = np.maximum(a0, a1) + own
    d[0][rows[0], 1:], d[1][rows[1], 1:] = end - a0, end - a1
    d[1] = np.vstack([d[1], [[spin, *[spin_ns] * (d[1].shape[1] - 1)]]])
    at = {e["replay"]: e["start_ns"] + e["dur_ns"] for e in t[1]["events"]
          if e["exec_node_id"] == base}  # L.fc1's first kernel's end
    for r in (0, 1):
        for e in t[r]["events"]:
            if e["exec_node_id"] == first:
                e["dur_ns"] = int(d[r][rows[r], 1 + e["replay"]])
            if r == 1 and e["start_ns"] >= at[e["replay"]]:
                e["start_ns"] += spin_ns
        np.save(out / f"rank{r}" / "durations.npy", d[r])
    t[1]["events"] += [{"dur_ns": spin_ns, "exec_node_id": spin, "graph": "step",
                        "kind": "kernel", "replay": rep, "start_ns": s, "stream": 7}
                       for rep, s in at.items()]
    for r in (0, 1):
        (out / f"rank{r}" / "timeline.json").write_text(json.dumps(t[r]))
    (out / "straggler.json").write_text(json.dumps(
        {"rank": 1, "module": "fc1", "module_name": "L.fc1", "delay_us": spin_ns / 1e3}))
    return str(out)


def test_a_straggler_injected_into_the_recorded_ranks_is_named(tmp_path):
    # GIVEN the recorded DDP ranks with rank 1 spinning 2 ms in L.fc1's forward
    path = _inject_spin(tmp_path)
    # WHEN the GPU test's checks run on them
    check_attribution(path, "(ddp)")
    check_ddp(path)
    # THEN (check_ddp) rank 1 is late to bucket 0's all-reduce for its work in L.fc1's
    # forward, and rank 0's wait there is the spin within 10%
