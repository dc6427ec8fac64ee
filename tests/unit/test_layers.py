"""The package's layers, read from the source with ``ast`` (top-level and function-level
imports alike): no import cycle between graphscope modules, and no import against the layers
documented in docs/architecture.md. Lowest first:

    base      _errors _version render.fmt                       (import nothing of ours above)
    native    native/                                           (the door to the extension)
    model     model/                                            (the data and its files)
    analysis  analysis/                                         (every number from a bundle)
    render    render/ (not fmt)                                 (formatting only; never each other)
    compose   render.answer groups                              (parts made of renderers)
    views     render.terminal html markdown                     (a report's views, of renderers)
    capture   annotate/ capture/ trace_annotate/                (runs the GPU, the user's code)
    entry     graphscope (the public API) __main__ cli/         (may import everything)

render and capture are side by side: neither imports the other. An import under
``if TYPE_CHECKING:`` never runs: it counts for the direction, not for cycles.
"""

from __future__ import annotations

import ast
import glob
import os
from dataclasses import dataclass

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = "graphscope"

LAYERS: dict[str, tuple[str, ...]] = {
    "base": ("graphscope._errors", "graphscope._version", "graphscope.render.fmt"),
    "native": ("graphscope.native",),
    "model": ("graphscope.model",),
    "analysis": ("graphscope.analysis",),
    "render": ("graphscope.render",),
    "compose": ("graphscope.render.answer", "graphscope.render.groups"),
    "views": ("graphscope.render.terminal", "graphscope.render.html",
              "graphscope.render.markdown"),
    "capture": ("graphscope.annotate", "graphscope.capture", "graphscope.trace_annotate"),
    "entry": ("graphscope", "graphscope.__main__", "graphscope.cli"),
}
ALLOWED: dict[str, set[str]] = {
    "base": {"base"},
    "native": {"base", "native"},
    "model": {"base", "model"},  # the data layer never reaches the extension
    "analysis": {"base", "model", "analysis"},
    "render": {"base", "model", "analysis"},  # not "render": renderers never import each other
    # the answer and the grouped diagnosis word findings as the Diagnosis does: renderers of
    # renderers, which the views share (the groups' lines use the answer's wrapping)
    "compose": {"base", "model", "analysis", "render", "compose"},
    "views": {"base", "model", "analysis", "render", "compose"},  # never views
    "capture": {"base", "native", "model", "analysis", "capture"},
    "entry": set(LAYERS),
}
# packages whose __init__ imports no graphscope module (the standard library's typing and
# dataclasses at most): importing graphscope.render.fmt (base) runs graphscope/render/__init__.py,
# which must not load a renderer; analysis/__init__.py holds what every section shares (Absent)
STDLIB_ALLOWED = {"__future__", "dataclasses", "typing"}
BARE_PACKAGES = ("graphscope/render/__init__.py", "graphscope/analysis/__init__.py")


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    line: int
    type_only: bool = False

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst} (line {self.line})"


def modules(root: str = ROOT) -> dict[str, str]:
    """Module name -> file, for graphscope/ and cli/ (shipped as graphscope.cli; graphscope/cli
    is a symlink to it)."""
    out: dict[str, str] = {}
    for top, name in (("graphscope", PKG), ("cli", f"{PKG}.cli")):
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames
                                 if not os.path.islink(os.path.join(dirpath, d)))
            rel = os.path.relpath(dirpath, base)
            pkg = name if rel == "." else f"{name}.{rel.replace(os.sep, '.')}"
            for f in filenames:
                if f.endswith(".py"):
                    mod = pkg if f == "__init__.py" else f"{pkg}.{f[:-3]}"
                    out[mod] = os.path.join(dirpath, f)
    return out


def _compiled(name: str, mods: dict[str, str]) -> bool:
    """A compiled extension (graphscope.native._native, _opwatch): its stub sits beside the
    package."""
    pkg, _, leaf = name.rpartition(".")
    init = mods.get(pkg)
    return init is not None and os.path.exists(os.path.join(os.path.dirname(init), leaf + ".pyi"))


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                for n in ast.walk(sub):
                    if hasattr(n, "lineno"):
                        lines.add(n.lineno)
    return lines


def imports(mods: dict[str, str]) -> list[Edge]:
    """Every import of one graphscope module by another, wherever it sits in the file."""
    edges: list[Edge] = []

    def target(name: str) -> str | None:
        while name and name not in mods:
            if _compiled(name, mods):
                return None
            name = name.rpartition(".")[0]
        return name or None

    for mod, path in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        typing_only = _type_checking_lines(tree)
        pkg = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1])
                    base += f".{node.module}" if node.module else ""
                else:
                    base = node.module or ""
                names = [f"{base}.{a.name}" for a in node.names]
            for name in names:
                if name != PKG and not name.startswith(PKG + "."):
                    continue
                dst = target(name)
                if dst is not None and dst != mod:
                    edges.append(Edge(mod, dst, node.lineno, node.lineno in typing_only))
    return list(dict.fromkeys(edges))  # one per (module, target, line)


