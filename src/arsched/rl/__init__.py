"""The learned hierarchical AllReduce scheduler (after arXiv 2503.21013), trained on the flow
model's time.

`instance` holds a problem (network, ranks, size) and its library of flow trees per chunk
count; `episode` is one episode's state and the features both levels observe; `nets` the two
networks (an MLP over option rows, message passing over a round's flow–link graph) and the
exact log-probability of a round; `rollout` runs episodes (policy, sampled, greedy teacher,
random) and times them in the flow model; `training` the warm start and group-relative PPO;
`search` the equal-compute search baselines; `checkpoint` saves and loads weights with
metadata; `forward` runs the networks' weights in numpy, as every episode does; `config` the
training's settings (for the CLI); `hrl` the registered algorithm; `env` the same decisions as
a gymnasium environment, for other agents (gymnasium). Only `nets` and `training` import
torch: `hrl` runs without it.
"""
