"""Capture four calls of spread's compiled E-step kernel (``rr_chain``) at MNIST size from a short
fit on the bench's data (bench_spread_em.py), for ``bench16b.py``.

    PYTHONPATH=<tree> python capture.py   # writes /tmp/kx/args.pkl
"""

import pickle
import warnings
from pathlib import Path

import numpy as np

import fedrr.estimators.spread._kernels as kernels
from fedrr.datasets import load_mnist_7_vs_9, train_test_split_per_class
from fedrr.estimators import SpreadLogisticRegression
from fedrr.io import rng_for
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.parallel import SerialExecutor

warnings.filterwarnings("ignore")
ds = load_mnist_7_vs_9()
rng = rng_for(0, 77)
train, test = train_test_split_per_class(ds, 400, 100, rng)
idx = rng.integers(0, train.X.shape[0], 9000)
X, y = train.X[idx], train.y[idx]
rm = RecordMechanism(RandomizedResponse(256, 0.3), RandomizedResponse(2, 0.3), n_features=X.shape[1])
Xt, yt = rm.release(X, y, rng=rng)
orig = kernels.rr_chain
saved = []


def wrap(*a):
    if len(saved) < 40:
        saved.append([x.copy() if isinstance(x, np.ndarray) else x for x in a])
    return orig(*a)


kernels.rr_chain = wrap
SpreadLogisticRegression(random_state=0, executor=SerialExecutor(), max_iter=12).fit(Xt, yt, mechanism=rm)
Path("/tmp/kx").mkdir(exist_ok=True)
with open("/tmp/kx/args.pkl", "wb") as f:
    pickle.dump(saved[-4:], f)  # iteration 8's calls: b 2,048, D 784, K 256, S 1