def layer_of(mod: str) -> str | None:
    best: tuple[int, str | None] = (-1, None)
    for layer, prefixes in LAYERS.items():
        for p in prefixes:
            # the root package is a layer of its own name only, never a catch-all prefix
            hit = mod == p or (p != PKG and mod.startswith(p + "."))
            if hit and len(p) > best[0]:
                best = (len(p), layer)
    return best[1]


def back_flows(edges: list[Edge]) -> list[str]:
    out = []
    for e in edges:
        a, b = layer_of(e.src), layer_of(e.dst)
        if a is None or b is None or b not in ALLOWED[a]:
            out.append(f"{e} imports {b} from {a}")
    return out


def cycles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), over the imports that
    run."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if not e.type_only:
            graph.setdefault(e.src, set()).add(e.dst)
            graph.setdefault(e.dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


MODS = modules()
EDGES = imports(MODS)


def test_every_module_has_a_layer():
    # GIVEN every module of the package WHEN placed in the layers THEN none is left out
    assert [m for m in MODS if layer_of(m) is None] == []


def test_no_import_cycle():
    # GIVEN every import that runs WHEN searched for cycles THEN there is none
    assert cycles(EDGES) == []


def test_no_import_against_the_layers():
    # GIVEN every import, type-only ones included THEN each points down (or sideways within
    # the capture layer), never from a renderer to another, never from capture to a renderer
    assert back_flows(EDGES) == []


def test_layer_packages_import_nothing_on_import():
    for rel in BARE_PACKAGES:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        bad = [ast.dump(n) for n in ast.walk(tree)
               if (isinstance(n, ast.ImportFrom) and (n.level or n.module not in STDLIB_ALLOWED))
               or (isinstance(n, ast.Import) and any(a.name not in STDLIB_ALLOWED
                                                     for a in n.names))]
        assert not bad, (rel, bad)


def test_the_reader_sees_function_level_and_relative_imports():
    # GIVEN imports known to sit inside functions and to be relative THEN the reader finds them
    got = {(e.src, e.dst) for e in EDGES}
    # `from .. import native`
    assert ("graphscope.trace_annotate.chunks", "graphscope.native") in got
    # inside gzip_engine()
    assert ("graphscope.capture.capabilities", "graphscope.trace_annotate.streamio") in got
    assert ("graphscope.render.dot", "graphscope.render.fmt") in got
    assert not any(e.dst.endswith("_native") for e in EDGES)  # the compiled module is no module


INJECTED = [
    # (from, to): one import each that the layers forbid
    ("graphscope.model.graph", "graphscope.analysis.summary"),  # data computing numbers
    ("graphscope.analysis.summary", "graphscope.render.table"),  # numbers formatting
    ("graphscope.capture", "graphscope.render.table"),  # capture printing
    ("graphscope.render.table", "graphscope.render.dot"),  # renderers importing each other
    ("graphscope.render.html", "graphscope.render.terminal"),  # views importing each other
    ("graphscope.model.join", "graphscope.native"),  # the data reaching the extension
    ("graphscope.render.fmt", "graphscope.model.graph"),  # the base reaching up
    ("graphscope.analysis.ranks", "graphscope.capture"),  # analysis needing torch's side
    ("graphscope.render.table", "graphscope.native"),  # a renderer needing the extension
    ("graphscope.native", "graphscope.trace_annotate"),  # a cycle: trace_annotate imports native
]


@pytest.mark.parametrize(("src", "dst"), INJECTED)
def test_a_forbidden_import_is_caught(src, dst):
    # GIVEN the package's imports plus one forbidden import WHEN checked THEN it is reported
    assert src in MODS and dst in MODS
    assert back_flows(EDGES) == []
    assert back_flows([*EDGES, Edge(src, dst, 1)]) != []


def test_a_cycle_is_caught():
    # GIVEN config's import of capture (to validate --mode against the registry) WHEN capture
    # imports config at run time again (not only for typing) THEN that is a cycle
    assert any(e.src == "graphscope.capture.config" and e.dst == "graphscope.capture" for e in
    EDGES)
    assert cycles([*EDGES, Edge("graphscope.capture", "graphscope.capture.config", 1)]) != []
    assert cycles([*EDGES, Edge("graphscope.capture", "graphscope.capture.config", 1, True)]) == []


# --- views and compose import analysis's types, never its functions ---------------------------
# A view (and the parts the views share) renders the document it is handed: from analysis it
# takes types (CamelCase classes) and constants (UPPER_CASE), the report's JSON form
# (analysis.document) and a section's JSON form: the diagnosis's own (to_json / from_json) and
# every other section's (analysis.plain, with present: whether a field holds a section).
# Everything computed comes built (analysis.report.build_report, analysis.page.build_page).
DOCUMENT_VIEWS = ("compose", "views")
ANALYSIS = f"{PKG}.analysis"
ANALYSIS_FORMS = {f"{ANALYSIS}.document": None,  # the whole module
                  f"{ANALYSIS}.diagnosis.types": {"to_json", "from_json"},
                  ANALYSIS: {"plain", "present"}}


@dataclass(frozen=True)
class NameImport:
    src: str
    module: str  # the module imported from
    name: str  # the name imported ("" for `import module`)
    line: int

    def __str__(self) -> str:
        return f"{self.src}:{self.line}: {self.name or self.module} from {self.module}"


def name_imports(mods: dict[str, str], layers: tuple[str, ...] = DOCUMENT_VIEWS
                 ) -> list[NameImport]:
    """Every name the modules of ``layers`` import from analysis/, wherever in the file."""
    out = []
    for mod, path in mods.items():
        if layer_of(mod) not in layers:
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        pkg = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out += [NameImport(mod, a.name, "", node.lineno) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1]) + (
                        f".{node.module}" if node.module else "")
                out += [NameImport(mod, base, a.name, node.lineno) for a in node.names]
    return [i for i in out if i.module == ANALYSIS or i.module.startswith(ANALYSIS + ".")]


