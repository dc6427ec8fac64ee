"""Size limits, read from the source: no Python file over 500 lines or function over 60 under
graphscope/ (and cli/, shipped as graphscope.cli), no C++ file over 600 lines or function over
80 under csrc/.

A function that is right as it is says why on the line above its definition (Python, or on its
``def`` line)::

    # Long on purpose: <the reason a reviewer would accept>

and in C++ ``// Long on purpose: <reason>``; a file, in its first lines (a size in the reason,
"Long on purpose (~80 lines):", is not one: it goes stale as the code grows). ``OVER_LIMIT`` lists
what is over today without such a reason: the test fails when anything else grows over a limit,
and when something listed fits (take it off), so the list only shrinks.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY_FILE, PY_FUNCTION = 500, 60
CPP_FILE, CPP_FUNCTION = 600, 80
MARK = re.compile(r"(#|//)\s*Long on purpose:\s*\S")
FILE_MARK_LINES = 40  # a file's reason sits in its first lines

# Over a limit today, with no reason given: "path" for a file, "path::function" for a function.
OVER_LIMIT: set[str] = set()  # nothing today: keep it so


@dataclass(frozen=True)
class Over:
    key: str  # "path" or "path::function"
    line: int
    lines: int
    limit: int

    def __str__(self) -> str:
        return f"{self.key} (line {self.line}): {self.lines} lines, over {self.limit}"


def _files(top: str, exts: tuple[str, ...]) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
        dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))
                             and d != "__pycache__")
        out += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(exts)]
    return out


def _marked(lines: list[str], at: int) -> bool:
    """A reason on line ``at`` (1-based) or the line above it."""
    return any(MARK.search(lines[i - 1]) for i in (at - 1, at) if 1 <= i <= len(lines))


def _file_over(rel: str, lines: list[str], limit: int) -> list[Over]:
    if len(lines) <= limit or any(MARK.search(x) for x in lines[:FILE_MARK_LINES]):
        return []
    return [Over(rel, 1, len(lines), limit)]


def python_over(path: str, text: str) -> list[Over]:
    """What in one Python file is over its limit without a reason."""
    lines = text.splitlines()
    out = _file_over(path, lines, PY_FILE)
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = (node.end_lineno or node.lineno) - node.lineno + 1
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if n > PY_FUNCTION and not (_marked(lines, node.lineno) or _marked(lines, first)):
                out.append(Over(f"{path}::{node.name}", node.lineno, n, PY_FUNCTION))
    return out


def _blank_cpp(src: str) -> str:
    """``src`` with comments, string and character literals and preprocessor lines blanked
    (newlines kept, so offsets keep their line numbers)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    pattern = re.compile(
        r'//[^\n]*|/\*.*?\*/|R"([^(\s]*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|'
        r"'(?:\\.|[^'\\\n])*'|^[ \t]*#[^\n]*", re.S | re.M)
    return pattern.sub(blank, src)


_FUNCTION_HEAD = re.compile(r"\)\s*(?:const|noexcept|override|final|mutable|->[^{;]*|\s)*$")
_NOT_FUNCTION = re.compile(r"^(?:namespace|struct|class|enum|union)\b|=\s*$")


def cpp_functions(src: str) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of each function defined in C++ source ``src``: a brace block
    whose head ends with a parameter list (and qualifiers, or a constructor's initializers),
    outside any other function; lambdas and blocks inside one count with it."""
    s = _blank_cpp(src)
    stack: list[tuple[bool, int, str]] = []  # (counted as a function, its first line, name)
    out = []
    head_start = 0
    for i, c in enumerate(s):
        if c == "{":
            head = s[head_start:i].strip()
            inside = any(f for f, _, _ in stack)
            is_function = (not inside and bool(_FUNCTION_HEAD.search(head))
                           and not _NOT_FUNCTION.search(head))
            start = head_start + len(s[head_start:i]) - len(s[head_start:i].lstrip())
            name = head.split("(")[0].split()[-1] if is_function and head.split("(")[0].split() \
                else ""
            stack.append((is_function, s.count("\n", 0, start) + 1, name))
            head_start = i + 1
        elif c == "}":
            if stack:
                is_function, first, name = stack.pop()
                if is_function:
                    out.append((name, first, s.count("\n", 0, i) + 1 - first + 1))
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
    return out


def cpp_over(path: str, src: str) -> list[Over]:
    """What in one C++ file is over its limit without a reason."""
    lines = src.splitlines()
    out = _file_over(path, lines, CPP_FILE)
    for name, first, n in cpp_functions(src):
        if n > CPP_FUNCTION and not _marked(lines, first):
            out.append(Over(f"{path}::{name}", first, n, CPP_FUNCTION))
    return out


def everything_over() -> list[Over]:
    found: list[Over] = []
    for top in ("graphscope", "cli"):
        for f in _files(top, (".py",)):
            with open(f, encoding="utf-8") as fh:
                found += python_over(os.path.relpath(f, ROOT), fh.read())
    for f in _files("csrc", (".cpp", ".h", ".cc", ".hpp")):
        with open(f, encoding="utf-8") as fh:
            found += cpp_over(os.path.relpath(f, ROOT), fh.read())
    return found


def test_nothing_grows_over_the_size_limits():
    over = everything_over()
    new = [str(o) for o in over if o.key not in OVER_LIMIT]
    assert not new, "over the size limits (split it, or say why: '# Long on purpose: ...'):\n" \
        + "\n".join(new)


def test_what_is_listed_over_the_limits_still_is():
    keys = {o.key for o in everything_over()}
    fits = sorted(OVER_LIMIT - keys)
    assert not fits, "within the limits now: take these off OVER_LIMIT:\n" + "\n".join(fits)


def test_cpp_functions_are_measured_by_their_braces():
    # GIVEN a namespace, a struct with an inline method, a function holding braces in a string,
    # a comment, a character literal and a lambda, and a marked long function
    src = "\n".join([
        "namespace gs {",                      # 1
        "struct S {",                          # 2
        "  int f() const { return 1; }",       # 3
        "};",                                  # 4
        "static int table[] = {1, 2};",        # 5
        "int g(int a) {",                      # 6
        '  const char* s = "{{";  // }',       # 7
        "  char c = '{';",                     # 8
        "  auto h = [&]() { return a; };",     # 9
        "  return h();",                       # 10
        "}",                                   # 11
        "// Long on purpose: a test of the marker",
        "Thing::Thing(int x)",                 # 13
        "    : x_(x) {",                       # 14
        *["  step();"] * 80,                   # 15-94
        "}",                                   # 95
        "}  // namespace gs",
    ])
    # WHEN its functions are measured
    found = cpp_functions(src)
    # THEN each function is found once, nested blocks and lambdas counted with it
    assert found == [("f", 3, 1), ("g", 6, 6), ("Thing::Thing", 13, 83)]
    assert cpp_over("x.cpp", src) == []  # the long one says why
    unmarked = src.replace("// Long on purpose: a test of the marker", "// a constructor")
    assert [o.key for o in cpp_over("x.cpp", unmarked)] == ["x.cpp::Thing::Thing"]


def test_python_functions_say_why_they_are_long():
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    long_fn = f"def f():\n{body}\n"
    assert [o.key for o in python_over("m.py", long_fn)] == ["m.py::f"]
    assert python_over("m.py", "# Long on purpose: one table, read top to bottom\n" + long_fn) \
        == []
    assert python_over("m.py", "@decorated\n" + long_fn.replace(
        "def f():", "def f():  # Long on purpose: one table")) == []
    assert [o.key for o in python_over("m.py", "x = 1\n" * 501)] == ["m.py"]
