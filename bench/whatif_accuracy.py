"""The contention-aware what-if against ``capture --try-streams``: predicted vs measured span on
more streams for graphs with independent work (needs a GPU; the prediction itself is CPU-only).

Each model's inference forward is captured once with ``--try-streams 4``: the bundle holds the
one-stream graph's traced replays (what the what-if reads) and the span of the graph re-captured
over up to 4 streams, traced alternately with the one-stream graph (what it is checked against).
The prediction uses nothing of that measurement; it is rescaled to the alternated one-stream
median (``what_if_measured.predicted_ns``). Models: the branches sample, the side-stream sample
on one stream (and, for reference, as written: on its side stream), a parallel-residual
transformer (GPT-NeoX, transformers), Inception-style CNNs (torchvision GoogLeNet and timm
Inception-v3), and a CNN of parallel convolutions (timm MixNet-S). A model whose library is not
installed is listed as skipped.

Usage: python bench/whatif_accuracy.py OUT.json [--replays N] [--only NAME,...] [--keep DIR]
       python bench/whatif_accuracy.py OUT.json --from DIR
``--keep DIR`` copies each model's bundle to DIR/NAME; ``--from DIR`` predicts again from bundles
kept so (no GPU: after a change to the model, say). Writes OUT.json: one row per model
(predicted, its interval, measured, the error in %, the bound without contention) and the
command, date, GPU and versions. About 3-4 minutes on an H200.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SIDE_ONE_STREAM = """
import sys
sys.path.insert(0, {samples!r})
import torch
from sidestream import TwoTower


class OneStream(TwoTower):
    def forward(self, x):
        return self.left(x) + self.right(x)


def graphscope_model():
    torch.manual_seed(0)
    return OneStream(), (torch.randn(64, 256),)
"""

# name -> (library or None, model file text or a sample path, entry)
MODELS: dict[str, tuple[Optional[str], str]] = {
    "branches": (None, "@branches.py"),
    "sidestream_one_stream": (None, SIDE_ONE_STREAM),
    "gpt_neox_parallel_residual": ("transformers", """
import torch
from transformers import GPTNeoXConfig, GPTNeoXModel


def graphscope_model():
    torch.manual_seed(0)
    cfg = GPTNeoXConfig(num_hidden_layers=4, hidden_size=768, num_attention_heads=12,
                        intermediate_size=3072, use_parallel_residual=True, vocab_size=1000)
    return GPTNeoXModel(cfg).eval(), (torch.randint(0, 1000, (4, 128)),)
"""),
    "googlenet": ("torchvision", """
import torch
import torchvision


def graphscope_model():
    torch.manual_seed(0)
    m = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=False)
    return m.eval(), (torch.randn(8, 3, 224, 224),)
"""),
    "timm_inception_v3": ("timm", """
import timm
import torch


def graphscope_model():
    torch.manual_seed(0)
    return timm.create_model("inception_v3", pretrained=False).eval(), (
        torch.randn(8, 3, 299, 299),)
"""),
    "timm_mixnet_s": ("timm", """
import timm
import torch


def graphscope_model():
    torch.manual_seed(0)
    return timm.create_model("mixnet_s", pretrained=False).eval(), (
        torch.randn(8, 3, 224, 224),)
