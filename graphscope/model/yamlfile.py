"""Reading a YAML file whose errors name the file (graphscope.yaml, budgets.yaml)."""

from __future__ import annotations

from typing import Any

from .._errors import ConfigError


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
        _no_duplicate_keys(tree, path)
        return tree, yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: invalid YAML: {where}{problem}") from None



def _no_duplicate_keys(node: Any, path: str, prefix: str = "") -> None:
    """A key given twice in one mapping is refused (YAML keeps the last in silence), named by
    its line and dotted path."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode):
                if k.value in seen:
                    raise ConfigError(f"{path}:{k.start_mark.line + 1}: duplicate key "
                                      f"'{prefix}{k.value}'")
                seen.add(k.value)
            _no_duplicate_keys(v, path, f"{prefix}{getattr(k, 'value', '?')}.")
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            _no_duplicate_keys(v, path, prefix)
