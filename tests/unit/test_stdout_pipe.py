"""A reader that closes stdout in the middle of a document: the command ends with 141 (the
shell's code for SIGPIPE), never 0 with the document cut short, whether stdout is buffered or
not (``PYTHONUNBUFFERED=1``, ``python -u``: set in many container images)."""

import fcntl
import os
import subprocess
import sys

import pytest

from tests.conftest import DATA, ROOT

PIPE_BYTES = 4096  # every document below is larger: the writer is mid-write when the reader goes


def _read_one_byte_then_close(args, unbuffered):
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    p = subprocess.Popen([sys.executable, "-m", "graphscope", *args], stdout=w,
                         stderr=subprocess.PIPE, cwd=ROOT, env=env)
    os.close(w)
    first = os.read(r, 1)  # the command is writing now: its document does not fit the pipe
    os.close(r)
    err = p.stderr.read().decode()
    p.wait(timeout=120)
    return p.returncode, first, err


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize("args", [
    ("report", os.path.join(DATA, "mlp_step"), "--json"),
    ("report", os.path.join(DATA, "mlp_step"), "--html", "-"),
    ("dump", os.path.join(DATA, "mlp_step"), "--trace", "-o", "-"),
    ("report", os.path.join(DATA, "mlp_step")),
], ids=["report-json", "report-html", "dump-trace", "report-tables"])
def test_a_reader_gone_mid_document_ends_the_command_with_141(args, unbuffered):
    # GIVEN a document larger than the pipe, WHEN the reader takes one byte and closes it
    rc, first, err = _read_one_byte_then_close(args, unbuffered)
    # THEN the command says so with the shell's SIGPIPE code, and prints nothing about it
    assert first, err
    assert rc == 141, (rc, err)
    assert err == ""


def test_an_unbuffered_stdout_still_gets_the_whole_document():
    # GIVEN PYTHONUNBUFFERED=1, WHEN the reader reads everything
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    p = subprocess.run([sys.executable, "-m", "graphscope", "report",
                        os.path.join(DATA, "run_ladder"), "--html", "-"],
                       capture_output=True, cwd=ROOT, env=env, timeout=120, check=False)
    buffered = subprocess.run([sys.executable, "-m", "graphscope", "report",
                               os.path.join(DATA, "run_ladder"), "--html", "-"],
                              capture_output=True, cwd=ROOT, timeout=120, check=False,
                              env={k: v for k, v in os.environ.items()
                                   if k != "PYTHONUNBUFFERED"})
    # THEN it is the same page, byte for byte, as a buffered stdout gets
    assert p.returncode == buffered.returncode == 0, p.stderr
    assert p.stdout == buffered.stdout and p.stdout.rstrip().endswith(b"</html>")
