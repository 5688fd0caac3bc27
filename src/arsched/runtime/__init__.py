"""Schedules outside the simulator: run on real processes with torch.distributed, and MSCCL XML
out and in. torch is imported only when a schedule is run."""

from arsched.runtime.executor import Execution, run_schedule, run_schedules
from arsched.runtime.msccl_export import save_xml, to_xml
from arsched.runtime.msccl_format import MscclFormatError
from arsched.runtime.msccl_import import from_xml, load_xml
from arsched.runtime.rank import Fault
from arsched.runtime.watch import ExecutionError

__all__ = [
    "Execution",
    "ExecutionError",
    "Fault",
    "MscclFormatError",
    "from_xml",
    "load_xml",
    "run_schedule",
    "run_schedules",
    "save_xml",
    "to_xml",
]
