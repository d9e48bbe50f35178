"""JSON and JSONL helpers shared by the data model (one place that reads and writes files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator, List, Type, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class DataFileError(ValueError):
    """A data file is missing, is not valid JSON, or does not match the schema.

    The message is one line naming the file (and line for JSONL) and the first problem.
    """


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "<root>"
    return f"{loc}: {err.get('msg', 'invalid')}"


def load_model(model: Type[M], path: Path) -> M:
    """Load one JSON document as ``model``.  Raises DataFileError."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        if exc.errors()[0].get("type") == "json_invalid":
            raise DataFileError(f"{path}: malformed JSON ({exc.errors()[0].get('msg')})") from exc
        raise DataFileError(f"{path}: not a valid {model.__name__}: {_first_error(exc)}") from exc


def iter_jsonl(model: Type[M], path: Path) -> Iterator[M]:
    """Yield one ``model`` per non-empty line.  Raises DataFileError naming the line."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read ({exc.strerror})") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield model.model_validate_json(line)
        except ValidationError as exc:
            raise DataFileError(f"{path}:{number}: {_first_error(exc)}") from exc


def load_jsonl(model: Type[M], path: Path) -> List[M]:
    return list(iter_jsonl(model, path))


def dump_json(obj: BaseModel, path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj.model_dump_json(indent=2) + "\n")


def append_jsonl(objs: Iterable[BaseModel], path: Path) -> None:
    """Append one line per object (the file and its folders are created as needed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        for obj in objs:
            fh.write(obj.model_dump_json() + "\n")


def to_plain(obj: BaseModel) -> dict:
    """The JSON-compatible dict of a model, as it would be written to disk."""
    return json.loads(obj.model_dump_json())
