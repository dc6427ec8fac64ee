"""A program run by ``graphscope run`` fails as it fails under ``python``: the traceback shows the
program's frames only, none of graphscope's runner or of runpy."""

import os
import subprocess
import sys

import pytest

from graphscope.capture.run.runner import run_program

PROGRAM = "import helper\n\n\ndef main():\n    helper.scale(None)\n\n\nmain()\n"
HELPER = "def scale(x):\n    return x * 2\n"


def _frames(text):
    return [line for line in text.splitlines() if line.startswith("  File ")]


@pytest.fixture
def program(tmp_path, monkeypatch):
    (tmp_path / "boom.py").write_text(PROGRAM)
    (tmp_path / "helper.py").write_text(HELPER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `graphscope run -m` puts the cwd
    yield tmp_path
    sys.modules.pop("helper", None)
    sys.modules.pop("boom", None)


def test_a_failing_script_shows_the_traceback_python_shows(program, capsys):
    # GIVEN a program that fails two calls deep, as `python boom.py` shows it
    py = subprocess.run([sys.executable, "boom.py"], capture_output=True, text=True,
                        cwd=program, check=False)
    assert py.returncode == 1 and _frames(py.stderr)
    # WHEN graphscope's runner runs it
    rc = run_program("boom.py", [])
    err = capsys.readouterr().err
    # THEN the exit code, the frames and the error line are python's
    assert rc == 1
    assert _frames(err) == _frames(py.stderr), err
    assert err.strip().splitlines()[-1] == py.stderr.strip().splitlines()[-1]
    assert "runner.py" not in err and "runpy" not in err


def test_a_failing_module_shows_only_the_programs_frames(program, capsys):
    # GIVEN the same program run as a module (python -m boom)
    rc = run_program("boom", [], module=True)
    err = capsys.readouterr().err
    # THEN its first frame is the module's own line, as with a script
    assert rc == 1
    frames = _frames(err)
    assert frames[0].startswith(f'  File "{os.path.join(program, "boom.py")}", line 8'), err
    assert "runner.py" not in err and "runpy" not in err


def test_a_syntax_error_shows_as_python_shows_it(tmp_path, capsys):
    # GIVEN a program that does not compile
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n    pass\n")
    py = subprocess.run([sys.executable, str(bad)], capture_output=True, text=True, check=False)
    # WHEN the runner runs it, THEN python's lines come out and no frame of graphscope's
    assert run_program(str(bad), []) == 1
    err = capsys.readouterr().err
    assert err == py.stderr, (err, py.stderr)
