"""FSDP2's collectives in ``(fsdp)`` scopes (annotate/fsdp.py), on torch's real FSDP2 code:
one CPU rank (gloo), so that the parameter groups' unshard, copy-out and post-backward run
as they do on GPUs, minus the collectives' kernels."""

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from graphscope import native  # noqa: E402
from graphscope.annotate import TABLES  # noqa: E402
from graphscope.annotate.fsdp import FSDPWatch, fsdp_modules, served  # noqa: E402
from graphscope.annotate.session import CountedSession  # noqa: E402


class _Ops(TorchDispatchMode):
    """Each op with the scope open on its thread when it ran."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append((str(func), native.current_scope()))
        return func(*args, **(kwargs or {}))


@pytest.fixture
def one_rank():
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


def _model(mesh):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    for sub in (m[0], m[2]):
        fully_shard(sub, mesh=mesh)
    fully_shard(m, mesh=mesh)
    return m


def _scoped(seen):
    """(fsdp_module, fsdp_op, phase, prefetch) of every op run inside an (fsdp) scope."""
    out = set()
    for _, sid in seen:
        a = TABLES.scopes.annotation(sid) if sid >= 0 else {}
        if a.get("module_name") == "(fsdp)":
            out.add((a["fsdp_module"], a["fsdp_op"], a["autograd_phase"], a["fsdp_prefetch"]))
    return out


def test_fsdp2_groups_run_inside_fsdp_scopes(one_rank):
    # GIVEN a model whose two Linear layers FSDP2 shards, warmed up once (lazy init)
    m = _model(one_rank)
    x = torch.randn(2, 8)
    m(x).sum().backward()
    assert len(fsdp_modules(m)) == 3
    # WHEN a step runs with the watch armed while a capture window is open
    native.open_session(CountedSession())
    watch = FSDPWatch().arm()
    try:
        with _Ops() as ops:
            m(x).sum().backward()
    finally:
        watch.remove()
        native.close_session()
    # THEN each layer's copy-out ran in its all-gather's scope, forward and backward, the
    # first layer's backward all-gather as a prefetch, and each gradient in a reduce-scatter
    got = _scoped(ops.seen)
    assert ("L.0", "all_gather", "forward", False) in got
    assert ("L.2", "all_gather", "forward", False) in got
    assert ("L.2", "all_gather", "backward", False) in got
    assert ("L.0", "all_gather", "backward", True) in got
    assert {("L.0", "reduce_scatter", "backward", False),
            ("L.2", "reduce_scatter", "backward", False)} <= got
    # the layers' own math stays outside
    assert all(sid < 0 for op, sid in ops.seen if "addmm" in op)
    assert native.current_scope() == -1


def test_outside_a_capture_window_the_watch_changes_nothing(one_rank):
    # GIVEN the watch armed but no capture window open
    m = _model(one_rank)
    x = torch.randn(2, 8)
    m(x).sum().backward()
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    real = FSDPParamGroup.__dict__["unshard"]
    watch = FSDPWatch().arm()
    try:
        assert FSDPParamGroup.__dict__["unshard"] is not real
        # WHEN a step runs
        with _Ops() as ops:
            m(x).sum().backward()
    finally:
        watch.remove()
    # THEN no op ran in a scope, and torch's methods are back
    assert all(sid < 0 for _, sid in ops.seen)
    assert FSDPParamGroup.__dict__["unshard"] is real
    assert isinstance(FSDPParamGroup.__dict__["_prefetch_unshard"], staticmethod)


def test_served_names_follow_graphscope_module_paths():
    assert served("") == "L"
    assert served("transformer.h.0") == "L.transformer.h.0"
    assert served("a, b.c") == "L.a, L.b.c"
