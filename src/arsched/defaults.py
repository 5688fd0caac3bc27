"""Model defaults that several layers share, each defined once and imported where it is used."""

from __future__ import annotations

DEFAULT_ALPHA = 5e-6
"""Seconds of fixed overhead per transfer (a runtime's per-message cost) in the flow model; the
round model of the hierarchical-RL paper has none. The cluster model charges it per ring step."""

MODELS = ("flow", "rounds")
"""The two simulators: continuous max-min flow sharing, and the paper's synchronous rounds."""


def default_alpha(model: str) -> float:
    """The per-transfer overhead a simulation in `model` uses when the user gives none."""
    return DEFAULT_ALPHA if model == "flow" else 0.0
