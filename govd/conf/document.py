"""Reading a YAML document safely, remembering the line of every key.

PyYAML's safe constructors build the data (no tags that run code); the composed node tree gives
the line of each key and list item, so a validation error at ``devices[1].bounds.max_mhz`` can
point at the line it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[str | int, ...]
"""Where a value sits in the document: mapping keys (as text) and list indices."""

MAX_NODES = 20_000
"""Most nodes a document may expand to: aliases can make a short file huge (a "billion laughs")."""


class DocumentError(ValueError):
    """The text is not a YAML document govd can use; ``line`` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass
class Document:
    """The data of a YAML document and the 1-based line of each path in it."""

    data: Any
    lines: dict[Path, int] = field(default_factory=dict)
    duplicates: list[tuple[Path, int]] = field(default_factory=list)
    """Keys given twice in one mapping (YAML keeps the last silently; govd reports them)."""

    def line_of(self, path: Path) -> int:
        """Line of ``path``, or of its nearest ancestor that is in the document (a missing key is
        reported at the mapping that should hold it)."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return self.lines.get((), 1)


def _key_text(node: yaml.Node) -> str:
    return node.value if isinstance(node, yaml.ScalarNode) else f"<{node.tag}>"


def _index(doc: Document, node: yaml.Node, path: Path, budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise DocumentError(node.start_mark.line + 1, f"document has more than {MAX_NODES} nodes")
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = _key_text(key_node)
            child = (*path, key)
            if key in seen:
                doc.duplicates.append((child, key_node.start_mark.line + 1))
            seen.add(key)
            doc.lines.setdefault(child, key_node.start_mark.line + 1)
            _index(doc, value_node, child, budget)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            doc.lines.setdefault((*path, i), item.start_mark.line + 1)
            _index(doc, item, (*path, i), budget)


def read_document(text: str) -> Document:
    """Parse ``text`` as one YAML document with `yaml.safe_load` semantics.

    Raises `DocumentError` with the line of the problem for syntax errors, values the safe
    constructors refuse (e.g. a date with month 13), nesting too deep and alias bombs. An empty
    document reads as an empty mapping.
    """
    try:
        # The reader checks every character as it is built: control characters fail here.
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        character = chr(exc.character) if isinstance(exc.character, int) else exc.character
        raise DocumentError(line, f"character {character!r} is not allowed in YAML") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return Document(data={}, lines={(): 1})
        doc = Document(data=None, lines={(): node.start_mark.line + 1})
        # Index before constructing: construction flattens merge keys (<<) in the node tree.
        _index(doc, node, (), [MAX_NODES])
        doc.data = loader.construct_document(node)
        return doc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise DocumentError(line, " ".join(str(exc.problem or exc).split())) from None
    except yaml.YAMLError as exc:
        raise DocumentError(1, " ".join(str(exc).split())) from None
    except RecursionError:
        raise DocumentError(1, "nesting too deep") from None
    except (ValueError, TypeError, OverflowError) as exc:
        # The safe constructors raise these for values such as 2024-13-45 (a bad timestamp).
        raise DocumentError(loader.line + 1, f"invalid value: {exc}") from None
    finally:
        loader.dispose()