def analysis_functions(found: list[NameImport], mods: dict[str, str] = MODS) -> list[str]:
    """The imports of ``found`` that take more from analysis than types, constants and the
    JSON forms: a function, or a module (whose functions it could call)."""
    out = []
    for i in found:
        module, name = i.module, i.name
        if not name or f"{module}.{name}" in mods:  # a module: what it holds is reachable
            module, name = (f"{module}.{name}" if name else module), ""
        allowed = ANALYSIS_FORMS.get(module, set())
        if allowed is None or (name[:1].isupper() or name in allowed):
            continue
        out.append(str(i))
    return out


def test_views_import_only_types_from_analysis():
    # GIVEN every name the views and the parts they share import from analysis/ THEN each is
    # a type, a constant or a JSON form: no view computes a figure
    assert analysis_functions(name_imports(MODS)) == []


def test_the_name_reader_sees_function_level_and_type_only_imports():
    # GIVEN imports known to sit inside functions and under TYPE_CHECKING THEN they are read
    got = {(i.src, i.module, i.name) for i in name_imports(MODS)}
    assert ("graphscope.render.terminal", "graphscope.analysis.answer", "GROUPED_FROM") in got
    assert ("graphscope.render.html", "graphscope.analysis.ranks", "RanksSection") in got
    assert ("graphscope.render.html", "graphscope.analysis.document", "report_json") in got


INJECTED_NAMES = [
    # (view, module, name): one import each of an analysis function or module
    ("graphscope.render.html", "graphscope.analysis.summary", "summarize"),
    ("graphscope.render.html", "graphscope.analysis.page", "build_page"),
    ("graphscope.render.terminal", "graphscope.analysis.report", "report_diagnosis"),
    ("graphscope.render.markdown", "graphscope.analysis.diagnosis", "diagnose"),
    ("graphscope.render.answer", "graphscope.analysis.answer", "build_answer"),
    ("graphscope.render.groups", "graphscope.analysis", "summary"),  # a module, by name
    ("graphscope.render.markdown", "graphscope.analysis.ladder", ""),  # `import` of one
]


@pytest.mark.parametrize(("src", "module", "name"), INJECTED_NAMES)
def test_a_view_importing_an_analysis_function_is_caught(src, module, name):
    # GIVEN the views' imports plus one of an analysis function or module WHEN checked THEN
    # it is reported, where the same module's types and JSON forms are not
    found = name_imports(MODS)
    assert analysis_functions(found) == []
    assert analysis_functions([*found, NameImport(src, module, name, 1)]) != []
    assert analysis_functions([NameImport(src, "graphscope.analysis.report", "Report", 1),
                               NameImport(src, "graphscope.analysis.document", "REPORT_VERSION",
                                          1),
                               NameImport(src, "graphscope.analysis.diagnosis.types",
                                          "to_json", 1)]) == []


# --- NodeKind: the node types are named once (model/graph.py) ---------------------------------

