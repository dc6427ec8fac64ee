"""On the GPU: graphs a program captures into one memory pool are recorded
with the pool's id, and `report` shows that pool once, not once per graph."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.gpu

PROGRAM = textwrap.dedent('''
    import torch

    x = torch.randn(256, 256, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            (x @ x).relu()
    torch.cuda.current_stream().wait_stream(s)
    pool = torch.cuda.graph_pool_handle()
    graphs = []
    for k in range(3):  # three graphs, one pool
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            y = (x @ x).relu() * (k + 1)
        graphs.append(g)
    private = torch.cuda.CUDAGraph()  # and one of its own
    with torch.cuda.graph(private):
        z = x @ x + 1
    for _ in range(5):
        for g in graphs + [private]:
            g.replay()
    torch.cuda.synchronize()
    print("done")
''')


def test_graphs_of_one_pool_show_it_once(tmp_path):
    prog = tmp_path / "shared_pool.py"
    prog.write_text(PROGRAM)
    out = tmp_path / "b"
    p = subprocess.run([sys.executable, "-m", "graphscope", "run", "-o", str(out), str(prog)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0 and "done" in p.stdout, p.stderr
    graphs = json.loads((out / "graph.json").read_text())["graphs"]
    assert len(graphs) == 4
    pools = [tuple(g["info"]["pool_id"]) for g in graphs]
    assert pools[0] == pools[1] == pools[2] != pools[3]
    r = subprocess.run([sys.executable, "-m", "graphscope", "report", str(out), "--json"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "COLUMNS": "200"})
    rows = json.loads(r.stdout)["graphs"]
    shared = [g.get("pool_shared") for g in rows]
    assert [s["first"] for s in shared[:3]] == [True, False, False] and shared[3] is None
    assert shared[0]["graphs"] == 3
    t = subprocess.run([sys.executable, "-m", "graphscope", "report", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "COLUMNS": "200"})
    assert t.stdout.count("shared pool 1") == 3 and "(3 graphs)" in t.stdout, t.stdout
