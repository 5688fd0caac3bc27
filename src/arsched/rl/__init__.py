"""Hierarchical deep-RL AllReduce scheduling (arXiv 2503.21013) on the flow-tree round model.

`state` holds one episode's round state (shared by both levels and by inference), `features`
turns it into fixed-size, size-independent observations, `envs` are the two Gymnasium
environments, `config` holds the training's hyper-parameters (without torch, for the CLI),
`training` alternates MaskablePPO over the two levels, `checkpoint` saves and
loads weights with metadata, `policy` runs a trained pair to a schedule. Only `training`,
`checkpoint` and `policy` import torch.
"""
