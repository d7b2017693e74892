"""One spread-learner fit (SpreadLogisticRegressionCV as the learner builds it) on
TwoBudgetSyntheticPopulation's pool: python fit_cohort.py N LABEL [--profile] (cProfile's
cumulative times of spread-EM's CV, fits and scores)."""

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
pr = cProfile.Profile() if "--profile" in sys.argv else None
t = time.perf_counter()
c0 = time.process_time()
if pr is not None:
    pr.enable()
est.fit(Xt, yt, mechanism=mechs)
if pr is not None:
    pr.disable()
wall, cpu = time.perf_counter() - t, time.process_time() - c0
acc = est.score(*pop.test_set())
print(f"{sys.argv[2]} n {n}: whole fit {wall:.1f} s wall, {cpu:.1f} s CPU; acc {acc:.4f}; C {est.C_}", flush=True)
if pr is not None:
    pattern = r"_cv|_cv_scores|_estimator|permutation|heldout|_em\.py|run_em|group_records|label_blocks"
    pstats.Stats(pr).sort_stats("cumulative").print_stats(pattern, 30)
