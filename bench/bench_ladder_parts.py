"""Where ``graphscope run``'s capture overhead goes on bench_ladder.py's 67-bucket ladder: the
same capture loop in one process under one part of the recording at a time, each variant run
7 times in shuffled order (the minimum and the median of its loop times, and per phase of a
capture: entering ``torch.cuda.graph``, the model's forward inside it, leaving it, an explicit
instantiate), then one bucket's eager forward with the native op observer recording ops with
and without source lines and memory ranges. Needs a GPU: ``python bench/bench_ladder_parts.py``.
In-process loops share warm caches; bench_ladder.py's fresh processes are the figure of record.

Variants: ``plain``; ``keep`` (``keep_graph=True`` and an explicit instantiate, as ``run``
makes every graph); ``cupti`` (and the CUPTI recorder subscribed around each capture);
``session`` (and graphscope's annotated-capture session: backward attribution armed, no ops);
``session_ops`` (and per-op records: op, shapes, source, memory ranges; ``_nomem``: without the
ranges); ``watch_bare`` (``graphscope run``'s watch with no op records and no module scopes);
``watch_noops`` (and module scopes); ``watch_full`` (everything ``graphscope run`` records:
ops in the first 2 captures, ``--op-captures 2``); ``watch_allops`` (ops in every capture).
"""

import contextlib
import gc
import json
import os
import random
import statistics
import threading
import time

import torch
from bench_ladder import MODEL  # run as python bench/bench_ladder_parts.py

from graphscope import annotate as ann
from graphscope import native
from graphscope.capture.config import CaptureConfig
from graphscope.capture.run import watch as W
from graphscope.capture.run import watching

_ns: dict = {}
exec(MODEL, _ns)  # the bench's own decoder and inputs
model, tokens, SIZES = _ns["model"], _ns["tokens"], _ns["SIZES"]


def loop(around=contextlib.nullcontext, keep=False):
    pool = torch.cuda.graph_pool_handle()
    graphs = {}
    ph = {"enter": 0.0, "body": 0.0, "exit": 0.0, "inst": 0.0}
    with torch.inference_mode():
        for bs in SIZES:
            model(tokens[:bs])
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        t = time.perf_counter()
        for bs in reversed(SIZES):
            g = torch.cuda.CUDAGraph(keep_graph=keep)
            with around():
                t0 = time.perf_counter()
                with torch.cuda.graph(g, pool=pool):
                    t1 = time.perf_counter()
                    model(tokens[:bs])
                    t2 = time.perf_counter()
                t3 = time.perf_counter()
                if keep:
                    g.instantiate()
                t4 = time.perf_counter()
            ph["enter"] += t1 - t0
            ph["body"] += t2 - t1
            ph["exit"] += t3 - t2
            ph["inst"] += t4 - t3
            graphs[bs] = g
        torch.cuda.synchronize()
        s = time.perf_counter() - t
        graphs[1].replay()  # under the watch: the batch is read here, outside the loop
        torch.cuda.synchronize()
    del graphs
    gc.collect()
    torch.cuda.empty_cache()
    ph["total"] = s
    return ph


@contextlib.contextmanager
def rec():
    with native.recording():
        yield


@contextlib.contextmanager
def sess():
    with ann.session(False):
        yield


@contextlib.contextmanager
def sess_ops():
    with ann.session(True):
        yield


@contextlib.contextmanager
def sess_ops_nomem():
    os.environ["GRAPHSCOPE_MEMORY_RANGES"] = "0"
    try:
        with ann.session(True):
            yield
    finally:
        del os.environ["GRAPHSCOPE_MEMORY_RANGES"]


def under_watch(record_ops, hooks, op_captures=2):
    real = W.module_hooks
    if not hooks:
        W.module_hooks = lambda *a, **k: []
    try:
        with watching(CaptureConfig(mode="run", replays=0, record_ops=record_ops,
                                    op_captures=op_captures)):
            return loop()
    finally:
        W.module_hooks = real


def eager(n=30):
    with torch.inference_mode():
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            model(tokens[:64])
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def main():
    native.ensure_loaded()
    variants = {
        "plain": lambda: loop(),
        "keep": lambda: loop(keep=True),
        "cupti": lambda: loop(rec, keep=True),
        "session": lambda: loop(sess, keep=True),
        "session_ops": lambda: loop(sess_ops, keep=True),
        "session_ops_nomem": lambda: loop(sess_ops_nomem, keep=True),
        "watch_bare": lambda: under_watch(False, False),
        "watch_noops": lambda: under_watch(False, True),
        "watch_full": lambda: under_watch(True, True),
        "watch_allops": lambda: under_watch(True, True, 0),
    }
    res = {k: [] for k in variants}
    loop()
    random.seed(1)
    for _ in range(7):
        ks = list(variants)
        random.shuffle(ks)
        for k in ks:
            res[k].append(variants[k]())
    out = {}
    for k, v in res.items():
        out[k] = {p: round(min(x[p] for x in v), 4) for p in v[0]}
        out[k]["med_total"] = round(statistics.median(x["total"] for x in v), 4)
    for k in out:
        out[k]["ratio_min"] = round(out[k]["total"] / out["plain"]["total"], 3)
        out[k]["ratio_med"] = round(out[k]["med_total"] / out["plain"]["med_total"], 3)
    for k, v in out.items():
        print("P5", k, json.dumps(v))
    # the op observer's cost on eager work: one bucket's forward, no capture
    obs = native.op_observer()
    ext = native.extension()
    for label, kw in [("none", None), ("ops", dict(record_source=False, record_memory=False)),
                      ("ops+src", dict(record_source=True, record_memory=False)),
                      ("ops+mem", dict(record_source=False, record_memory=True)),
                      ("ops+src+mem", dict(record_source=True, record_memory=True))]:
        ts = []
        for _ in range(5):
            if kw:
                obs.enable(ext.set_op_address(), threading.get_ident(),
                           [os.path.dirname(torch.__file__)], record_ops=True, backward=False,
                           **kw)
            try:
                ts.append(eager())
            finally:
                if kw:
                    obs.disable()
        print("EAGER", label, round(min(ts), 1), "us/forward")


if __name__ == "__main__":
    main()
