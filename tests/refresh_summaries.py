"""Rewrite each fixture's summary.json and diagnosis.json from its own nodes and timings (CPU,
no GPU needed): run after the summary's or the diagnosis's shape changes, so fixtures stay what
`capture` would write now."""

import json
import os
import sys

from graphscope.analysis.report import report_diagnosis
from graphscope.analysis.summary import summarize
from graphscope.model.bundle_files import (
    DIAGNOSIS_FILE,
    SCHEMA_VERSION,
    SUMMARY_KEY,
    content_digest,
    diagnosis_text,
    dumps,
)
from graphscope.model.bundle_io import read_bundle


def main(root: str) -> None:
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not os.path.isfile(os.path.join(path, "summary.json")):
            if os.path.isdir(path) and any(
                    d.startswith("rank") or os.path.isfile(os.path.join(path, d, "summary.json"))
                    for d in os.listdir(path)):
                main(path)  # a multi-rank bundle (each rank) or a folder of bundles
            continue
        b = read_bundle(path)
        s = {**summarize(b), SUMMARY_KEY: content_digest(path)}
        with open(os.path.join(path, "summary.json"), "w", encoding="utf-8") as f:
            f.write(dumps({"schema_version": SCHEMA_VERSION, **s}))
        diagnosis = report_diagnosis(b)
        if diagnosis is not None:
            with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
                manifest = json.load(f)
            with open(os.path.join(path, DIAGNOSIS_FILE), "w", encoding="utf-8") as f:
                f.write(diagnosis_text(path, manifest, diagnosis))
        print("refreshed", path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "data"))
