"""Calibration inside a plain PyTorch evaluation loop, with fastcal.torch.CalibrationMetric.

A small 3-class network is trained for a few epochs on overlapping Gaussian
blobs; after each epoch the evaluation loop feeds its logits, batch by batch,
to a ``CalibrationMetric`` and logs ECD, ECE and the ECD test's verdict. The
metric keeps a few kilobytes of per-bin sums whatever the size of the
evaluation set (under DDP the same code sums them over the processes), and its
report equals ``fastcal.calibration_report`` on all the logits at once, which
the example checks at the end.

Swapping torchmetrics' metric for it is one line::

    # metric = torchmetrics.classification.MulticlassCalibrationError(num_classes=3)
    metric = CalibrationMetric("multiclass", num_classes=3, logits=True)

Usage: python examples/torch_eval_loop.py OUT_DIR [--small]
"""

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

import fastcal
from fastcal.torch import CalibrationMetric

K = 3


def blobs(n, seed):
    """n points of K overlapping 2-D Gaussian blobs and their labels."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, K, (n,), generator=g)
    centres = torch.tensor([[0.0, 0.0], [1.5, 0.0], [0.75, 1.3]])
    return centres[y] + torch.randn(n, 2, generator=g), y


def evaluate(model, x, y, metric, batch_size):
    """The evaluation loop: logits batch by batch into the metric; returns its report."""
    metric.reset()
    model.eval()
    with torch.no_grad():
        for a in range(0, len(y), batch_size):
            metric.update(model(x[a:a + batch_size]), y[a:a + batch_size])
    return metric.report()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--small", action="store_true", help="fewer rows and epochs (tests)")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    n_train, n_eval, epochs = (2_000, 20_000, 3) if args.small else (20_000, 1_000_000, 5)
    x_train, y_train = blobs(n_train, seed=1)
    x_eval, y_eval = blobs(n_eval, seed=2)
    model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, K))
    optimiser = torch.optim.Adam(model.parameters(), lr=0.05)
    metric = CalibrationMetric("multiclass", num_classes=K, logits=True, n_bins=15, ci=0.95)
    log = []
    for epoch in range(1, epochs + 1):
        model.train()
        for a in range(0, n_train, 100):
            optimiser.zero_grad()
            loss = nn.functional.cross_entropy(model(x_train[a:a + 100]), y_train[a:a + 100])
            loss.backward()
            optimiser.step()
        rep = evaluate(model, x_eval, y_eval, metric, batch_size=1_000)
        lo, hi = rep.intervals["ecd"]
        accuracy = np.nansum(rep.bins["count"] * rep.bins["accuracy"]) / rep.n
        print(f"epoch {epoch}: accuracy {accuracy:.3f}  ECD {rep.ecd:+.4f} "
              f"(95% CI {lo:+.4f} .. {hi:+.4f})  ECE {rep.ece:.4f}  verdict: {rep.verdict}")
        log.append({"epoch": epoch, "accuracy": accuracy, "ecd": rep.ecd, "ece": rep.ece,
                    "verdict": rep.verdict, "n": rep.n})

    # the metric's report is the one of all the logits at once
    with torch.no_grad():
        logits = model(x_eval)
    ref = fastcal.calibration_report(y_eval.numpy(), logits.numpy(), logits=True, n_bins=15,
                                     ace=False)
    same = bool(rep.n == ref.n and np.array_equal(rep.bins["count"], ref.bins["count"])
                and np.isclose(rep.ecd, ref.ecd, rtol=1e-12, atol=0)
                and np.isclose(rep.ece, ref.ece, rtol=1e-12, atol=1e-15))
    state = sum(x.nbytes for x in metric.metric_state.values())
    print(f"state: {state:,} bytes for {rep.n:,} predictions; "
          f"matches calibration_report on all rows: {same}")
    (args.out_dir / "torch_eval_loop.json").write_text(
        json.dumps({"epochs": log, "state_bytes": state, "matches_report": same}, indent=2))


if __name__ == "__main__":
    main()
