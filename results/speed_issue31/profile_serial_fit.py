"""cProfile of the bench's MNIST-size spread fit with SerialExecutor (every call on the main thread,
so the profile sees the compiled E-step): bench_spread_em.py's data, random_state 0.

    PYTHONPATH=<tree> python profile_serial_fit.py coef.npy > profile.txt
"""

import cProfile
import pstats
import sys
import time
import warnings

import numpy as np

from fedrr.datasets import load_mnist_7_vs_9, train_test_split_per_class
from fedrr.estimators import SpreadLogisticRegression
from fedrr.io import rng_for
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.parallel import SerialExecutor

warnings.filterwarnings("ignore", category=FutureWarning)
ds = load_mnist_7_vs_9()
rng = rng_for(0, 77)
train, test = train_test_split_per_class(ds, 400, 100, rng)
idx = rng.integers(0, train.X.shape[0], 9000)
X, y = train.X[idx], train.y[idx]
K, D = 256, X.shape[1]
rm = RecordMechanism(RandomizedResponse(K, 0.3), RandomizedResponse(2, 0.3), n_features=D)
Xt, yt = rm.release(X, y, rng=rng)
SpreadLogisticRegression(max_iter=2, random_state=0).fit(Xt[:200], yt[:200], mechanism=rm)  # warm-up (numba)
t = time.perf_counter()
pr = cProfile.Profile()
pr.enable()
est = SpreadLogisticRegression(random_state=0, executor=SerialExecutor()).fit(Xt, yt, mechanism=rm)
pr.disable()
print("wall", time.perf_counter() - t, "iters", est.n_iter_)
np.save(sys.argv[1], np.concatenate([est.coef_.ravel(), est.intercept_]))
st = pstats.Stats(pr)
st.sort_stats("cumulative").print_stats(40)
st.sort_stats("tottime").print_stats(25)
