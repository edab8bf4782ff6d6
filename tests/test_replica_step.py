"""The step split over replicas of the network: the gradient of the whole batch, replicas kept in step, reproducible."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from grasp_s2r.replica_step import MIN_SLICE, ReplicaStep
from grasp_s2r.train_speed import step_replicas
from grasp_s2r.vision.networks.model import build_model
from grasp_s2r.vision.training.train_config import segmentation_loss


def _bce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits, target)


def _batch(n: int, side: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, side, side, generator=g), (torch.rand(n, 1, side, side, generator=g) > 0.9).float()


def test_replicas_give_the_gradient_of_the_whole_batch_for_a_network_without_batch_statistics():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))
    x, y = _batch(40)  # 40 over 3 replicas: slices of 14, 13, 13 (weighted by size)
    whole = ReplicaStep(net, 1, _bce)
    loss_whole = whole(x, y)
    grads_whole = [p.grad.clone() for p in net.parameters()]
    split = ReplicaStep(net, 3, _bce)
    loss_split = split(x, y)
    split.close()
    assert abs(loss_split - loss_whole) < 1e-6
    for g_whole, p in zip(grads_whole, net.parameters()):
        assert torch.allclose(p.grad, g_whole, atol=1e-6, rtol=1e-5)


def test_replicas_take_the_models_weights_and_buffers_before_each_step_and_steps_are_reproducible():
    def run() -> list[torch.Tensor]:
        torch.manual_seed(1)
        model = build_model("unet", width=4, depth=2)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        step = ReplicaStep(model, 2, lambda logits, t: segmentation_loss(logits, t, 1.0))
        for i in range(3):
            step(*_batch(16, seed=i))
            opt.step()
        step(*_batch(16, seed=9))  # the sync happens at the start of a step: the replica holds the model's weights
        for mine, theirs in zip(step.replicas[1].parameters(), model.parameters()):
            assert torch.equal(mine, theirs)
        step._sync(2)  # ... and its buffers (BatchNorm's running statistics, which each slice's forward moved)
        for mine, theirs in zip(step.replicas[1].state_dict().values(), model.state_dict().values()):
            assert torch.equal(mine, theirs)
        step.close()
        return [p.detach().clone() for p in model.parameters()]

    first, second = run(), run()
    assert all(torch.equal(a, b) for a, b in zip(first, second))


def test_small_batches_are_not_split_below_the_minimum_slice():
    torch.manual_seed(0)
    net = nn.Conv2d(3, 1, 1)
    step = ReplicaStep(net, 4, _bce)
    calls = []
    original = step._forward_backward
    step._forward_backward = lambda k, x, y: (calls.append((k, len(x))), original(k, x, y))[1]
    step(*_batch(2 * MIN_SLICE + 1))
    assert sorted(calls) == [(0, MIN_SLICE + 1), (1, MIN_SLICE)]
    step.close()


def test_replicas_by_default_one_per_cpu_core_and_one_with_threads_or_an_accelerator(monkeypatch):
    monkeypatch.setattr("grasp_s2r.train_speed.available_cores", lambda: 2)
    assert step_replicas(torch.device("cpu"), None, None) == 2
    assert step_replicas(torch.device("cpu"), 2, None) == 1  # --threads: torch's own threads, one replica
    assert step_replicas(torch.device("cuda"), None, None) == 1
    assert step_replicas(torch.device("cpu"), None, 3) == 3
