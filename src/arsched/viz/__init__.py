"""Plots of topologies and simulations (matplotlib, written as PNG files)."""
