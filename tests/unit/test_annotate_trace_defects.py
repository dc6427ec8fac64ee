"""annotate-trace on issue 29's defect 5 (a low match is a wrong answer; the output's mode)
and its hostile inputs: each ends in one line, a non-zero exit and nothing written, or in a
correct result."""

from __future__ import annotations

import os
import stat

import pytest

from graphscope.cli.main import main
from tests.unit.test_annotate_trace import _trace, _write


def _run(capsys, *args):
    capsys.readouterr()
    rc = main(["annotate-trace", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("umask", [0o022, 0o027])
@pytest.mark.parametrize("name", ["o.json", "o.json.gz"])
def test_output_mode_follows_the_umask_like_every_output(tmp_path, capsys, umask, name):
    """GIVEN a umask WHEN annotate-trace writes (new, and replacing a 0600 file with --force)
    THEN the file has 0666 less the umask, as every other graphscope output (not mkstemp's
    0600)."""
    tp, ap = _write(tmp_path, *_trace(n_nodes=8, replays=1))
    out = tmp_path / name
    old = os.umask(umask)
    try:
        assert _run(capsys, tp, "-a", ap, "-o", str(out))[0] == 0
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o666 & ~umask
        os.chmod(out, 0o600)
        assert _run(capsys, tp, "-a", ap, "-o", str(out), "--force")[0] == 0
        assert stat.S_IMODE(os.stat(out).st_mode) == 0o666 & ~umask
    finally:
        os.umask(old)