CUDA_H = sorted({*glob.glob("/usr/local/cuda*/include/cuda.h"), *glob.glob(os.path.join(
    os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include", "cuda.h"))})
# a `.type == "kernel"` left where another change is rewriting the module
KIND_LITERAL_EXEMPT: set[str] = set()


def _kind_literals(mods: dict[str, str]) -> list[str]:
    """Hand-written node types: a collection of two or more of kernel/memcpy/memset, or a
    node's ``.type`` compared with a type's name spelled as a string."""
    from graphscope.model.graph import NodeKind

    kinds = {k.value for k in NodeKind}
    work = {"kernel", "memcpy", "memset"}
    out = []
    for mod, path in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Set, ast.Tuple, ast.List, ast.Dict)):
                elts = node.values if isinstance(node, ast.Dict) else node.elts
                strs = {e.value for e in elts if isinstance(e, ast.Constant)}
                if len(strs & work) >= 2:
                    out.append(f"{mod}:{node.lineno}: a list of work-node types")
            elif isinstance(node, ast.Compare) and mod not in KIND_LITERAL_EXEMPT:
                sides = [node.left, *node.comparators]
                typed = any(isinstance(s, ast.Attribute) and s.attr == "type" for s in sides)
                named = any(isinstance(s, ast.Constant) and s.value in kinds for s in sides)
                if typed and named:
                    out.append(f"{mod}:{node.lineno}: a node type spelled as a string")
    return out


def test_node_types_are_named_once():
    # GIVEN every module WHEN read THEN no node type is spelled by hand outside NodeKind
    assert _kind_literals(MODS) == []


def test_a_hand_written_node_type_is_caught(tmp_path):
    # GIVEN a module that lists work-node types by hand, and one that compares .type with a
    # name WHEN read THEN both are reported
    (tmp_path / "a.py").write_text('WORK = ("kernel", "memcpy", "memset")\n')
    (tmp_path / "b.py").write_text('def f(n):\n    return n.type == "memset"\n')
    got = _kind_literals({"a": str(tmp_path / "a.py"), "b": str(tmp_path / "b.py")})
    assert len(got) == 2


@pytest.mark.skipif(not CUDA_H, reason="no CUDA toolkit cuda.h here")
def test_node_kind_is_cuda_graph_node_type():
    # GIVEN cuda.h's CUgraphNodeType WHEN read THEN NodeKind holds its values in its order
    import re

    from graphscope.model.graph import NodeKind

    with open(CUDA_H[0], encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = dict(re.findall(r"CU_GRAPH_NODE_TYPE_(\w+)\s*=\s*(\d+)", text))
    names = {"WAIT_EVENT": "EVENT_WAIT"}  # cuda.h's spelling -> the name bundles store
    assert found
    for cuda_name, value in found.items():
        assert NodeKind.name_of(int(value)) == NodeKind[names.get(cuda_name, cuda_name)].value


# Calls that read or write files: the command reads the bundle and writes the output; analysis
# and render are pure functions of what they are handed (their package data aside: the HTML
# template is read with importlib.resources).
_FILE_IO = {"open", "os.listdir", "os.scandir", "os.walk", "os.remove", "os.unlink",
            "os.rename", "os.replace", "os.makedirs", "os.mkdir", "os.path.exists",
            "os.path.isfile", "os.path.isdir", "os.path.getsize", "os.path.lexists", "json.load",
            "json.dump", "np.load", "np.save", "shutil.copy", "shutil.copyfile", "shutil.move",
            "shutil.rmtree", "tempfile.mkstemp", "tempfile.NamedTemporaryFile"}
_IO_FREE = ("graphscope.analysis", "graphscope.render")


def file_io_calls(mods: dict[str, str]) -> list[str]:
    """``module:line: call`` for each file-reading or -writing call in analysis/ and render/,
    and each import of the bundle's readers there."""
    out = []
    for mod, path in mods.items():
        if not mod.startswith(_IO_FREE):
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name in _FILE_IO or name.endswith((".read_text", ".write_text",
                                                      ".read_bytes", ".write_bytes")) and (
                        "resources" not in ast.unparse(node.func)):
                    out.append(f"{mod}:{node.lineno}: {name}")
            elif isinstance(node, ast.ImportFrom) and node.module and any(
                    node.module.endswith(m) for m in ("bundle_io", "outputs")) and not any(
                    a.name.isupper() for a in node.names):
                out.append(f"{mod}:{node.lineno}: imports {node.module}")
    return out


def test_no_file_io_in_analysis_and_render():
    # GIVEN every module of analysis/ and render/ THEN none reads or writes a file itself
    assert file_io_calls(MODS) == []


def test_the_file_io_check_sees_an_injected_read(tmp_path):
    # GIVEN a copy of the package with one open() injected into an analysis module
    import shutil

    shutil.copytree(os.path.join(ROOT, "graphscope"), tmp_path / "graphscope", symlinks=True)
    target = tmp_path / "graphscope" / "analysis" / "stats.py"
    target.write_text(target.read_text() + "\n\ndef _peek(p):\n    return open(p).read()\n")
    # WHEN checked THEN the injected call is named
    found = file_io_calls(modules(str(tmp_path)))
    assert [f for f in found if f.startswith("graphscope.analysis.stats:")], found
