"""Simulators: the round model of the RL paper and a continuous max-min flow model, for one
schedule or several jobs sharing a network."""

from arsched.defaults import DEFAULT_ALPHA
from arsched.sim.flow import simulate_flow
from arsched.sim.jobs import JobResult, JobsResult, simulate_jobs
from arsched.sim.result import SimResult
from arsched.sim.rounds import RoundEngine, simulate_rounds

__all__ = [
    "DEFAULT_ALPHA",
    "JobResult",
    "JobsResult",
    "RoundEngine",
    "SimResult",
    "simulate_flow",
    "simulate_jobs",
    "simulate_rounds",
]
