"""Where does the spread learner's fit at scale spend its time? TwoBudgetSyntheticPopulation's pool."""

import cProfile
import pstats
import sys
import time

import numpy as np

from fedrr.estimators import SpreadLogisticRegressionCV
from fedrr.examples import TwoBudgetSyntheticPopulation

n = int(sys.argv[1])
pop = TwoBudgetSyntheticPopulation(n_clients=n, seed=0, n_test=2000)
rng = np.random.default_rng(1)
mechs = [pop.mechanism(i) for i in range(n)]
Xt = np.empty((n, 5))
yt = np.empty(n)
for b, rm in enumerate(pop.budgets):
    rows = np.arange(b, n, 2)
    Xt[rows], yt[rows] = rm.release(pop.X[rows], pop.y[rows], rng=rng)
est = SpreadLogisticRegressionCV(Cs=(0.01, 0.1, 1.0, 10.0), random_state=0, max_iter=200, cv_max_iter=40)
pr = cProfile.Profile()
t = time.perf_counter()
pr.enable()
est.fit(Xt, yt, mechanism=mechs)
pr.disable()
print(f"whole fit {time.perf_counter() - t:.1f} s; p {est.p_value_}; C {est.C_}; acc {est.score(*pop.test_set()):.3f}")
st = pstats.Stats(pr)
st.sort_stats("cumulative").print_stats(
    r"_cv|_cv_scores|_estimator|permutation|heldout|_em\.py|run_em|group_records|label_blocks", 30
)
