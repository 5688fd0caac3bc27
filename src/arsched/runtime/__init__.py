"""Schedules outside the simulator: run on real processes with torch.distributed, and MSCCL XML
out and in. torch is imported only when a schedule is run."""

from arsched.runtime.executor import ExecutionError, Fault, RunResult, run_schedule, run_schedules
from arsched.runtime.msccl import MscclFormatError, from_xml, load_xml, save_xml, to_xml

__all__ = [
    "ExecutionError",
    "Fault",
    "MscclFormatError",
    "RunResult",
    "from_xml",
    "load_xml",
    "run_schedule",
    "run_schedules",
    "save_xml",
    "to_xml",
]
