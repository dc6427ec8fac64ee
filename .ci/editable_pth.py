"""Keep only `graphscope` importable from an editable install.

scikit-build-core's editable .pth adds the directory above each package to sys.path: for
this flat layout, the checkout root, so `import tests`, `import bench` and `import
sample_models` would work from any directory. Its redirect finder (the .pth's `import` line)
maps graphscope's modules and package directories by itself, so the path line goes.
Run by `make install` / `make build-ext` after `pip install -e`.
"""

import glob
import os
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

for pth in glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "_editable_skbc_*.pth")):
    with open(pth, encoding="utf-8") as f:
        lines = f.read().splitlines()
    keep = [ln for ln in lines if os.path.realpath(ln.strip()) != os.path.realpath(ROOT)
            or ln.startswith("import ")]
    if keep != lines:
        with open(pth, "w", encoding="utf-8") as f:
            f.write("\n".join(keep) + "\n")
