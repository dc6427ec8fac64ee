"""The install: only `graphscope` importable from an editable install; the torch that CPU
work pins lies inside the supported range that pyproject states."""

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


def test_editable_install_exposes_only_graphscope(tmp_path):
    code = ("import importlib.util, graphscope, graphscope.cli.main\n"
            "print(*[m for m in ('tests', 'bench', 'sample_models', 'cli', 'csrc')"
            " if importlib.util.find_spec(m) is not None])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path, env={k: v for k, v in os.environ.items()
                                          if k != "PYTHONPATH"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"importable from anywhere: {r.stdout.strip()}"


@pytest.mark.skipif(tomllib is None, reason="tomllib needs Python 3.11")
def test_pinned_torch_is_inside_the_supported_range():
    from packaging.requirements import Requirement
    from packaging.version import Version

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["torch"]
    supported = Requirement(extra[0]).specifier
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        pin = re.search(r"^TORCH_SPEC\s*\?=\s*torch==(\S+)", f.read(), re.M)
    assert pin, "the Makefile pins no torch (TORCH_SPEC ?= torch==X)"
    assert Version(pin.group(1)) in supported, (pin.group(1), str(supported))
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert f"PyTorch{supported}" in readme.replace("≥", ">=").replace(" ", ""), \
        f"README must state the supported range (PyTorch {supported})"
    try:
        import torch
    except ImportError:
        return
    assert Version(torch.__version__.split("+")[0]) in supported, torch.__version__


def test_the_readme_stays_a_first_screen_and_links_the_rest():
    # README: what graphscope is, set-up, the commands a first-time user needs; the rest in docs/
    lines = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail into docs/"
    text = "\n".join(lines)
    for doc in ("docs/cli.md", "docs/model-files.md", "docs/architecture.md",
                "docs/benchmarks.md"):
        assert f"]({doc})" in text, doc


def _distribution_name():
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    m = re.search(r'^\[project\]\n(?:.*\n)*?name\s*=\s*"([^"]+)"', text, re.M)
    assert m, "pyproject.toml's [project] has no name"
    return m.group(1)


def test_the_distribution_is_not_named_as_pypis_graphscope_family():
    # GIVEN the distribution name pyproject.toml gives (PyPI's `graphscope`, `graphscope-client`,
    # `graphscope-flex`, ... are Alibaba's GraphScope, a graph computing system)
    name = _distribution_name()
    # WHEN it is compared with that family, as pip normalizes names
    normalized = re.sub(r"[-_.]+", "-", name).lower()
    # THEN it is none of them: `pip install NAME` installs this project
    assert normalized != "graphscope" and not normalized.startswith("graphscope-"), name


def test_the_install_lines_name_this_distribution_and_keep_the_command():
    # GIVEN the distribution's name and the console script pyproject.toml declares
    name = _distribution_name()
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    assert re.search(r'^graphscope = "graphscope\.cli\.main:main"$', text, re.M)
    # WHEN README's and docs/cli.md's install commands are read
    for doc in ("README.md", "docs/cli.md"):
        body = open(os.path.join(ROOT, doc), encoding="utf-8").read()
        installs = re.findall(r"pip install (?:-\S+ )*\"?([A-Za-z][\w.-]*)(?:\[\w+\])?\"?", body)
        # THEN every install from the index names this distribution, never PyPI's `graphscope`
        assert name in installs, (doc, installs)
        assert "graphscope" not in installs, (doc, installs)
