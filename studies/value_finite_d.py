"""The finite-``d`` offset of the trained value gain (docs/questions.md Q3): GD at ``d = 300``,
``alpha = 1.25``, seeds 0-1, both informed starts, with the trainable gain; prints the trained
``v``, the least-squares gain ``sum <S x, y> / sum ||S x||^2`` at the trained ``Q`` (equal to ``v``
at convergence) and the same with the positional part ``Pi / sqrt(d)`` of the tokens removed
from the denominator (the ``O(1/d)`` term that the ``d -> inf`` limit of docs/model.md (6.5)
drops).

    python studies/value_finite_d.py
"""
import math

import torch

from attnphase.sim.data import make_dataset, n_samples
from attnphase.sim.models import project
from attnphase.sim.train import TrainSettings, init_params, stack_batch, train
from attnphase.spec.problem import ModelSpec


def main() -> None:
    torch.set_num_threads(1)
    spec, d, alpha = ModelSpec(value="gain"), 300, 1.25
    ds = [make_dataset(spec, d, n_samples(alpha, d), s, dtype=torch.float32) for s in (0, 1)]
    b = stack_batch(ds)
    st = TrainSettings(max_steps=10000, tol=1e-5, dtype="float32", log_every=0)
    res = train(spec, b, init_params(spec, ds, ("semantic", "positional")), st)
    X = b.X.double()
    Pi = torch.stack([dd.Pi for dd in ds]).double()  # (D, L, d)
    Z = X - Pi[:, None] / math.sqrt(d)
    H = project(X, res.params["P"].double()) / math.sqrt(d)
    S = torch.softmax(H @ H.transpose(-1, -2), dim=-1)  # (D,K,n,L,L)

    num = (S * b.Syx[:, None].double()).sum(dim=(-1, -2, -3))
    den = ((S @ b.Sxx[:, None].double()) * S).sum(dim=(-1, -2, -3))
    Szz = Z @ Z.transpose(-1, -2)
    den_z = ((S @ Szz[:, None]) * S).sum(dim=(-1, -2, -3))
    v = res.params["g"].reshape(2, 2).double() / math.sqrt(d)
    print("v trained", v.tolist())
    print("num/den", (num / den).tolist())
    print("num/den_z (positional part of the tokens removed from the denominator)", (num / den_z).tolist())


if __name__ == "__main__":
    main()
