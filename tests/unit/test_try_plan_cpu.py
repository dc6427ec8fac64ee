"""capture --try-streams's plan on real op sequences, on CPU tensors: the dispatch mode of
graphscope/capture/streams.py run over forward, backward and optimizer steps with
``device_type="cpu"`` (it plans without streams and logs each op). Every dependency between
two ops (read after write, write after read or write of one storage) must be ordered by the
plan: on one stream, or through the waits, transitively."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from graphscope.capture.streams import op_access, plan_mode  # noqa: E402


def _ordered_before(log):
    """For each op: {stream: the latest op of that stream known to finish before it starts}
    (program order on a stream, the waits, transitively)."""
    known: list[dict[int, int]] = []
    last_on: dict[int, int] = {}
    for i, (_, s, waits, *_rest) in enumerate(log):
        k: dict[int, int] = {}
        sources = ([last_on[s]] if s in last_on else []) + list(waits)
        for p in sources:
            for t, q in known[p].items():
                k[t] = max(k.get(t, -1), q)
            ps = log[p][1]
            k[ps] = max(k.get(ps, -1), p)
        known.append(k)
        last_on[s] = i
    return known


def unordered_dependencies(log):
    """(earlier op, later op, storage) for every dependency the plan leaves unordered."""
    known = _ordered_before(log)
    writer: dict[int, int] = {}
    readers: dict[int, set[int]] = {}
    bad = []
    for j, (_, s, _w, reads, writes, outs) in enumerate(log):
        deps = [(writer[k], k) for k in (*reads, *writes) if k in writer]
        deps += [(r, k) for k in writes for r in readers.get(k, ())]
        for i, k in deps:
            si = log[i][1]
            if si != s and known[j].get(si, -1) < i:
                bad.append((i, j, k))
        for k in reads:
            readers.setdefault(k, set()).add(j)
        for k in (*writes, *outs):
            writer[k] = j
            readers[k] = set()
    return bad


class TwoBranch(nn.Module):
    def __init__(self, d=16, depth=3):
        super().__init__()
        mk = lambda: nn.Sequential(*[nn.Sequential(nn.Linear(d, d), nn.ReLU())  # noqa: E731
                                     for _ in range(depth)])
        self.left, self.right = mk(), mk()

    def forward(self, x):
        return self.left(x) + self.right(x)


def _step(model, opt, x):
    for p in model.parameters():
        p.grad = None
    out = model(x)
    loss = out.float().pow(2).mean()
    loss.backward()
    if opt is not None:
        opt.step()
    return out, loss


def test_forward_backward_and_optimizer_of_two_branches_plan_over_two_streams_safely():
    # GIVEN two independent branches trained with Adam (foreach: one op over every tensor)
    torch.manual_seed(0)
    model = TwoBranch()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    x = torch.randn(8, 16)
    # WHEN a whole step runs under a plan of 4 streams
    mode = plan_mode(4, device_type="cpu")
    with mode:
        _step(model, opt, x)
    log = mode.core.log
    names = [op for op, *_ in log]
    # THEN backward ops were planned (autograd runs them with the caller's dispatch modes)
    assert any("threshold_backward" in n for n in names), names
    assert any("_foreach" in n or "_fused_adam" in n for n in names), names
    # AND the two branches' forward took two streams, and their backward two
    seed = next(i for i, n in enumerate(names) if "ones_like" in n)  # the gradient seed
    assert len({s for _, s, *_ in log[:seed]}) == 2
    relu_bwd = [s for op, s, *_ in log if "threshold_backward" in op]
    assert len(relu_bwd) == 6 and len(set(relu_bwd[:3])) == 1 and len(set(relu_bwd[3:])) == 1
    assert relu_bwd[0] != relu_bwd[3]
    # AND every dependency between ops on different streams is ordered by a wait
    assert unordered_dependencies(log) == []
    # AND the parameters and the optimizer state the step wrote in place are external
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    assert params <= set(mode.core.external)


def test_the_plan_computes_what_the_model_computes():
    # GIVEN the same model and data, one step eagerly and one under the plan
    torch.manual_seed(0)
    a = TwoBranch()
    b = TwoBranch()
    b.load_state_dict(a.state_dict())
    x = torch.randn(8, 16)
    out_a, loss_a = _step(a, None, x)
    with plan_mode(3, device_type="cpu"):
        out_b, loss_b = _step(b, None, x)
    # THEN outputs and gradients are bitwise equal
    assert torch.equal(out_a, out_b) and torch.equal(loss_a, loss_b)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa.grad, pb.grad)


def test_a_sequential_step_stays_on_one_stream():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(4)])
    mode = plan_mode(4, device_type="cpu")
    with mode:
        _step(model, torch.optim.SGD(model.parameters(), lr=0.1, foreach=True),
              torch.randn(2, 8))
    # the forward chain is one stream; a parameter's gradient branch may fork, joined safely
    fwd = [s for op, s, *_ in mode.core.log if "addmm" in op]
    assert set(fwd) == {0}
    assert unordered_dependencies(mode.core.log) == []


def test_the_checker_finds_a_missing_wait():
    # op 0 writes storage 1 on stream 0; op 1 reads it on stream 1 without waiting
    log = [("a", 0, [], [], [], [1]), ("b", 1, [], [1], [], [2])]
    assert unordered_dependencies(log) == [(0, 1, 1)]
    log[1] = ("b", 1, [0], [1], [], [2])
    assert unordered_dependencies(log) == []


def test_op_access_reads_writes_and_views():
    x = torch.randn(4, 4)
    y = torch.randn(4, 4)
    key = lambda t: t.untyped_storage().data_ptr()  # noqa: E731
    acc = op_access(torch.ops.aten.add_.Tensor, (x, y), {}, "cpu")
    assert acc.writes == [key(x)] and acc.reads == [key(y)] and not acc.maybe_view
    acc = op_access(torch.ops.aten.view.default, (x, [16]), {}, "cpu")
    assert acc.reads == [key(x)] and acc.maybe_view
    # a factory op on the device is planned; one elsewhere is not
    assert op_access(torch.ops.aten.empty.memory_format, ([2],), {"device": "cpu"}, "cpu")
    assert op_access(torch.ops.aten.empty.memory_format, ([2],), {"device": "meta"},
                     "cpu") is None
    # tensors on another device are not the plan's
    assert op_access(torch.ops.aten.add.Tensor, (x, y), {}, "cuda") is None


def test_batch_norm_running_statistics_are_written_in_place():
    # GIVEN BatchNorm layers in training mode: native_batch_norm's schema does not mark
    # running_mean and running_var as written, yet the op updates them in place
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4))
    mode = plan_mode(4, device_type="cpu")
    with mode:
        model(torch.randn(2, 3, 8, 8)).sum().backward()
    # THEN every buffer (running mean, running variance, batches tracked) is external state,
    # the state a --try-streams step puts back and compares
    buffers = {b.untyped_storage().data_ptr() for b in model.buffers()}
    assert len(buffers) == 6 and buffers <= set(mode.core.external)
    # AND the plan orders every op that reads or writes them
    assert unordered_dependencies(mode.core.log) == []


def test_batch_norm_in_eval_mode_only_reads_its_statistics():
    bn = nn.BatchNorm2d(4).eval()
    mode = plan_mode(2, device_type="cpu")
    with mode:
        bn(torch.randn(2, 4, 5, 5))
    assert mode.core.external == {}
