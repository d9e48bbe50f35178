"""Tensor data types of the FlashInfer-Trace schema and their torch equivalents."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported lazily: the schema itself does not need it
    import torch


class DType(str, Enum):
    """Element types a TensorSpec may name (flashinfer-bench ``DType``)."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT8_E4M3FN = "float8_e4m3fn"
    FLOAT8_E5M2 = "float8_e5m2"
    FLOAT4_E2M1 = "float4_e2m1"
    INT64 = "int64"
    INT32 = "int32"
    INT16 = "int16"
    INT8 = "int8"
    BOOL = "bool"

    @property
    def is_float(self) -> bool:
        return self.value.startswith(("float", "bfloat"))

    @property
    def itemsize(self) -> float:
        """Bytes per element (0.5 for fp4)."""
        return {
            "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
            "float4_e2m1": 0.5, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "bool": 1,
        }[self.value]


def torch_dtype(dtype: DType | str) -> "torch.dtype":
    """The torch dtype for a schema dtype.

    Raises:
        ValueError: the dtype has no torch equivalent in the installed torch.
    """
    import torch

    name = DType(dtype).value
    if name == "float4_e2m1":
        name = "float4_e2m1fn_x2"
    found = getattr(torch, name, None)
    if not isinstance(found, torch.dtype):
        raise ValueError(f"dtype {dtype!s} is not available in torch {torch.__version__}")
    return found
