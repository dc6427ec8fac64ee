"""Rewrite each fixture's summary.json from its own nodes and timings (CPU, no GPU needed):
run after the summary's shape changes, so fixtures stay what `capture` would write now."""

import os
import sys

from graphscope.analysis.summary import summarize
from graphscope.model.bundle_io import (
    SCHEMA_VERSION,
    SUMMARY_KEY,
    content_digest,
    dumps,
    read_bundle,
)


def main(root: str) -> None:
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not os.path.isfile(os.path.join(path, "summary.json")):
            if os.path.isdir(path) and any(
                    d.startswith("rank") or os.path.isfile(os.path.join(path, d, "summary.json"))
                    for d in os.listdir(path)):
                main(path)  # a multi-rank bundle (each rank) or a folder of bundles
            continue
        s = {**summarize(read_bundle(path)), SUMMARY_KEY: content_digest(path)}
        with open(os.path.join(path, "summary.json"), "w", encoding="utf-8") as f:
            f.write(dumps({"schema_version": SCHEMA_VERSION, **s}))
        print("refreshed", path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "data"))
