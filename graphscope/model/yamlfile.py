"""Reading a YAML file whose errors name the file (graphscope.yaml, budgets.yaml).

A YAML file is untrusted input: anchors and aliases (``&a``/``*a``) let a 1 KB file stand for
a tree of billions of nodes (the "billion laughs"). The composed file is a graph whose shared
nodes are the aliases: every walk here visits a node once, and a file whose aliases expand to
more than :data:`MAX_EXPANDED_NODES` nodes, or that refers to itself, is refused before its
values are read.
"""

from __future__ import annotations

from typing import Any

from .._errors import ConfigError

MAX_EXPANDED_NODES = 100_000  # a config or budgets file has tens; a large one, thousands


def read_yaml(path: str, what: str) -> tuple[Any, Any]:
    """(node tree with line marks, plain data) of a YAML file; errors name the file."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {what} is not UTF-8 text (byte {exc.start})") from None
    try:
        tree = yaml.compose(text)
        _bounded(tree, path)
        _no_duplicate_keys(tree, path)
        return tree, yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: invalid YAML: {where}{problem}") from None
    except RecursionError:  # the composer recurses once per level of nesting
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [x for kv in node.value for x in kv]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _expanded_sizes(root: Any, path: str) -> dict[int, int]:
    """Per node (by id), the number of nodes it stands for once its aliases are expanded;
    each node is visited once (iteratively: no recursion limit). A node inside itself (an
    alias to an anchor that encloses it) is refused."""
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            size[key] = min(1 + sum(size[id(c)] for c in _children(node)),
                            MAX_EXPANDED_NODES + 1)
            continue
        if key in size:
            continue
        if key in open_:
            raise ConfigError(f"{path}:{node.start_mark.line + 1}: an alias refers to the node "
                              "that holds it (a recursive YAML anchor)")
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(_children(node)) if id(c) not in size)
    return size


def _bounded(root: Any, path: str) -> None:
    """Refuse a file whose aliases expand past :data:`MAX_EXPANDED_NODES` nodes, naming the
    outermost key whose value alone does."""
    import yaml

    if root is None:
        return
    size = _expanded_sizes(root, path)
    if size[id(root)] <= MAX_EXPANDED_NODES:
        return
    node, keys, line = root, [], 1
    while isinstance(node, yaml.MappingNode):
        big = next(((k, v) for k, v in node.value if size[id(v)] > MAX_EXPANDED_NODES), None)
        if big is None:
            break
        keys.append(str(big[0].value))
        line, node = big[0].start_mark.line + 1, big[1]
    named = f" at '{'.'.join(keys)}'" if keys else ""
    raise ConfigError(f"{path}:{line}: YAML aliases expand to more than {MAX_EXPANDED_NODES} "
                      f"values{named}: refused (write the values out, or use fewer aliases)")


def _no_duplicate_keys(root: Any, path: str) -> None:
    """A key given twice in one mapping is refused (YAML keeps the last in silence), named by
    its line and dotted path. Each node is walked once, however many aliases share it."""
    import yaml

    seen_nodes: set[int] = set()
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, prefix = stack.pop()
        if node is None or id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for k, _ in node.value:
                if isinstance(k, yaml.ScalarNode):
                    if k.value in seen:
                        raise ConfigError(f"{path}:{k.start_mark.line + 1}: duplicate key "
                                          f"'{prefix}{k.value}'")
                    seen.add(k.value)
            stack.extend((v, f"{prefix}{getattr(k, 'value', '?')}.")
                         for k, v in reversed(node.value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((v, prefix) for v in reversed(node.value))

