"""YAML a user gave, parsed once into both the data and the node tree (which knows each value's line and
column), with syntax errors as one exception carrying the position: the one YAML reader for config, plan,
accelerate, calibration and presets files. PyYAML is imported only here, and only when a YAML file is read."""

from __future__ import annotations

from typing import Any


class YamlSyntaxError(ValueError):
    """Malformed YAML; line and column are 1-based, None where PyYAML gives no position."""

    def __init__(self, problem: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(problem)
        self.problem, self.line, self.column = problem, line, column


def load_with_nodes(text: str) -> tuple[Any, Any]:
    """(data, node) of a single-document YAML text (both None for an empty one)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise YamlSyntaxError(problem, mark.line + 1 if mark else None, mark.column + 1 if mark else None) from None
    except RecursionError:
        raise YamlSyntaxError("nested too deeply (thousands of levels)") from None
    finally:
        loader.dispose()
    return data, node