"""),
}


def _capture(model: str, out: str, replays: int, try_streams: int, timeout: int) -> str:
    cmd = [sys.executable, "-m", "graphscope", "capture", model, "--mode", "forward",
           "--replays", str(replays), "-o", out]
    if try_streams:
        cmd += ["--try-streams", str(try_streams)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"capture failed ({p.returncode}): {p.stderr[-1500:]}")
    return out


def _row(name: str, path: str) -> dict[str, Any]:
    from graphscope.analysis.diagnosis import diagnose
    from graphscope.model.bundle_io import read_bundle

    b = read_bundle(path)
    d = diagnose(b)
    o = d.graphs[0]
    m = o.what_if_measured
    wi = o.what_if
    if m is None or m.error or not m.span_ns or not m.one_stream_ns:
        return {"name": name, "error": getattr(m, "error", None) or "nothing measured"}
    k = m.one_stream_ns / o.span_ns if o.span_ns else 1.0
    # no stream-order-only edge: the model predicts no gain (the one-stream span)
    pred = wi.predicted_span_ns * k if wi else m.one_stream_ns
    low = wi.low_ns * k if wi else m.one_stream_ns
    high = wi.high_ns * k if wi else m.one_stream_ns
    return {
        "name": name, "graph": o.graph, "nodes": o.nodes,
        "stream_order_only_edges": o.stream_order.stream_order_only_edges
        if o.stream_order else None,
        "one_stream_ns": m.one_stream_ns, "measured_ns": m.span_ns,
        "measured_streams": m.streams, "measured_gain_pct": m.gain_pct,
        "predicted_ns": pred, "low_ns": low, "high_ns": high,
        "error_pct": 100.0 * (pred / m.span_ns - 1.0),
        "within_15pct": abs(pred / m.span_ns - 1.0) <= 0.15,
        "within_interval": low <= m.span_ns <= high,
        "predicted_streams": wi.streams if wi else 1,
        "no_contention_ns": wi.no_contention_ns * k if wi else None,
        "calibration": wi.calibration.source if wi else None,
        "outputs_equal": m.outputs_equal, "max_abs_diff": m.max_abs_diff,
        "findings": [(f.kind, round(f.saving_ns), f.action.kind) for f in d.findings.findings],
    }


def _from_kept(a: argparse.Namespace) -> None:
    """The rows again from bundles kept by ``--keep``: the prediction made anew (the model
    may have changed since), the measurement as recorded."""
    rows = []
    for name in sorted(os.listdir(a.source)):
        path = os.path.join(a.source, name)
        if name in MODELS and os.path.isdir(path):
            rows.append(_row(name, path))
            print(json.dumps(rows[-1]), flush=True)
    doc = {"command": " ".join(["python", "bench/whatif_accuracy.py", *sys.argv[1:]]),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "rows": rows}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    print(f"Wrote {a.out}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per capture")
    ap.add_argument("--keep", default="", help="copy each bundle to KEEP/NAME")
    ap.add_argument("--from", dest="source", default="",
                    help="predict from the bundles kept in this directory (no capture)")
    a = ap.parse_args()
    if a.source:
        _from_kept(a)
        return
    only = {x for x in a.only.split(",") if x}
    samples = os.path.join(ROOT, "sample_models")
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for name, (lib, text) in MODELS.items():
            if only and name not in only:
                continue
            if lib is not None:
                try:
                    __import__(lib)
                except ImportError:
                    rows.append({"name": name, "skipped": f"{lib} not installed"})
                    continue
            if text.startswith("@"):
                model = os.path.join(samples, text[1:])
            else:
                model = os.path.join(tmp, f"{name}.py")
                with open(model, "w") as f:
                    f.write(textwrap.dedent(text.format(samples=samples)))
            t = time.monotonic()
            try:
                out = _capture(model, os.path.join(tmp, name), a.replays, 4, a.timeout)
                row = _row(name, out)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                row = {"name": name, "error": str(e)[-1500:]}
            row["capture_s"] = round(time.monotonic() - t, 1)
            if a.keep and "error" not in row:
                shutil.copytree(out, os.path.join(a.keep, name), dirs_exist_ok=True)
            rows.append(row)
            print(json.dumps(row), flush=True)
        if not only or "sidestream" in only:  # the side-stream sample as written, for reference
            try:
                out = _capture(os.path.join(samples, "sidestream.py"),
                               os.path.join(tmp, "sidestream"), a.replays, 0, a.timeout)
                from graphscope.analysis.diagnosis import diagnose
                from graphscope.model.bundle_io import read_bundle

                rows.append({"name": "sidestream_as_written",
                             "span_ns": diagnose(read_bundle(out)).graphs[0].span_ns})
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                rows.append({"name": "sidestream_as_written", "error": str(e)[-1500:]})
    import torch

    doc = {"command": " ".join(["python", "bench/whatif_accuracy.py", *sys.argv[1:]]),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
           "torch": torch.__version__, "total_s": round(time.monotonic() - t0, 1),
           "rows": rows}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    print(f"Wrote {a.out}")


if __name__ == "__main__":
    main()
