"""cProfile of SpreadLogisticRegressionCV at the quickstart's size: 300 MNIST 7/9 records, randomised
response at ε_record = argv[1] split 0.95 / 0.05 as the quickstart, the spread learner's Cs, 3 folds.

    PYTHONPATH=<tree> python profile_cv_fit.py 3000 > profile.txt
"""

import cProfile
import pstats
import sys
import time
import warnings

from fedrr.datasets import load_mnist_7_vs_9, train_test_split_per_class
from fedrr.estimators import SpreadLogisticRegressionCV
from fedrr.io import rng_for
from fedrr.mechanisms import RandomizedResponse, RecordMechanism

warnings.filterwarnings("ignore", category=FutureWarning)
eps = float(sys.argv[1])
n = 300
ds = load_mnist_7_vs_9()
rng = rng_for(0, 77)
train, test = train_test_split_per_class(ds, 400, 100, rng)
idx = rng.choice(train.X.shape[0], n, replace=False)
X, y = train.X[idx], train.y[idx]
K, D = 256, X.shape[1]
rm = RecordMechanism(
    RandomizedResponse(K, epsilon=0.95 * eps / D), RandomizedResponse(2, epsilon=0.05 * eps), n_features=D
)
Xt, yt = rm.release(X, y, rng=rng)


def mk():
    return SpreadLogisticRegressionCV(
        Cs=(0.01, 0.1, 1.0, 10.0), prior="learned", random_state=1, max_iter=200, cv_max_iter=40
    )


mk().set_params(Cs=(1.0,), cv_max_iter=2, max_iter=2).fit(Xt, yt, mechanism=rm)
t = time.perf_counter()
pr = cProfile.Profile()
pr.enable()
est = mk().fit(Xt, yt, mechanism=rm)
pr.disable()
print(
    "wall",
    time.perf_counter() - t,
    "fallback",
    est.fallback_,
    "C",
    est.C_,
    "acc",
    est.score(test.X, test.y),
    "n_iter",
    est.n_iter_,
)
st = pstats.Stats(pr)
st.sort_stats("cumulative").print_stats(45)
st.sort_stats("tottime").print_stats(25)
