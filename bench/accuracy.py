"""Attribution accuracy against eager ground truth. Needs a GPU.

For each sample model, in fresh processes:
  eager   one training step under torch.profiler, with a record_function range per module
          (global module hooks) and one around the loss; each kernel is credited to the
          innermost module range around the op that launched it (forward), or - for ops run by
          an autograd node "evaluate_function: XBackward" - to the module of the forward op with
          that node's sequence number (backward).
  capture graphscope's annotated capture of the same step (step mode); each kernel node is
          credited to its innermost module_name and autograd_phase.
Reports coverage (% of kernel nodes with a module, forward and backward) and agreement (% of
(module, phase) rows whose kernel counts match). Usage: accuracy.py [OUT.json] [MODEL ...]
"""

import json
import os
import subprocess
import sys
from collections import Counter

from _measure import write_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["mlp", "cnn", "gpt", "marked", "sidestream"]
SKIP = ("Memcpy", "Memset")


def eager_counts(name):
    import torch
    from torch.profiler import ProfilerActivity, profile

    from graphscope.annotate import module_fqn
    from graphscope.capture import default_loss
    from graphscope.capture import to_cuda as _to_cuda
    from graphscope.capture.loader import load_model_file
    from graphscope.capture.step import zero_grad as _zero_grad

    spec = load_model_file(os.path.join(ROOT, "sample_models", f"{name}.py"))
    model, args = spec.model.cuda(), _to_cuda(spec.args)
    loss_fn = spec.loss or default_loss
    names = {m: module_fqn(p) for p, m in model.named_modules()}
    stack = []

    def pre(m, a):
        if m in names:
            rf = torch.autograd.profiler.record_function("module::" + names[m])
            rf.__enter__()
            stack.append(rf)

    def post(m, a, o):
        if m in names:
            stack.pop().__exit__(None, None, None)

    from torch.nn.modules import module as mm

    hs = [mm.register_module_forward_pre_hook(pre), mm.register_module_forward_hook(post)]
    for _ in range(3):
        _zero_grad(model)
        loss_fn(model(*args)).backward()
    torch.cuda.synchronize()
    _zero_grad(model)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        out = model(*args)
        with torch.autograd.profiler.record_function("module::(loss)"):
            loss = loss_fn(out)
            loss.backward()
        torch.cuda.synchronize()
    for h in hs:
        h.remove()
    events = list(prof.events())
    by_seq = {}  # (thread, sequence nr) -> forward op: sequence numbers are per thread
    for e in events:
        if e.sequence_nr >= 0 and not e.name.startswith("autograd::engine"):
            by_seq.setdefault((e.thread, e.sequence_nr), e)

    def own_kernels(e):
        """Kernels listed on e but not on any of its descendants (the profiler can list a
        launch on an enclosing event too)."""
        own = Counter((k.name, k.duration) for k in getattr(e, "kernels", []))
        stack = list(e.cpu_children)
        while stack and own:
            c = stack.pop()
            own -= Counter((k.name, k.duration) for k in getattr(c, "kernels", []))
            stack.extend(c.cpu_children)
        return [name for (name, _), n in own.items() for _ in range(n)]

    def module_of(e):
        while e is not None:
            if e.name.startswith("module::"):
                return e.name[8:]
            e = e.cpu_parent
        return "(unattributed)"

    counts = Counter()
    names = {}
    for e in events:
        kernels = [k for k in own_kernels(e) if not k.startswith(SKIP)]
        if not kernels:
            continue
        node, module = e, None
        while node is not None and not node.name.startswith("autograd::engine::evaluate_function"):
            if module is None and node.name.startswith("module::"):
                module = node.name[8:]  # innermost module range (checkpoint recompute too)
            node = node.cpu_parent
        if node is None:
            key = (module or "(unattributed)", "forward")
        elif "AccumulateGrad" in node.name:
            continue
        elif module is not None:  # a module's forward re-run inside backward: recompute
            key = (module, "backward")
        else:
            fwd = by_seq.get((getattr(node, "fwd_thread", None) or e.thread, node.sequence_nr))
            key = (module_of(fwd) if fwd else "(unattributed)", "backward")
        counts[key] += len(kernels)
        names.setdefault(key, []).extend(k[:80] for k in kernels)
    return counts, names


def capture_counts(name):
    from graphscope.capture import run_capture
    from graphscope.capture.config import CaptureConfig
    from graphscope.model.graph import NodeKind

    cfg = CaptureConfig(model=os.path.join(ROOT, "sample_models", f"{name}.py"), replays=0,
                        output=f"/tmp/gs-accuracy/{name}", force=True).validate()
    res = run_capture(cfg, timing=False)
    counts = Counter()
    names = {}
    for n in res.bundle.work_nodes():
        if n.type == NodeKind.KERNEL:
            key = (n.module, n.phase if n.annotation else "unknown")
            counts[key] += 1
            names.setdefault(key, []).append((n.demangled or n.kernel or "?")[:80])
    return counts, names


def worker(kind, name):
    c, names = eager_counts(name) if kind == "eager" else capture_counts(name)
    print("RESULT " + json.dumps([[m, p, n, names.get((m, p), [])]
                                  for (m, p), n in sorted(c.items())]), flush=True)


def _run(kind, name):
    r = subprocess.run([sys.executable, __file__, "--worker", kind, name], capture_output=True,
                       text=True, timeout=300)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode != 0 or not line:
        raise SystemExit(f"{kind} {name} failed: {r.stderr[-3000:]}")
    rows = json.loads(line[0][7:])
    return {(m, p): n for m, p, n, _ in rows}, {(m, p): k for m, p, _, k in rows}


def compare(eager_run, cap_run):
    (eager, eager_names), (cap, cap_names) = eager_run, cap_run
    rows = sorted(set(eager) | set(cap))
    agree = [r for r in rows if eager.get(r, 0) == cap.get(r, 0)]
    out = {}
    for phase in ("forward", "backward"):
        total = sum(n for (m, p), n in cap.items() if p == phase)
        tagged = sum(n for (m, p), n in cap.items() if p == phase and m != "(unattributed)")
        out[f"coverage_{phase}_pct"] = 100.0 * tagged / total if total else 100.0
    out["agreement_pct"] = 100.0 * len(agree) / len(rows) if rows else 100.0
    out["rows"] = len(rows)
    out["mismatches"] = [
        {"module": m, "phase": p, "eager": eager.get((m, p), 0), "graphscope": cap.get((m, p), 0),
         "eager_kernels": eager_names.get((m, p), []),
         "graphscope_kernels": cap_names.get((m, p), [])}
        for (m, p) in rows if eager.get((m, p), 0) != cap.get((m, p), 0)
    ]
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1].endswith(".json") else None
    models = [a for a in sys.argv[1:] if not a.endswith(".json")] or MODELS
    result = {}
    for m in models:
        result[m] = compare(_run("eager", m), _run("capture", m))
    write_json(out, {"bench": "accuracy", "models": result})


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
