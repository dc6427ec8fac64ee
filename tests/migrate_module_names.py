"""One-off migration of the committed `graphscope run` fixtures (tests/data/run_*) to the one
module-naming rule (docs/architecture.md, "Module names"): the model's root is ``L`` and a further
outermost module called in the same capture is ``(<class>)``. Before, ``graphscope run`` named
roots by their class (``Decoder.blocks.0``). Rewrites ``module_name`` and ``fused_modules`` in
graph.json, annotations.json and annotations.pkl alike; run tests/refresh_summaries.py after.

Kept in tests/ so the migration can be read and re-checked (running it twice changes nothing).
"""

import json
import os
import pickle
import sys
from typing import Any

from graphscope.model.bundle_files import dumps

# fixture -> {old root name: new root name}: the model first called in each capture is ``L``
RENAMES = {
    "run_decode": {"Decoder": "L"},
    "run_compiled": {"Net": "L"},
    "run_partial_network": {"Linear": "L"},
    "run_profiled": {"Sequential": "L"},
    "run_train_step_amp": {"Sequential": "L", "CrossEntropyLoss": "(CrossEntropyLoss)"},
    "run_whole_network": {"Sequential": "L", "MSELoss": "(MSELoss)"},
}


def rename(name: str, roots: dict[str, str]) -> str:
    for old, new in roots.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return name


def rename_annotation(a: dict[str, Any], roots: dict[str, str]) -> dict[str, Any]:
    out = dict(a)
    if isinstance(out.get("module_name"), str):
        out["module_name"] = rename(out["module_name"], roots)
    if isinstance(out.get("fused_modules"), list):
        out["fused_modules"] = [rename(m, roots) for m in out["fused_modules"]]
    return out


def migrate(path: str, roots: dict[str, str]) -> None:
    gpath = os.path.join(path, "graph.json")
    with open(gpath, encoding="utf-8") as f:
        graph = json.load(f)
    for g in graph["graphs"]:
        for n in g["nodes"]:
            if n.get("annotation"):
                n["annotation"] = rename_annotation(n["annotation"], roots)
    with open(gpath, "w", encoding="utf-8") as f:
        f.write(dumps(graph, compact=True))
    apath = os.path.join(path, "annotations.json")
    with open(apath, encoding="utf-8") as f:
        anns = json.load(f)
    anns["annotations"] = {k: [rename_annotation(a, roots) for a in v]
                           for k, v in anns["annotations"].items()}
    with open(apath, "w", encoding="utf-8") as f:
        f.write(dumps(anns, compact=True))
    ppath = os.path.join(path, "annotations.pkl")
    with open(ppath, "rb") as f:
        amap = pickle.load(f)
    amap = {k: [rename_annotation(a, roots) for a in v] for k, v in amap.items()}
    with open(ppath, "wb") as f:
        pickle.dump(amap, f, protocol=4)
    print("migrated", path)


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "data")
    for name, roots in RENAMES.items():
        migrate(os.path.join(root, name), roots)
