"""MSCCL XML: the vocabulary that export and import share.

The MSCCL runtime (microsoft/msccl-executor-nccl) runs a collective written as XML: `<algo>`
holds one `<gpu>` per rank, each with thread blocks `<tb>` that execute their `<step>`s in
order. A thread block sends to at most one peer and receives from at most one; each (peer,
channel) is a connection that delivers in order. A step may first wait for a step of another
thread block of the same GPU (`depid` = that block, `deps` = its step); a step others wait for
is marked `hasdep="1"`; a step that must wait for several goes after `nop` steps that carry the
extra waits. The limits below are the runtime's own constants.
"""

from __future__ import annotations

from arsched.errors import ArschedError

PROTOCOLS = ("Simple", "LL", "LL128")
MAX_STEPS_PER_TB = 256  # MSCCL_MAX_NUM_STEPS: the interpreter's limit per thread block
MAX_TBS = 216  # MSCCL_MAX_NUM_THREAD_BLOCKS per gpu (two per A100 SM)
MAX_TBS_PER_CHANNEL = 32  # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL, for sends and for receives
MAX_BYTES = 2**63 - 1  # "every size": the largest int64 the runtime reads for maxBytes

# step type -> (receives, reduces, sends); local ops and nop do none of these
STEP_TYPES = {
    "s": (False, False, True),
    "r": (True, False, False),
    "rrc": (True, True, False),
    "rcs": (True, False, True),
    "rrcs": (True, True, True),
    "rrs": (True, True, True),
    "cpy": (False, False, False),
    "re": (False, False, False),
    "nop": (False, False, False),
}


class MscclFormatError(ArschedError):
    """An MSCCL XML file is malformed or describes something a schedule cannot hold."""
