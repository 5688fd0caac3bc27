"""The policy networks' forward pass in numpy: what every episode runs, so that `hrl` needs no
torch (importing it was most of `hrl`'s time on small networks, and every `auto` search paid
it) and training and inference decide by the same code.

A `Frozen` policy holds both networks' weights as arrays, named as the torch modules of
`nets` name them (`options.0.weight`, ..., `flow_up.1.2.bias`), and computes what their
`forward` does: an MLP is Linear layers (`<prefix>.<2i>.weight`, `.bias`) with a ReLU between
them; the lower network embeds flows and links, then `layers` times every link takes the mean
and max of its flows' embeddings and every flow the max of its links', and a head scores each
flow (see `nets`). Float32 as in torch; sums may differ from torch's in the last bits.
`shapes` says which arrays a network of a given size has (a test holds it to `nets`), so a
checkpoint that does not fit is refused before it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from arsched.rl.episode import FLOW_FEATURES, LINK_FEATURES, OPTION_FEATURES, TREE_FEATURES, RoundGraph

Weights = dict[str, np.ndarray]
_FAR = np.float32(-1e9)  # the max over no neighbours, as nets' scatter_reduce starts from


def _mlp_shapes(prefix: str, sizes: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for i in range(len(sizes) - 1):
        out[f"{prefix}.{2 * i}.weight"] = (sizes[i + 1], sizes[i])
        out[f"{prefix}.{2 * i}.bias"] = (sizes[i + 1],)
    return out


def shapes(hidden: int, layers: int) -> dict[str, dict[str, tuple[int, ...]]]:
    """Every weight array's shape, by level (upper, lower), of networks `hidden` wide with
    `layers` rounds of message passing."""
    h = hidden
    upper = _mlp_shapes("options", (OPTION_FEATURES, h, h, 1)) | _mlp_shapes(
        "trees", (TREE_FEATURES, h, h, 1)
    )
    lower = _mlp_shapes("flow_in", (FLOW_FEATURES, h, h)) | _mlp_shapes("link_in", (LINK_FEATURES, h, h))
    for i in range(layers):
        lower |= _mlp_shapes(f"link_up.{i}", (3 * h, h, h)) | _mlp_shapes(f"flow_up.{i}", (2 * h, h, h))
    return {"upper": upper, "lower": lower | _mlp_shapes("head", (h, h, 1))}


def mlp(w: Weights, prefix: str, x: np.ndarray) -> np.ndarray:
    """The MLP `prefix` of `w` applied to the rows of `x`."""
    i = 0
    while True:
        x = x @ w[f"{prefix}.{i}.weight"].T + w[f"{prefix}.{i}.bias"]
        i += 2
        if f"{prefix}.{i}.weight" not in w:
            return x
        x = np.maximum(x, 0)


def _segments(index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges sorted by `index` (stably), the targets that have edges, and where each one's
    run of edges starts: what `np.add.reduceat` and `np.maximum.reduceat` need."""
    order = np.argsort(index, kind="stable")
    present, starts = np.unique(index[order], return_index=True)
    return order, present, starts


def _reduce(msg: np.ndarray, seg: tuple[np.ndarray, np.ndarray, np.ndarray], size: int, ufunc) -> np.ndarray:
    """`ufunc` (add or maximum) of the rows of `msg` per target, `_FAR` (max) or 0 (sum) where
    a target has none."""
    order, present, starts = seg
    out = np.full((size, msg.shape[1]), _FAR if ufunc is np.maximum else 0, dtype=msg.dtype)
    if len(order):
        out[present] = ufunc.reduceat(msg[order], starts, axis=0)
    return out


def flow_scores(w: Weights, layers: int, g: RoundGraph) -> np.ndarray:
    """The lower network's score of every flow of the round graph `g`."""
    hf = mlp(w, "flow_in", np.asarray(g.x_flow, dtype=np.float32))
    hl = mlp(w, "link_in", np.asarray(g.x_link, dtype=np.float32))
    ef, el = g.edge_flow, g.edge_link
    by_link, by_flow = _segments(el), _segments(ef)
    degree = np.maximum(np.bincount(el, minlength=len(hl)), 1).astype(np.float32)[:, None]
    for i in range(layers):
        msg = hf[ef]
        mean = _reduce(msg, by_link, len(hl), np.add) / degree
        top = _reduce(msg, by_link, len(hl), np.maximum)
        hl = hl + mlp(w, f"link_up.{i}", np.concatenate([hl, mean, top], 1))
        back = _reduce(hl[el], by_flow, len(hf), np.maximum)
        hf = hf + mlp(w, f"flow_up.{i}", np.concatenate([hf, back], 1))
    return mlp(w, "head", hf)[:, 0]


@dataclass(frozen=True)
class Frozen:
    """Both networks' weights (`upper`, `lower`), `layers` rounds of message passing, and the
    `temperature` that divides both levels' logits (it sharpens sampled choices, not the mode) and
    the `explore` floor of sampled decisions (`release`, `choice_probs`)."""

    upper: Weights
    lower: Weights
    layers: int
    temperature: float = 1.0
    explore: float = 0.0

    def frozen(self) -> Frozen:
        """Itself: what an episode runs (`nets.Policy.frozen` copies torch's weights into one)."""
        return self

    def option_logits(self, rows: np.ndarray, kind: str) -> np.ndarray:
        """The logits of an upper-level choice among option rows (`kind` chunks or tree)."""
        net = "options" if kind == "chunks" else "trees"
        return mlp(self.upper, net, np.asarray(rows, dtype=np.float32))[:, 0] / np.float32(self.temperature)

    def round_scores(self, g: RoundGraph) -> np.ndarray:
        """The logits of the round's release decisions (`release`)."""
        return flow_scores(self.lower, self.layers, g) / np.float32(self.temperature)


def go_probability(scores: np.ndarray, explore: float) -> np.ndarray:
    """Each flow's probability of going now (see `release`)."""
    return (1 - explore) * expit(scores) + explore / 2


def choice_probs(logits: np.ndarray, explore: float) -> np.ndarray:
    """An upper-level choice's probabilities: the softmax of the logits with the `explore`
    floor, (1 − explore)·softmax + explore/K over K options (the mode is the softmax's)."""
    p = np.exp(logits - logits.max())
    return (1 - explore) * p / p.sum() + explore / len(p)


def release(scores: np.ndarray, rng: np.random.Generator | None, explore: float = 0.0) -> np.ndarray:
    """Which flows of a round go now: each independently with probability
    (1 − explore)·sigmoid(score) + explore/2 (rng None: the policy's mode, every positive
    score); if none would, the highest-scored flow alone (the first at ties), so every round
    makes progress. The probability of the result is `nets.release_log_prob`'s. The floor keeps
    sampling alive after imitation: the warm start drives scores so far apart that samples
    without it replayed the teacher and training had nothing to compare (bench_rl)."""
    go = scores > 0 if rng is None else rng.random(len(scores)) < go_probability(scores, explore)
    if not go.any():
        go[int(np.argmax(scores))] = True
    return go
