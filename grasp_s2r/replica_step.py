"""A training step whose batch is split over replicas of the network, one per CPU core, each on its own thread.

The U-Net's step on 32 px crops is made of many small operations: torch's intra-op threads share each of them
between the cores and wait for each other after every one, so a second thread buys little (and less while a data
worker shares the cores). Data parallelism inside one process does not wait: replica ``k`` runs the forward and
backward of the ``k``-th slice of the batch on its own Python thread with one torch thread (the heavy kernels
release the GIL), the gradients are averaged into the model (replica 0), and its optimizer steps. Before each step
the other replicas take the model's weights and buffers. Measured in ``benchmarks/bench_train_vision.py``.

Numerically it is the step of the whole batch but for what depends on the batch as a whole: BatchNorm's batch
statistics and the batch-level Dice are those of each slice (the loss is the slices' mean, weighted by their sizes).
Deterministic: each slice's computation is, and the gradients are summed in a fixed order.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
MIN_SLICE = 8
"""A batch is split over at most ``len(batch) // MIN_SLICE`` replicas: a slice of fewer images makes BatchNorm's
statistics noisy and buys no speed."""


class ReplicaStep:
    """Forward + backward of a batch over ``replicas`` copies of ``model`` (see the module docstring); the caller
    steps the optimizer of ``model``. ``replicas`` 1 is the plain step on the calling thread."""

    def __init__(self, model: nn.Module, replicas: int, loss: Loss, bf16: bool = False):
        if replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {replicas}")
        self.model = model
        self.loss = loss
        self.bf16 = bf16
        self.replicas = [model, *(copy.deepcopy(model) for _ in range(replicas - 1))]
        self._pool = ThreadPoolExecutor(replicas - 1, thread_name_prefix="replica", initializer=torch.set_num_threads,
                                        initargs=(1,)) if replicas > 1 else None

    def _forward_backward(self, k: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        replica = self.replicas[k]
        replica.zero_grad(set_to_none=True)
        with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            logits = replica(x)
        loss = self.loss(logits.float(), y)
        loss.backward()
        return loss.detach()

    @torch.no_grad()
    def _sync(self, n: int) -> None:
        """Replicas 1..n-1 take the model's weights and buffers (BatchNorm's running statistics)."""
        source = list(self.model.parameters()) + list(self.model.buffers())
        for replica in self.replicas[1:n]:
            for mine, theirs in zip(list(replica.parameters()) + list(replica.buffers()), source):
                mine.copy_(theirs)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """The loss of batch (``x``, ``y``) (float), its gradient left in ``model``'s ``.grad``."""
        n = max(1, min(len(self.replicas), len(x) // MIN_SLICE))
        if n == 1:
            return float(self._forward_backward(0, x, y))
        self._sync(n)
        xs, ys = x.tensor_split(n), y.tensor_split(n)
        assert self._pool is not None
        futures = [self._pool.submit(self._forward_backward, k, xs[k], ys[k]) for k in range(1, n)]
        losses = [self._forward_backward(0, xs[0], ys[0]), *(f.result() for f in futures)]
        weights = [len(xk) / len(x) for xk in xs]
        with torch.no_grad():
            for params in zip(*(r.parameters() for r in self.replicas[:n])):
                if params[0].grad is None:
                    continue
                params[0].grad.mul_(weights[0])
                for p, w in zip(params[1:], weights[1:]):
                    params[0].grad.add_(p.grad, alpha=w)
        return float(sum(w * loss for w, loss in zip(weights, losses)))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
