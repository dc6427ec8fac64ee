"""Many GPUs: transformers' GPT-2 trained over 2 ranks with DDP and with FSDP2, captured by
`graphscope capture --nproc 2` with rank 1 made a straggler (it spins on its GPU at the start
of transformer.h.0.mlp's forward: bench/record_ranks_fixtures.py). Every work node is
attributed, FSDP2's collectives are in (fsdp) scopes, the ranks share one clock, and the
straggler is named with its rank, bucket and module, the wait it causes within 10% of the
spin it did. Needs 2 GPUs (nvidia-h200-x2); skips on fewer.

``check_straggler`` is also what tests/unit/test_ranks_fixtures.py runs on the recorded
fixtures.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

from graphscope.analysis.collectives import Alignment, is_collective
from graphscope.analysis.ddp import fsdp_rows
from graphscope.analysis.ranks import RanksSection, ranks_report
from graphscope.analysis.stragglers import Straggler
from graphscope.model.graph import DDP_SCOPE, FSDP_SCOPE, UNATTRIBUTED
from graphscope.model.ranks import read_ranks
from tests.conftest import ROOT

pytestmark = pytest.mark.gpu

TOLERANCE = 0.10  # the wait against the spin


def injected(path: str) -> tuple[dict, float]:
    """straggler.json, and the spin the straggler rank's bundle measured (median ns)."""
    with open(os.path.join(path, "straggler.json")) as f:
        inj = json.load(f)
    b = dict(read_ranks(path))[inj["rank"]]
    spin = [n for n in b.work if "spin_kernel" in (n.kernel or "")]
    assert len(spin) == 1, [n.kernel for n in spin]
    assert (spin[0].module, spin[0].phase) == (inj["module_name"], "forward")
    return inj, float(statistics.median(spin[0].durations_ns))


def check_straggler(path: str) -> tuple[Straggler, RanksSection, float]:
    """The straggler verdict of a recorded straggler bundle: the injected rank, late because
    of its work in the injected module; returns (verdict, section, spin ns)."""
    inj, spin_ns = injected(path)
    s = ranks_report(read_ranks(path))
    assert isinstance(s.collectives, Alignment), s.collectives
    assert s.stragglers, [(c.serves, [a.wait_ns for a in c.ranks])
                          for c in s.collectives.collectives]
    top = s.stragglers[0]
    assert top.rank == inj["rank"] and top.waiting_rank != inj["rank"], top
    assert top.cause == "work", top
    assert (top.excess[0].module, top.excess[0].phase) == (inj["module_name"], "forward"), top
    assert top.excess[0].excess_ns == pytest.approx(spin_ns, rel=TOLERANCE), top
    return top, s, spin_ns


def check_ddp(path: str) -> None:
    top, s, spin_ns = check_straggler(path)
    # the bucket: the first all-reduce of backward, which waits for the forward's spin
    assert top.serves.scope == DDP_SCOPE and top.serves.bucket is not None and top.index == 0
    assert top.kind == "all_reduce"
    assert top.wait_ns == pytest.approx(spin_ns, rel=TOLERANCE), (top.wait_ns, spin_ns)


def check_fsdp2(path: str) -> None:
    top, s, spin_ns = check_straggler(path)
    assert top.serves.scope == FSDP_SCOPE and top.serves.fsdp_module, top
    # FSDP2's collectives each carry part of the lateness: the rank waited for waits, over a
    # step, as long as the straggler spun
    waited = s.totals[top.waiting_rank].wait_ns
    assert waited == pytest.approx(spin_ns, rel=TOLERANCE), (waited, spin_ns)


def check_attribution(path: str, scope: str) -> None:
    for _, b in read_ranks(path):
        work = b.work
        assert not [n for n in work if n.module == UNATTRIBUTED], \
            [(n.op, n.short_name) for n in work if n.module == UNATTRIBUTED][:20]
        comm = [n for n in work if is_collective(n)]
        assert comm and all(n.module == scope for n in comm), \
            [(n.short_name, n.module) for n in comm if n.module != scope]


