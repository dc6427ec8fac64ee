"""The project speaks of itself: no tracked file cites a tracker number (an issue and its number)
or the history of the work (numbered or ordinal work sessions, who did what), and no file is
named by a work period. Measurements say their date, machine and command instead.

The patterns are tight on purpose: "a torch.profiler session", "round 0", "issue throughput",
"the first capture" and a graph's "#1" are ordinary words here and must not trip the check."""

import os
import re
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_ORDINALS = ("first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|"
             "twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|"
             r"nineteenth|twentieth|\d+(?:st|nd|rd|th)")
LINE_PATTERNS = {
    "tracker number": re.compile(r"\bissues?\s+#?\d+", re.I),
    "numbered work session": re.compile(r"\bsessions?[ _-]?#?\d+\b", re.I),
    "ordinal work session": re.compile(rf"\b(?:{_ORDINALS})\s+(?:(?:work|gpu)\s+)?sessions?\b",
                                       re.I),
    "numbered sprint": re.compile(r"\bsprints?\s*#?\d+\b", re.I),
    "who did the work": re.compile(r"\bthe lead(?:'s)? (?:runs?|ran|reads?|gets?|got|measured|"
                                   r"wrote|built|additions?)\b", re.I),
    "a release named as a stage of the work": re.compile(r"\bthe\s+\d+\.\d+\s+house\b", re.I),
}
# a path component named by a work period or a tracker item: a word of the patterns above and a
# number (results_round2.json)
PATH_PATTERN = re.compile(r"(?:^|[/_.-])(?:session|issue|round|sprint)[_-]?\d+", re.I)
# never the project's text: build outputs and tool caches of a checkout without git
_SKIP_DIRS = {".git", ".venv", "build", "__pycache__", "graphscope-out", ".pytest_cache",
              ".ruff_cache", ".mypy_cache"}


def tracked_files(root):
    """The files git tracks under ``root`` (relative paths); without git, every file outside
    build outputs and caches."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True,
                             check=True).stdout
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x not in _SKIP_DIRS]
            paths += [os.path.relpath(os.path.join(d, f), root) for f in files]
        return paths


def findings(root, paths):
    """``path:line: [pattern] text`` for every offending line of the text files in ``paths``
    (binary files are skipped), and ``path: [file name]`` for every offending path."""
    out = [f"{p}: [file name named by a work period]" for p in paths if PATH_PATTERN.search(p)]
    for rel in paths:
        full = os.path.join(root, rel)
        if not os.path.isfile(full):  # a symlink to a folder (graphscope/cli)
            continue
        with open(full, "rb") as f:
            data = f.read()
        if b"\0" in data[:8192]:
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            out += [f"{rel}:{n}: [{name}] {line.strip()[:100]}"
                    for name, pat in LINE_PATTERNS.items() if pat.search(line)]
    return out


def test_no_tracked_file_cites_a_tracker_or_the_history_of_the_work():
    # GIVEN every tracked file of the checkout
    paths = tracked_files(ROOT)
    assert len(paths) > 100 and "README.md" in paths
    # WHEN they are scanned
    found = findings(ROOT, paths)
    # THEN nothing cites a tracker number or a work period
    assert not found, "say what the code does, not how it was made:\n" + "\n".join(found)


def test_an_injected_line_or_file_name_fails_the_check(tmp_path):
    # GIVEN a temp copy of README.md, clean as it is
    shutil.copy(os.path.join(ROOT, "README.md"), tmp_path / "README.md")
    assert findings(tmp_path, ["README.md"]) == []
    # WHEN one line of each kind is added to it, and a result file is named by a work period
    injected = ["Fixed for " + "issue" + " 28.", "As the " + "ninth" + " session measured:",
                "Re-recorded in " + "session" + " 3.", "The " + "lead" + " runs it on the GPU."]
    with open(tmp_path / "README.md", "a", encoding="utf-8") as f:
        f.write("\n".join(injected) + "\n")
    (tmp_path / "docs").mkdir()
    bad_name = "docs/bench_2026-12-01_" + "session" + "9.json"
    (tmp_path / bad_name).write_text("{}\n")
    found = findings(tmp_path, ["README.md", bad_name])
    # THEN each is reported, naming the file, the line and the pattern
    assert f"{bad_name}: [file name named by a work period]" in found
    lines = [f for f in found if f.startswith("README.md:")]
    assert [f.split(": [")[1].split("]")[0] for f in lines] == [
        "tracker number", "ordinal work session", "numbered work session", "who did the work"]
    assert all(any(text in f for f in lines) for text in injected)


def test_ordinary_words_of_the_project_pass(tmp_path):
    # GIVEN lines that use the same words as the patterns, in their ordinary sense
    ordinary = [
        "replays inside a torch.profiler session are left untraced",
        "the program's own history session runs on untouched",
        "round 0: the site's first (op) captures, not counted",
        "SM active cycles, not issue throughput",
        "the first capture of a site records ops; graph ordinals such as #1 and #10",
        "a failed call ends its own profiler window; the next step and the previous step run on",
        "the graph 'decode.py:71 #1 [8,1] [1]' leads the ladder; the lead time of a launch",
    ]
    (tmp_path / "notes.md").write_text("\n".join(ordinary) + "\n")
    # WHEN they are scanned THEN nothing is reported
    assert findings(tmp_path, ["notes.md"]) == []
