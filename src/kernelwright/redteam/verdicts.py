"""The red-team runner's verdict labels: what one case or canary came to (not the gate's reason
codes, which ``kernelwright.gate.guards`` names).  No imports, so the worker-side canaries and the
parent-side runner and command share them without loading anything."""

PASS = "PASS"              # every trace passed (for a canary: its tolerance is broken)
REJECT = "REJECT"          # a trace failed; its reasons say why
SUSPICIOUS = "SUSPICIOUS"  # every trace passed, one was marked suspicious
SKIPPED = "SKIPPED"        # not run on this device (CUDA-only, CPU-only, no nonce pinned)
ERROR = "ERROR"            # the runner itself failed on the case or canary
