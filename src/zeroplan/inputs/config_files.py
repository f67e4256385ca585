"""Read a file `zeroplan check` was given: a DeepSpeed config or YAML, with the file, line and column of any
syntax error.

A DeepSpeed config (.json, or any non-YAML file that starts with "{") is read as DeepSpeed 0.19.8 reads it:
with hjson (comments, trailing commas, unquoted keys and quoteless values are valid), through
zeroplan.inputs.hjson. Accelerate configs and plan files stay YAML.

Also answers "on which line is this key?", for annotations, from each parser's own marks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from zeroplan.core.errors import InputError
from zeroplan.inputs.text_files import read_user_text
from zeroplan.inputs.yaml_text import YamlSyntaxError, YamlTooLarge, load_with_nodes
from zeroplan.inputs.hjson import ConfigParseError, TooManyValues, read_with_marks


@dataclass
class Source:
    """One parsed file: its text, its data, and where each key sits."""

    path: Path
    text: str
    data: object
    format: str  # "json" or "yaml"
    duplicates: list[tuple[str, ...]] = field(default_factory=list)  # key paths given twice
    _marks: dict[tuple[str, ...], tuple[int, int]] = field(default_factory=dict)
    _duplicate_marks: dict[tuple[str, ...], tuple[int, int]] = field(default_factory=dict)  # second occurrence

    @property
    def name(self) -> str:
        return str(self.path)

    def mapping(self) -> dict:
        """The data as a mapping of keys, as every config file zeroplan reads holds."""
        if not isinstance(self.data, dict):
            raise InputError(self.name, f"must hold a mapping of keys, found {type(self.data).__name__}",
                             "give a DeepSpeed JSON config, a zeroplan plan or an accelerate config")
        return self.data

    def locate(self, path: tuple[str, ...], occurrence: int = 1) -> tuple[int, int] | None:
        """1-based (line, column) of the last key of `path`, or None when it is not in the file."""
        if not path:
            return None
        if occurrence == 2 and tuple(path) in self._duplicate_marks:
            return self._duplicate_marks[tuple(path)]
        return self._marks.get(tuple(path))


# The work a config may ask for, beside its bytes (inputs.text_files.MAX_INPUT_BYTES): a DeepSpeed config holds
# a few hundred values; parsing and checking 20,000 takes well under a second.
MAX_CONFIG_VALUES = 20_000


def read_text(path: Path, what: str = "config") -> str:
    """The file's text, bounded in size and refused unless it is a regular UTF-8 file (inputs.text_files)."""
    return read_user_text(path, f"give the {what} file's path (a .json or .yaml file)")


def parse_json(path: Path, text: str) -> Source:
    """A DeepSpeed config, parsed as DeepSpeed parses it (hjson); duplicate keys are kept for ZP017."""
    try:
        parsed = read_with_marks(text, max_values=MAX_CONFIG_VALUES)
    except TooManyValues:
        raise InputError(str(path), f"holds more than {MAX_CONFIG_VALUES:,} values, far beyond any DeepSpeed config "
                         "(a few hundred)", "check that this is the DeepSpeed config") from None
    except ConfigParseError as exc:
        raise InputError(str(path), f"DeepSpeed cannot parse it at line {exc.line}, column {exc.col}: {exc.msg}",
                         "fix the syntax (DeepSpeed reads configs with hjson: JSON plus comments and trailing "
                         "commas)") from None
    except RecursionError:
        raise InputError(str(path), "is nested too deeply to be a DeepSpeed config", "check the file") from None
    duplicates = [key for key, _ in parsed.duplicates]
    return Source(path, text, parsed.data, "json", duplicates=duplicates, _marks=parsed.marks,
                  _duplicate_marks={key: mark for key, mark in reversed(parsed.duplicates)})


def parse_yaml(path: Path, text: str) -> Source:
    try:
        data, node = load_with_nodes(text)
    except YamlTooLarge as exc:
        raise InputError(str(path), exc.problem, "check that this is the config file") from None
    except YamlSyntaxError as exc:
        where = f" at line {exc.line}, column {exc.column}" if exc.line else ""
        raise InputError(str(path), f"malformed YAML{where}: {exc.problem}", "fix the syntax") from None
    source = Source(path, text, data, "yaml")
    if node is not None:
        _collect_marks(node, (), source)
    return source


def _collect_marks(node, prefix: tuple[str, ...], source: Source) -> None:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return
    for key_node, value_node in node.value:
        key = (*prefix, str(key_node.value))
        if key in source._marks:
            source.duplicates.append(key)
        source._marks[key] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
        _collect_marks(value_node, key, source)


def load(path: str | Path) -> Source:
    """Parse a .json file as JSON and anything else as YAML (JSON is also valid YAML for the rest)."""
    path = Path(path)
    text = read_text(path)
    if path.suffix.lower() == ".json":
        return parse_json(path, text)
    if path.suffix.lower() not in (".yaml", ".yml") and text.lstrip().startswith("{"):
        return parse_json(path, text)
    return parse_yaml(path, text)


def detect_kind(source: Source) -> str:
    """'deepspeed', 'accelerate' or 'plan', from the keys the file holds."""
    data = source.mapping()
    keys = set(data)
    if source.format == "json":
        return "deepspeed"
    if keys & {"compute_environment", "distributed_type"} or isinstance(data.get("deepspeed_config"), dict):
        return "accelerate"
    if "zeroplan_plan" in keys or keys & {"model", "cluster"}:
        return "plan"
    if keys & {"zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu"}:
        return "deepspeed"
    raise InputError(source.name, "is neither a DeepSpeed config, a zeroplan plan nor an accelerate config",
                     "a plan has model: and cluster:, an accelerate config has distributed_type: DEEPSPEED")
