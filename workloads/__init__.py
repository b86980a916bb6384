"""gprof-orch's workloads: the registry, the built-in workloads, and the runner process."""

from workloads.registry import Variant, Workload, all_workloads, get, load_file, register

__all__ = ["Variant", "Workload", "all_workloads", "get", "load_file", "register"]