def _record(tmp_path_factory, scenario: str) -> str:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs (nvidia-h200-x2); this machine has "
                    f"{torch.cuda.device_count()}")
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp(scenario)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "record_ranks_fixtures.py"),
                        "--out", str(out), "--only", scenario], cwd=ROOT, capture_output=True,
                       text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    return str(out / f"{scenario}_gpt2_straggler")


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    return _record(tmp_path_factory, "ddp")


@pytest.fixture(scope="module")
def fsdp2(tmp_path_factory):
    return _record(tmp_path_factory, "fsdp2")


def test_ddp_every_node_attributed(ddp):
    check_attribution(ddp, DDP_SCOPE)


def test_ddp_straggler_named_with_rank_bucket_module_and_wait(ddp):
    check_ddp(ddp)


def test_fsdp2_collectives_serve_their_modules(fsdp2):
    # GIVEN GPT-2 with each block and the root sharded by FSDP2
    check_attribution(fsdp2, FSDP_SCOPE)
    for _, b in read_ranks(fsdp2):
        rows = fsdp_rows(b)
        # THEN each block's and the root's all-gathers and reduce-scatters are there, and
        # backward prefetches some all-gathers
        served = {(r.module, r.op) for r in rows if r.comm_nodes}
        for m in ("L", "L.transformer.h.0", "L.transformer.h.1"):
            assert {(m, "all_gather"), (m, "reduce_scatter")} <= served, (m, served)
        assert any(r.prefetch and r.phase == "backward" and r.op == "all_gather"
                   for r in rows), rows
        assert all(r.overlap_pct is not None for r in rows if r.comm_nodes)


def test_fsdp2_straggler_named_with_rank_module_and_wait(fsdp2):
    check_fsdp2(fsdp2)


@pytest.mark.parametrize("which", ["ddp", "fsdp2"])
def test_the_ranks_of_one_host_share_the_cupti_clock(which, request):
    # GIVEN both ranks' manifests with their events' CUPTI origin on one host
    path = request.getfixturevalue(which)
    a = ranks_report(read_ranks(path)).collectives
    # THEN the host clock was kept: each collective's ends on the two ranks agree
    assert isinstance(a, Alignment) and (a.clock, a.clock_reason) == ("host", "recorded"), a
    assert max(c.end_spread_ns for c in a.collectives) < 20_000


def test_the_straggler_in_words(ddp):
    from rich.console import Console

    from graphscope.render.ranks import markdown, terminal

    s = ranks_report(read_ranks(ddp))
    con = Console(width=120, record=True, file=open(os.devnull, "w"))
    con.print(terminal(s))
    text = " ".join(con.export_text().split())
    assert "rank 1 is late to bucket" in text and "most in L.transformer.h.0.mlp (forward" \
        in text, text[-3000:]
    assert "- rank 1 is late to bucket" in markdown(s)


def test_fsdp2_program_under_graphscope_run(tmp_path):
    """A program that captures its own FSDP2 step (bench/probes/probe_fsdp2_capture.py: two
    Linear layers and the root sharded), profiled by `graphscope run` on each rank."""
    import torch

    from graphscope.model.ranks import torchrun_env

    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs (nvidia-h200-x2); this machine has "
                    f"{torch.cuda.device_count()}")
    out = tmp_path / "fsdp2.run"
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node=2", "-m", "graphscope", "run", "-o", str(out),
                        os.path.join(ROOT, "bench", "probes", "probe_fsdp2_capture.py")],
                       cwd=ROOT, env=torchrun_env(), capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    for _, b in read_ranks(str(out)):
        comm = [n for n in b.work if is_collective(n)]
        assert comm and all(n.module == FSDP_SCOPE for n in comm), \
            [(n.short_name, n.module) for n in comm]
        assert {n.annotation.get("fsdp_module") for n in comm} == {"L", "L.0", "L.2"}
        fsdp_ops = [n for n in b.work if (n.op or "").startswith("fsdp::")]
        assert fsdp_ops and all(n.module == FSDP_SCOPE for n in fsdp_ops), \
            [(n.op, n.module) for n in fsdp_ops if n.module != FSDP_SCOPE]
