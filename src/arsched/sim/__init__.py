"""Simulators: the round model of the RL paper and a continuous max-min flow model."""

from arsched.defaults import DEFAULT_ALPHA
from arsched.sim.flow import simulate_flow
from arsched.sim.result import SimResult
from arsched.sim.rounds import RoundEngine, simulate_rounds

__all__ = ["DEFAULT_ALPHA", "RoundEngine", "SimResult", "simulate_flow", "simulate_rounds"]
