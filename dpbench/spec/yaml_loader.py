"""Reading an experiment file: YAML through `yaml.safe_load`'s loader only, with a key repeated in
one mapping refused and YAML 1.1's exponent strings read as numbers; every problem one SpecError
line naming the file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from dpbench.core.errors import SpecError


def read(path: Path) -> Any:
    """The YAML document of `path`; SpecError when it is absent, not text or not valid YAML."""
    if not path.is_file():
        raise SpecError(f"{path}: experiment file not found; give the path of a YAML file such as "
                        f"experiments/quickstart.yaml")
    try:
        raw = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # safe_load, duplicate keys refused
    except _DuplicateKey as exc:
        raise SpecError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{path}: not valid YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a text file; give an experiment YAML file") from None
    return yaml11_floats(raw)


class _DuplicateKey(Exception):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load's loader, except that a key repeated in one mapping is an error (plain YAML
    keeps the last value silently, so a second `epsilons:` would replace the first)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # merge keys (<<) may be overridden by design; other keys are scalars in a spec
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in seen:
                    where = f"lines {seen[key]} and {line}" if seen[key] != line else f"line {line}"
                    raise _DuplicateKey(f"key {key!r} appears twice in one mapping ({where}); keep one")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


_EXPONENT_FLOAT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def yaml11_floats(value: Any) -> Any:
    """safe_load follows YAML 1.1, where `1e-5` (no dot) is a string; read such strings as floats."""
    if isinstance(value, str) and _EXPONENT_FLOAT.match(value):
        return float(value)
    if isinstance(value, list):
        return [yaml11_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: yaml11_floats(v) for k, v in value.items()}
    return value


__all__ = ["read", "yaml11_floats"]
