"""Workload: concrete var-axis values and how each input is obtained.

Schema: flashinfer-bench ``flashinfer_bench/data/workload.py``.  On disk a workload is a
workload-only Trace, one per JSONL line.
"""

from __future__ import annotations

from typing import Annotated, Dict, Literal, Optional, Union

from pydantic import BaseModel, Field, model_serializer


class RandomInput(BaseModel):
    """Drawn at random per trial (float: randn; fp8: randn clamped to +-2 then cast; int: randint)."""

    type: Literal["random"] = "random"


class ScalarInput(BaseModel):
    """A Python scalar passed as-is."""

    type: Literal["scalar"] = "scalar"
    value: Union[bool, int, float]


class SafetensorsInput(BaseModel):
    """A tensor loaded from a safetensors file; ``path`` is relative to the TraceSet root.

    ``sha256`` is kernelwright's addition (flashinfer-bench ignores it on load): the file's
    SHA-256 as the run found it before any solution ran (``definitions.fixed.pin_workloads``); the
    gate refuses a file whose content no longer matches.  None in upstream files."""

    type: Literal["safetensors"] = "safetensors"
    path: str = Field(min_length=1)
    tensor_key: str = Field(min_length=1)
    sha256: Optional[str] = None

    @model_serializer(mode="wrap")
    def _upstream_shape(self, handler):
        """Without a pin the JSON is exactly upstream's (no ``"sha256": null``)."""
        data = handler(self)
        if data.get("sha256") is None:
            data.pop("sha256", None)
        return data


InputSpec = Annotated[Union[RandomInput, SafetensorsInput, ScalarInput], Field(discriminator="type")]


class Workload(BaseModel):
    """One benchmarkable instance of a definition."""

    axes: Dict[str, Annotated[int, Field(ge=0)]]
    inputs: Dict[str, InputSpec]
    uuid: str = Field(min_length=1)
