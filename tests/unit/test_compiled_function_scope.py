"""A function compiled with torch.compile outside any module: its kernels are scoped by the
function's name, ``(scale)``, which its capture site already names, not ``(unattributed)``.
The naming is CPU code (inductor's FX graph and wrapper file are read, nothing runs)."""

import torch

from graphscope.capture.run.names import site_function
from graphscope.capture.run.provenance import Provenance

WRAPPER = (
    "def call(args):\n"
    "    # Topologically Sorted Source Nodes: [mul, add], Original ATen: [aten.mul]\n"
    "    buf0 = empty()\n"
    "    triton_poi_fused_mul_0.run(buf0, stream=s)\n")


def scale(x):
    return x * 2 + 1


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc1(x) * 2


def _wrapper(tmp_path):
    path = tmp_path / "torchinductor_x" / "cabc.py"
    path.parent.mkdir()
    path.write_text(WRAPPER)
    return str(path)


def test_a_function_compiled_outside_any_module_is_its_own_scope(tmp_path):
    # GIVEN inductor's graph of a plain function (no nn_module_stack on any node)
    wrapper = _wrapper(tmp_path)
    p = Provenance()
    p.learn(wrapper, torch.fx.symbolic_trace(scale).graph)
    assert p.by_file[wrapper] == {}
    # WHEN a kernel its wrapper launched is placed, with the graph's capture site
    a = p.place(f"{wrapper}:4 (call)", site="prog.py:12 (scale)")
    # THEN the function is the scope, as a loss function's is (loss)
    assert a == {"module_name": "(scale)", "module_source": "compiled function"}


def test_a_compiled_module_keeps_its_module_paths(tmp_path):
    # GIVEN a module's compilation where inductor knew the module of each source node
    wrapper = _wrapper(tmp_path)
    p = Provenance()
    p.by_file[wrapper] = {"mul": ["fc1"]}
    # THEN its kernels keep the module, site or not; a node of no module says why
    assert p.place(f"{wrapper}:4 (call)", site="prog.py:20 (forward)")["module_name"] == "L.fc1"
    p.by_file[wrapper] = {"other": ["fc1"]}
    a = p.place(f"{wrapper}:4 (call)", site="prog.py:20 (forward)")
    assert a["module_source"] == "none" and "no module" in a["unplaced_reason"]


def test_without_a_site_the_node_stays_unplaced_with_a_reason(tmp_path):
    wrapper = _wrapper(tmp_path)
    p = Provenance()
    p.by_file[wrapper] = {}
    a = p.place(f"{wrapper}:4 (call)")
    assert a["module_source"] == "none" and "unplaced_reason" in a


def test_site_function_reads_the_compiled_sites_name():
    assert site_function("prog.py:12 (scale)") == "scale"
    assert site_function("compiled.py:16 (forward)") == "forward"
    assert site_function("decode.py:71") is None  # an eager capture's site names no function
