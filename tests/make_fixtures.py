"""Record the CPU tests' fixture bundles on a GPU box: `make fixtures`.

Each sample model is captured with few replays so the bundles stay small; versions go into each
bundle's manifest.
"""

import os
import sys

from graphscope.capture import run_capture
from graphscope.config import CaptureConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data")

SCENARIOS = [
    ("mlp_step", "mlp.py", "step", True),
    ("mlp_callables", "mlp.py", "callables", True),
    ("cnn_step", "cnn.py", "step", True),
    ("gpt_step", "gpt.py", "step", True),
    ("marked_step", "marked.py", "step", True),
    ("sidestream_step", "sidestream.py", "step", True),
    ("mlp_annotate", "mlp.py", "step", False),
]

for name, model, mode, timing in SCENARIOS:
    cfg = CaptureConfig(model=os.path.join(ROOT, "sample_models", model), mode=mode, replays=4,
                        keep_events=2, output=os.path.join(OUT, name), force=True).validate()
    res = run_capture(cfg, timing=timing, command="capture" if timing else "annotate",
                      argv=["graphscope", "capture" if timing else "annotate",
                            f"sample_models/{model}", "--mode", mode])
    print(name, res.bundle_path, res.summary["work_nodes"], "work nodes",
          res.join.unjoined_records if res.join else "-", "unjoined", flush=True)
