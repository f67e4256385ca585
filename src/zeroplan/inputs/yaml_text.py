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


# The values a YAML file zeroplan reads may hold (configs, plan files, presets, calibration profiles: hundreds
# to a few thousand): the file is refused before any is built beyond this, so its cost is bounded by the work
# it takes, not only by its bytes (a 16 MiB flow list of 8 million numbers took two minutes and 3 GB).
MAX_YAML_VALUES = 100_000


class YamlTooLarge(YamlSyntaxError):
    """More values than MAX_YAML_VALUES."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"holds more than {limit:,} values, far beyond any file zeroplan reads")


def _count_values(yaml: Any, loader_class: Any, text: str, limit: int) -> None:
    """Raise YamlTooLarge once the text has more than `limit` scalars and collections (events, one at a time:
    nothing is built)."""
    count = 0
    loader = loader_class(text)
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent, yaml.AliasEvent)):
                count += 1
                if count > limit:
                    raise YamlTooLarge(limit)
    finally:
        loader.dispose()


def load_with_nodes(text: str, max_values: int = MAX_YAML_VALUES) -> tuple[Any, Any]:
    """(data, node) of a single-document YAML text (both None for an empty one); YamlTooLarge past max_values
    values."""
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _count_values(yaml, loader_class, text, max_values)
    except yaml.YAMLError:
        pass  # the syntax error is reported below, with its place
    loader = loader_class(text)
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
