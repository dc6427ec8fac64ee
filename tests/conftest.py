import os
import sys

import pytest

# No test depends on the terminal it is run from: rich and graphscope read these to choose
# a width and colours, so they are cleared once; a test that wants a width sets COLUMNS itself.
for _var in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
    os.environ.pop(_var, None)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
SAMPLES = os.path.join(ROOT, "sample_models")

_CAPS = None


def fixture_bundles() -> list[str]:
    """Every recorded bundle under tests/data, each rank of a multi-rank one separately, and
    the bundles of a folder of them (tests/data/demo)."""
    out = []
    for name in sorted(os.listdir(DATA)):
        p = os.path.join(DATA, name)
        if os.path.isfile(os.path.join(p, "manifest.json")):
            out.append(p)
        elif os.path.isdir(p):  # each rank of a multi-rank bundle, or a folder of bundles
            out += [os.path.join(p, r) for r in sorted(os.listdir(p))
                    if r.startswith("rank") or os.path.isfile(os.path.join(p, r, "manifest.json"))]
    return out


def _caps():
    global _CAPS
    if _CAPS is None:
        from graphscope.capture.capabilities import probe

        _CAPS = probe(try_subscribe=True)
    return _CAPS


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    caps = _caps()
    if caps.can_capture:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU with CUPTI: {caps.reason}")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def samples():
    return SAMPLES


@pytest.fixture
def data_dir():
    return DATA


def run_py(code: str, timeout: int = 300):
    """Run code in a fresh interpreter (CUPTI state is per process)."""
    import subprocess

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)
