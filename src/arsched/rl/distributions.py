"""A vectorised masked MultiBinary distribution for MaskablePPO's upper level.

sb3-contrib's `MaskableBernoulliDistribution` supports MultiBinary masks but builds one torch
`Categorical` per entry on every call: with 64 tree slots that dominated the upper level's
PPO time in a profile (rollout forward, log-probabilities, sampling), far above the
environment step. This is the same distribution — each entry an independent choice of 0 or
1, masks two per entry in the same order — as one (batch, n, 2) categorical, so the weights of
either are interchangeable.

The upper level's network is shared across trees (`TreeRowsExtractor` + `RowHead`): one MLP
embeds each tree's feature row (with the global features appended) and one linear layer scores
each embedding, so the weights do not depend on a tree's slot and one policy runs on any number
of trees up to the padding. The critic reads the embeddings and their mean.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.distributions import MaskableDistribution
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn
from torch.distributions import Categorical

MASKED_LOGIT = -1e8


class TreeRowsExtractor(BaseFeaturesExtractor):
    """(batch, rows·features + globals) → each row's embedding by one shared MLP, then their
    mean: (batch, (rows + 1)·width)."""

    def __init__(self, observation_space: spaces.Box, rows: int, row_features: int, hidden: tuple) -> None:
        self.rows, self.row_features = rows, row_features
        self.globals = int(observation_space.shape[0]) - rows * row_features
        super().__init__(observation_space, (rows + 1) * hidden[-1])
        layers, width = [], row_features + self.globals
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.mlp = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        b = obs.shape[0]
        rows = obs[:, : self.rows * self.row_features].view(b, self.rows, self.row_features)
        glob = obs[:, self.rows * self.row_features :][:, None, :].expand(b, self.rows, self.globals)
        emb = self.mlp(torch.cat([rows, glob], -1))
        return torch.cat([emb.flatten(1), emb.mean(1)], 1)


class RowHead(nn.Module):
    """Two logits per row from that row's embedding, by one linear layer shared by the rows."""

    def __init__(self, rows: int, width: int) -> None:
        super().__init__()
        self.rows, self.width = rows, width
        self.linear = nn.Linear(width, 2)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        rows = latent[:, : self.rows * self.width].view(-1, self.rows, self.width)
        return self.linear(rows).flatten(1)


class BatchedMaskableBernoulli(MaskableDistribution):
    """n independent masked binary choices as one batched categorical; the logits come from
    `RowHead` over a latent of (n + 1) row embeddings."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self._logits: torch.Tensor | None = None

    def proba_distribution_net(self, latent_dim: int) -> nn.Module:
        return RowHead(self.n, latent_dim // (self.n + 1))

    def proba_distribution(self, action_logits: torch.Tensor) -> BatchedMaskableBernoulli:
        self._logits = action_logits.view(-1, self.n, 2)
        self.distribution = Categorical(logits=self._logits, validate_args=False)
        return self

    def apply_masking(self, masks: np.ndarray | torch.Tensor | None) -> None:
        logits = self._logits
        if masks is not None:
            m = torch.as_tensor(masks, dtype=torch.bool, device=logits.device).view(-1, self.n, 2)
            logits = torch.where(m, logits, torch.full_like(logits, MASKED_LOGIT))
        self.distribution = Categorical(logits=logits, validate_args=False)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return self.distribution.log_prob(actions.long().view(-1, self.n)).sum(1)

    def entropy(self) -> torch.Tensor:
        return self.distribution.entropy().sum(1)

    def sample(self) -> torch.Tensor:
        return self.distribution.sample()

    def mode(self) -> torch.Tensor:
        return self.distribution.probs.argmax(-1)

    def actions_from_params(self, action_logits: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        self.proba_distribution(action_logits)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(self, action_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        actions = self.actions_from_params(action_logits)
        return actions, self.log_prob(actions)


class HrlPolicy(MaskableActorCriticPolicy):
    """MaskablePPO's actor-critic with the batched distribution for MultiBinary actions."""

    def _build(self, lr_schedule) -> None:
        if isinstance(self.action_space, spaces.MultiBinary):
            self.action_dist = BatchedMaskableBernoulli(int(self.action_space.n))
        super()._build(lr_schedule)
