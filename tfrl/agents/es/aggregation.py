"""Aggregation of ES/ARS results: flat at the driver, or through a tree of aggregator actors.

An iteration has two phases over the same population of antithetic pairs:

1. rounds (`collect_round`): every worker evaluates `perturbations_per_round` pairs; only the
   pairs' returns (two floats each) travel up, and each node remembers which child each pair
   came from (leaves also keep the noise offsets);
2. shaping and reduction: the node at the top shapes all returns into one weight per pair
   (centered ranks for ES, top directions for ARS; tfrl/agents/es/fitness.py), sends each child
   the weights of its own pairs (`weighted_sum`), and every node returns the sum of its
   children's vectors sum_i w_i * noise[offset_i], so one parameter-sized vector comes up
   from each child.

Flat (`num_aggregators: 0`): the driver itself is that one node, with the workers as children:
it receives every worker's offsets, returns and statistics each round. Tree: `num_aggregators`
leaf aggregators (Ray actors) each own a contiguous group of workers; aggregators of
`aggregation_fan_in` children join them level by level under one root aggregator; the driver
calls `root.step` and receives one update vector and one summary, whatever the number of workers.
Pairs are kept in round-major, worker order at every level, so the tree computes exactly the
population (and, with the same seeds, the update) the flat driver does.
"""
from __future__ import annotations

import pickle
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from tfrl import errors
from tfrl.agents.es.es_worker import empty_stats, merge_stats
from tfrl.agents.es.fitness import shape_fitness
from tfrl.agents.es.noise_table import SharedNoiseTable


def received_size(value: Any) -> int:
    """Bytes `value` takes serialised (what crossed the wire into this process)."""
    return len(pickle.dumps(value, protocol=5))


class Aggregator:
    """One node of the aggregation tree. Run as a Ray actor (`ray.remote(Aggregator)`), or
    in the driver as the flat aggregator.

    Args:
      children: ESWorker actor handles (leaf) or Aggregator actor handles.
      leaf: whether the children are workers.
      noise: the shared noise array (leaves rebuild perturbations from offsets).
      dim: number of policy parameters.
    """

    def __init__(self, children: Sequence[Any], leaf: bool, noise: np.ndarray, dim: int):
        self.children, self.leaf, self.dim = list(children), leaf, dim
        self.noise = SharedNoiseTable(noise)
        self.bytes_received = 0
        self._reset()

    def _reset(self) -> None:
        self.owners: List[np.ndarray] = []
        self.offsets: List[np.ndarray] = []
        self.stats = empty_stats()

    def _get(self, refs):
        import ray

        values = ray.get(refs)
        self.bytes_received += received_size(values)
        return values

    def collect_round(self, params_ref: List[Any], num_pairs: int) -> Tuple[np.ndarray, int]:
        """Phase 1 for this subtree: every worker evaluates `num_pairs` pairs around the
        parameters in `params_ref` (a one-element list holding the object-store reference, so
        it is passed down, not copied). Returns (returns [n, 2], env steps of the pairs)."""
        if self.leaf:
            results = self._get([w.do_rollouts.remote(params_ref[0], num_pairs)
                                 for w in self.children])
            parts = []
            for child, result in enumerate(results):
                parts.append(result["returns"])
                self.owners.append(np.full(len(result["returns"]), child))
                self.offsets.append(result["offsets"])
                merge_stats(self.stats, result["stats"])
            return np.concatenate(parts), int(sum(r["stats"]["steps"] for r in results))
        results = self._get([c.collect_round.remote(params_ref, num_pairs) for c in self.children])
        for child, (returns, _) in enumerate(results):
            self.owners.append(np.full(len(returns), child))
        return (np.concatenate([returns for returns, _ in results]),
                int(sum(steps for _, steps in results)))

    def weighted_sum(self, weights: np.ndarray) -> Tuple[np.ndarray, Dict[str, Any]]:
        """Phase 2: sum_i weights[i] * noise[offset_i] over this subtree's pairs (in the order
        `collect_round` returned them) and the subtree's statistics; then forgets the
        iteration.

        Raises:
          InvalidBatchError: a number of weights other than the subtree's number of pairs.
        """
        owners = np.concatenate(self.owners) if self.owners else np.zeros(0, np.int64)
        weights = np.asarray(weights, np.float64)
        if weights.shape != owners.shape:
            raise errors.InvalidBatchError(
                f"aggregator holds {len(owners)} pairs but got {weights.shape} weights")
        if self.leaf:
            offsets = np.concatenate(self.offsets) if self.offsets else np.zeros(0, np.int64)
            vector, stats = self.noise.weighted_sum(weights, offsets, self.dim), self.stats
        else:
            results = self._get([c.weighted_sum.remote(weights[owners == index])
                                 for index, c in enumerate(self.children)])
            vector, stats = np.zeros(self.dim, np.float64), empty_stats()
            for child_vector, child_stats in results:
                vector += child_vector
                merge_stats(stats, child_stats)
        self._reset()
        return vector, stats

    def step(self, params_ref: List[Any], settings: Dict[str, Any]) -> Dict[str, Any]:
        """A whole iteration for the population under this node: rounds until at least
        `episodes_per_batch` perturbed episodes and `train_batch_size` of their env steps,
        then fitness shaping (`shaping`, `num_top`) and the reduction. Returns
        {"direction": sum_i w_i noise_i, "num_pairs", "stats", "bytes_received"} (the bytes
        this node received during the iteration)."""
        self.bytes_received = 0
        all_returns, steps = [], 0
        while True:
            returns, round_steps = self.collect_round(params_ref, settings["perturbations_per_round"])
            all_returns.append(returns)
            steps += round_steps
            pairs = sum(len(r) for r in all_returns)
            if 2 * pairs >= settings["episodes_per_batch"] and steps >= settings["train_batch_size"]:
                break
        returns = np.concatenate(all_returns)
        weights = shape_fitness(returns, settings["shaping"], settings.get("num_top"))
        direction, stats = self.weighted_sum(weights)
        stats["noisy_return_mean"] = float(returns.mean())
        stats["noisy_return_max"] = float(returns.max())
        return {"direction": direction, "num_pairs": len(returns), "stats": stats,
                "bytes_received": self.bytes_received}


def build_tree(workers: Sequence[Any], noise_ref: Any, dim: int, num_aggregators: int,
               fan_in: int) -> Tuple[Any, List[Any]]:
    """Builds the aggregator actors over `workers`; returns (root, every aggregator).

    Raises:
      InvalidConfigError: more aggregators than workers, or a fan-in below 2.
    """
    import ray

    if num_aggregators > len(workers):
        raise errors.InvalidConfigError(
            f"num_aggregators={num_aggregators} exceeds num_workers={len(workers)}; each leaf "
            "aggregator needs at least one worker")
    if fan_in < 2:
        raise errors.InvalidConfigError(f"aggregation_fan_in must be >= 2, got {fan_in}")
    remote = ray.remote(num_cpus=0)(Aggregator)
    groups = np.array_split(np.arange(len(workers)), num_aggregators)
    level = [remote.remote([workers[i] for i in g], True, noise_ref, dim) for g in groups]
    everything = list(level)
    while len(level) > fan_in:
        level = [remote.remote(level[i:i + fan_in], False, noise_ref, dim)
                 for i in range(0, len(level), fan_in)]
        everything += level
    root = remote.remote(level, False, noise_ref, dim)
    return root, everything + [root]
