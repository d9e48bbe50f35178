"""Solution: source files plus the build spec that says how to load and call them.

Schema: flashinfer-bench ``flashinfer_bench/data/solution.py``.
"""

from __future__ import annotations

import hashlib
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import List, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SupportedLanguage(str, Enum):
    PYTHON = "python"
    TRITON = "triton"
    CPP = "cpp"
    CUDA = "cuda"
    TILELANG = "tilelang"


class SupportedBinding(str, Enum):
    TVM_FFI = "tvm-ffi"
    TORCH = "torch"


class SourceFile(BaseModel):
    """One source file; ``path`` is relative and may not leave the solution folder."""

    path: str = Field(min_length=1)
    content: str = Field(min_length=1)

    @model_validator(mode="after")
    def _safe_path(self) -> "SourceFile":
        p = PurePosixPath(self.path)
        if p.is_absolute() or Path(self.path).is_absolute():
            raise ValueError(f"source path must be relative: {self.path}")
        if ".." in p.parts:
            raise ValueError(f"source path may not contain '..': {self.path}")
        return self


class BuildSpec(BaseModel):
    """How to build and call a solution.

    ``entry_point`` is ``"file::function"``.  With ``destination_passing_style`` (DPS, the
    default) outputs are pre-allocated by the caller and passed as trailing positional
    arguments; otherwise the function returns them.
    """

    language: SupportedLanguage
    target_hardware: List[str] = Field(min_length=1)
    entry_point: str = Field(min_length=1)
    dependencies: List[str] = Field(default_factory=list)
    destination_passing_style: bool = True
    binding: Optional[SupportedBinding] = None

    @model_validator(mode="after")
    def _entry(self) -> "BuildSpec":
        if self.entry_point.count("::") != 1:
            raise ValueError(f"entry_point must look like 'file.py::function', got {self.entry_point!r}")
        return self

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::")[0]

    @property
    def entry_symbol(self) -> str:
        return self.entry_point.split("::")[1]


class Solution(BaseModel):
    """A complete solution for one definition."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    definition: str = Field(min_length=1)
    author: str = Field(min_length=1)
    spec: BuildSpec
    sources: List[SourceFile] = Field(min_length=1)
    description: Optional[str] = None

    @model_validator(mode="after")
    def _sources(self) -> "Solution":
        paths = [s.path for s in self.sources]
        if len(set(paths)) != len(paths):
            raise ValueError("duplicate source paths")
        if self.spec.entry_file not in paths:
            raise ValueError(f"entry file {self.spec.entry_file!r} is not among the sources")
        return self

    def content_hash(self) -> str:
        """SHA-1 over what changes behaviour (same recipe as flashinfer-bench ``Solution.hash``)."""
        h = hashlib.sha1()
        parts = [
            self.definition,
            self.spec.language.value,
            self.spec.entry_point,
            self.spec.binding.value if self.spec.binding else "",
            *self.spec.dependencies,
        ]
        for src in self.sources:
            parts += [src.path, src.content]
        for part in parts:
            h.update(part.encode())
        return h.hexdigest()

    @classmethod
    def from_folder(
        cls,
        folder: Path,
        *,
        name: str,
        definition: str,
        author: str,
        language: SupportedLanguage | str,
        entry_point: str,
        destination_passing_style: bool = True,
        target_hardware: Optional[List[str]] = None,
        dependencies: Optional[List[str]] = None,
        description: Optional[str] = None,
        suffixes: tuple = (".py", ".cu", ".cuh", ".cpp", ".h", ".hpp"),
    ) -> "Solution":
        """Pack every source file under ``folder`` (recursively, by suffix) into a Solution."""
        folder = Path(folder)
        sources = [
            SourceFile(path=p.relative_to(folder).as_posix(), content=p.read_text())
            for p in sorted(folder.rglob("*"))
            if p.is_file() and p.suffix in suffixes and "__pycache__" not in p.parts
            and p.read_text().strip()
        ]
        return cls(
            name=name,
            definition=definition,
            author=author,
            spec=BuildSpec(
                language=language,
                target_hardware=target_hardware or ["NVIDIA_H200"],
                entry_point=entry_point,
                destination_passing_style=destination_passing_style,
                dependencies=dependencies or [],
            ),
            sources=sources,
            description=description,
        )

    def write_sources(self, folder: Path) -> Path:
        """Write every source under ``folder``; returns the entry file's path."""
        folder = Path(folder)
        for src in self.sources:
            target = folder / src.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(src.content)
        return folder / self.spec.entry_file
