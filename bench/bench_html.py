"""The HTML report of a synthetic 100,000-node bundle: page size, write time and
peak RSS, and in headless Chromium the time to a drawn page and the worst timeline frame while
panning (measured in the page by its self-check, performance.now()).

Usage: bench_html.py OUT.json [--nodes 100000]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile

from _measure import measure
from bench_dot_report import ROOT, make_bundle


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--nodes", type=int, default=100_000)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="gs-html-bench-")
    bundle = os.path.join(tmp, "big")
    make_bundle(bundle, a.nodes, 4, events=1)
    page = os.path.join(tmp, "big.html")
    cli = os.path.join(ROOT, "graphscope", "__main__.py")
    res = {"bench": "html", "nodes": a.nodes, "cpus": os.cpu_count(),
           "write": measure([cli, "report", bundle, "--html", page, "--force"])}
    res["page_bytes"] = os.path.getsize(page)
    res["bytes_per_node"] = res["page_bytes"] / a.nodes
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium:
        dom = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={tmp}/profile", "--window-size=1400,900",
             "--virtual-time-budget=60000", "--dump-dom", "file://" + page + "#selftest"],
            capture_output=True, text=True, timeout=600)
        m = re.search(r'<div id="status"[^>]*>', dom.stdout)
        attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', m.group(0) if m else ""))
        selftest = attrs.get("selftest", "{}").replace("&quot;", '"')
        res["chromium"] = {"state": attrs.get("state"),
                           "ready_ms": float(attrs.get("ready-ms", "nan")),
                           "selftest": json.loads(selftest)}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
