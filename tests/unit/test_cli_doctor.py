"""doctor and the other `graphscope` on PyPI: Alibaba's GraphScope (`graphscope`,
`graphscope-client`) installs a `graphscope` package too, so the two overwrite each other's
files; doctor names it, with its version and what to do."""

import json
import os
import subprocess
import sys

import pytest

from graphscope.capture.capabilities import other_graphscope
from graphscope.cli.main import main
from tests.conftest import ROOT


def _fake_dist(where, name, version, files=("graphscope/__init__.py",), entry_points=""):
    """An installed distribution's metadata (no code) in ``where``, as pip leaves it."""
    info = where / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    record = [*files, f"{info.name}/METADATA"]
    if entry_points:
        (info / "entry_points.txt").write_text(entry_points)
        record.append(f"{info.name}/entry_points.txt")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in record))
    return str(where)


@pytest.fixture
def alibaba(tmp_path, monkeypatch):
    """Alibaba's graphscope 0.29.0 and graphscope-client 0.29.0 installed on sys.path."""
    where = tmp_path / "site"
    _fake_dist(where, "graphscope", "0.29.0")
    _fake_dist(where, "graphscope-client", "0.29.0",
               files=("graphscope/client/__init__.py", "graphscope/client/session.py"))
    monkeypatch.syspath_prepend(str(where))
    return str(where)


def test_alibabas_graphscope_is_found_by_its_metadata(alibaba):
    # GIVEN Alibaba's two distributions installed beside this one
    # WHEN the installed distributions are read
    found = other_graphscope()
    # THEN both are named with their versions
    assert found == [("graphscope", "0.29.0"), ("graphscope-client", "0.29.0")]


def test_this_project_under_any_name_and_unrelated_packages_are_not_flagged(tmp_path,
                                                                            monkeypatch):
    # GIVEN an install of this project named `graphscope` (its console script is ours), a
    # `graphscope-flex` that owns no `graphscope` import, and a `graphscope` that owns none
    where = tmp_path / "site"
    _fake_dist(where, "graphscope", "0.1.0", entry_points=(
        "[console_scripts]\ngraphscope = graphscope.cli.main:main\n"))
    _fake_dist(where / "more", "graphscope-flex", "0.29.0", files=("gs_flex/__init__.py",))
    monkeypatch.syspath_prepend(str(where))
    monkeypatch.syspath_prepend(str(where / "more"))
    # WHEN the installed distributions are read
    # THEN none of them is reported
    assert other_graphscope() == []


def test_doctor_says_alibabas_graphscope_is_installed_and_what_to_do(alibaba, capsys):
    # GIVEN Alibaba's GraphScope installed in the same environment
    # WHEN doctor runs
    assert main(["doctor", "--no-subscribe"]) == 0
    out = capsys.readouterr().out
    # THEN one warning line names both distributions, their versions and the fix
    (line,) = [ln for ln in out.splitlines() if ln.startswith("warning:")]
    assert "Alibaba's GraphScope" in line
    assert "graphscope 0.29.0" in line and "graphscope-client 0.29.0" in line
    assert "pip uninstall graphscope graphscope-client" in line
    # AND --json carries the same
    assert main(["doctor", "--no-subscribe", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["other_graphscope"] == [{"name": "graphscope", "version": "0.29.0"},
                                     {"name": "graphscope-client", "version": "0.29.0"}]
    assert d["warnings"] == [line[len("warning: "):]]


def test_doctor_in_a_clean_environment_warns_of_nothing(capsys):
    # GIVEN this environment (no Alibaba's GraphScope in it)
    if other_graphscope():
        pytest.skip("Alibaba's GraphScope is installed here")
    # WHEN doctor runs THEN it prints no warning and its JSON lists none
    assert main(["doctor", "--no-subscribe"]) == 0
    assert "warning:" not in capsys.readouterr().out
    assert main(["doctor", "--no-subscribe", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["other_graphscope"] == [] and d["warnings"] == []


def test_doctor_subprocess_with_alibabas_metadata_on_pythonpath(tmp_path):
    # GIVEN Alibaba's graphscope's metadata first on PYTHONPATH of a fresh interpreter
    where = _fake_dist(tmp_path / "site", "graphscope", "0.29.0")
    env = {**os.environ, "PYTHONPATH": where}
    # WHEN doctor --json runs there
    r = subprocess.run([sys.executable, "-m", "graphscope", "doctor", "--json", "--no-subscribe"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    # THEN it still runs (this project's `graphscope` is the one imported) and names it
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["other_graphscope"] == [{"name": "graphscope",
                                                         "version": "0.29.0"}]
