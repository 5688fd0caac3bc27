"""The two policy networks in torch (`Policy`), for training, and the exact log-probabilities
of their decisions; episodes run their weights in numpy (`forward`, `Policy.frozen`).

- `RowScorer` (upper level): the same MLP scores every option row (a chunk option, or a tree
  for the next chunk); a decision is a softmax over the rows, so the network does not depend
  on how many options there are.
- `FlowScorer` (lower level): message passing on the bipartite graph of a round's available
  flows and the links they cross (plain torch: `index_add_` and `scatter_reduce`; a round's
  graph has a few hundred nodes, where torch-geometric's batching machinery costs more than it
  saves). Flows and links are embedded, then `layers` times every link takes the mean and max
  of its flows' embeddings and every flow the max of its links'; a linear head scores each
  flow. It is equivariant to any renumbering of flows and links and runs on any graph size.

A round releases each available flow independently with probability sigmoid(score), and the
highest-scored flow alone if that would release none (`forward.release`). So the probability
of a round that released flows R is Π_{i∈R} σ(s_i) Π_{i∉R} σ(−s_i), except where R is the
top-scored flow t alone, which both "only t" and "none" give: Π_{i≠t} σ(−s_i)
(`release_log_prob`), exact and cheap: the policy gradient needs nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from arsched.rl.episode import FLOW_FEATURES, LINK_FEATURES, OPTION_FEATURES, TREE_FEATURES, RoundGraph
from arsched.rl.forward import Frozen


def _mlp(sizes: tuple[int, ...]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class RowScorer(nn.Module):
    """Scores option rows: chunk options (`OPTION_FEATURES` wide) or trees (`TREE_FEATURES`)."""

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.options = _mlp((OPTION_FEATURES, hidden, hidden, 1))
        self.trees = _mlp((TREE_FEATURES, hidden, hidden, 1))

    def forward(self, rows: torch.Tensor, kind: str) -> torch.Tensor:
        net = self.options if kind == "chunks" else self.trees
        return net(rows).squeeze(-1)


class FlowScorer(nn.Module):
    """Scores every flow of a round graph (see the module docstring)."""

    def __init__(self, hidden: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.flow_in = _mlp((FLOW_FEATURES, hidden, hidden))
        self.link_in = _mlp((LINK_FEATURES, hidden, hidden))
        self.link_up = nn.ModuleList(_mlp((3 * hidden, hidden, hidden)) for _ in range(layers))
        self.flow_up = nn.ModuleList(_mlp((2 * hidden, hidden, hidden)) for _ in range(layers))
        self.head = _mlp((hidden, hidden, 1))

    def forward(self, g: RoundGraph) -> torch.Tensor:
        hf = self.flow_in(torch.as_tensor(g.x_flow))
        hl = self.link_in(torch.as_tensor(g.x_link))
        ef, el = torch.as_tensor(g.edge_flow), torch.as_tensor(g.edge_link)
        num_links, width = hl.shape
        degree = torch.bincount(el, minlength=num_links).clamp(min=1).unsqueeze(1).to(hf.dtype)
        for link_up, flow_up in zip(self.link_up, self.flow_up, strict=True):
            msg = hf[ef]
            mean = torch.zeros(num_links, width).index_add_(0, el, msg) / degree
            top = torch.full((num_links, width), -1e9).scatter_reduce(
                0, el.unsqueeze(1).expand(-1, width), msg, "amax"
            )
            hl = hl + link_up(torch.cat([hl, mean, top], 1))
            back = torch.full_like(hf, -1e9).scatter_reduce(
                0, ef.unsqueeze(1).expand(-1, width), hl[el], "amax"
            )
            hf = hf + flow_up(torch.cat([hf, back], 1))
        return self.head(hf).squeeze(-1)


def release_log_prob(
    scores: torch.Tensor,
    released: torch.Tensor,
    lone: torch.Tensor,
    round_of: torch.Tensor,
    rounds: int,
    explore: float = 0.0,
) -> torch.Tensor:
    """log P of each round's release decisions (see the module docstring): `scores` and the
    bool `released` per flow of all the rounds, `round_of` each flow's round, `lone` per
    round whether it released its top-scored flow alone (whose own term then drops out); each
    flow goes with (1 − explore)·σ(s) + explore/2 (`forward.release`)."""
    if explore:
        p = (1 - explore) * torch.sigmoid(scores) + explore / 2
        terms = torch.where(released, torch.log(p), torch.log1p(-p))
    else:
        terms = torch.where(released, F.logsigmoid(scores), F.logsigmoid(-scores))
    terms = terms.masked_fill(released & lone[round_of], 0.0)
    return torch.zeros(rounds, dtype=scores.dtype).index_add_(0, round_of, terms)


def choice_log_probs(logits: torch.Tensor, dim: int, explore: float = 0.0) -> torch.Tensor:
    """log-probabilities of upper-level choices along `dim`: the softmax with the `explore`
    floor (`forward.choice_probs`)."""
    if not explore:
        return torch.log_softmax(logits, dim)
    return torch.log((1 - explore) * torch.softmax(logits, dim) + explore / logits.shape[dim])


@dataclass
class Policy:
    """The two networks of the learned scheduler."""

    upper: RowScorer
    lower: FlowScorer
    temperature: float = 1.0  # of both levels' distributions
    explore: float = 0.0  # their exploration floor (forward.release, forward.choice_probs)

    @classmethod
    def create(
        cls, hidden: int = 64, layers: int = 2, temperature: float = 1.0, explore: float = 0.0
    ) -> Policy:
        """Untrained networks (torch's generator draws the weights)."""
        return cls(RowScorer(hidden), FlowScorer(hidden, layers), temperature, explore)

    def option_logits(self, rows: torch.Tensor, kind: str) -> torch.Tensor:
        """The logits of an upper-level choice: the upper network's scores over the temperature
        (which sharpens the sampled choices, not the policy's mode)."""
        return self.upper(rows, kind) / self.temperature

    def round_scores(self, graph: RoundGraph) -> torch.Tensor:
        """The logits of the round's release decisions, likewise."""
        return self.lower(graph) / self.temperature

    def parameters(self) -> list[torch.nn.Parameter]:
        return [*self.upper.parameters(), *self.lower.parameters()]

    def state(self) -> dict[str, dict]:
        return {"upper": self.upper.state_dict(), "lower": self.lower.state_dict()}

    def frozen(self) -> Frozen:
        """A copy of the weights as arrays, whose numpy forward pass every episode runs."""
        arrays = {
            level: {k: v.detach().numpy().copy() for k, v in w.items()} for level, w in self.state().items()
        }
        layers = len(self.lower.link_up)
        return Frozen(arrays["upper"], arrays["lower"], layers, self.temperature, self.explore)
