"""Errors of the cluster layer that are the user's to fix (printed by the CLI as one line)."""


class ClusterUnavailable(RuntimeError):
    """The requested cluster cannot run jobs (e.g. a Ray cluster without GPU resources)."""
