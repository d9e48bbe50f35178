"""The files of the vllm 0.20.0 wheel that the ``moe_vllm_triton`` baseline imports at run time.

Nothing else of vLLM is loaded: the modules these files import but the Triton fused-MoE path never
uses, and vLLM's compiled ops (``_C``, ``_moe_C``), are kernelwright stand-ins
(``vllm_fused_moe.py``, ``standin_ops.py``).  ``scripts/fetch-vllm-moe.sh`` extracts exactly these
paths into ``.whl/vllm-extract`` (it runs this file to read them); ``kernelwright.baselines`` checks
they are there before it offers the baseline.  No imports here: the fetch script and the
availability check read this file without torch.
"""

VLLM_VERSION = "0.20.0"

H200_CONFIG = ("vllm/model_executor/layers/fused_moe/configs/"
               "E=32,N=2048,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json")

WHEEL_FILES = (
    "vllm/envs.py",                                                 # environment flags, read as vLLM reads them
    "vllm/scalar_type.py",                                          # imported by quant_utils
    "vllm/utils/math_utils.py",                                     # cdiv, round_up
    "vllm/model_executor/utils.py",                                 # maybe_disable_graph_partition (grouped_topk)
    "vllm/model_executor/layers/fused_moe/fused_moe.py",            # fused_moe_kernel, invoke/dispatch, configs
    "vllm/model_executor/layers/fused_moe/moe_align_block_size.py",  # the alignment wrapper (op: stand-in)
    "vllm/model_executor/layers/fused_moe/activation.py",           # MoEActivation (imported by fused_moe.py)
    "vllm/model_executor/layers/fused_moe/utils.py",                # moe_kernel_quantize_input, _resize_cache
    "vllm/model_executor/layers/fused_moe/router/grouped_topk_router.py",  # grouped_topk, fused_grouped_topk
    "vllm/model_executor/layers/quantization/utils/fp8_utils.py",   # per_token_group_quant_fp8 (Triton)
    "vllm/model_executor/layers/quantization/utils/quant_utils.py",  # get_fp8_min_max, QuantKey
    H200_CONFIG,                                                    # the tuned H200 config of this definition
)

if __name__ == "__main__":
    print("\n".join(WHEEL_FILES))
