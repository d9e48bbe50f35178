"""Workload: concrete var-axis values and how each input is obtained.

Schema: flashinfer-bench ``flashinfer_bench/data/workload.py``.  On disk a workload is a
workload-only Trace, one per JSONL line.
"""

from __future__ import annotations

from typing import Annotated, Dict, Literal, Union

from pydantic import BaseModel, Field


class RandomInput(BaseModel):
    """Drawn at random per trial (float: randn; fp8: randn clamped to +-2 then cast; int: randint)."""

    type: Literal["random"] = "random"


class ScalarInput(BaseModel):
    """A Python scalar passed as-is."""

    type: Literal["scalar"] = "scalar"
    value: Union[bool, int, float]


class SafetensorsInput(BaseModel):
    """A tensor loaded from a safetensors file; ``path`` is relative to the TraceSet root."""

    type: Literal["safetensors"] = "safetensors"
    path: str = Field(min_length=1)
    tensor_key: str = Field(min_length=1)


InputSpec = Annotated[Union[RandomInput, SafetensorsInput, ScalarInput], Field(discriminator="type")]


class Workload(BaseModel):
    """One benchmarkable instance of a definition."""

    axes: Dict[str, Annotated[int, Field(ge=0)]]
    inputs: Dict[str, InputSpec]
    uuid: str = Field(min_length=1)
