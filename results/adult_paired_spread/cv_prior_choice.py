"""Would the CV's held-out likelihood choose the prior as validation accuracy does? One pair per
client (the planner's release at eps <= 4), 80 % of adult.data released (seed 0), 20 % clean validation.

    python results/adult_paired_spread/cv_prior_choice.py 2,4      # output: cv_prior_choice.txt"""

import sys
import time

import numpy as np

from fedrr.datasets import load
from fedrr.estimators import SpreadLogisticRegressionCV
from fedrr.mechanisms import PairedRecordMechanism

ds = load("adult_binned")
ks = ds.schema.states()
test = ds.extra["is_test"]
Xtr, ytr = ds.X[~test].astype(int), ds.y[~test]
val = np.random.default_rng(2026).random(len(ytr)) < 0.2
for eps in [float(e) for e in sys.argv[1].split(",")]:
    mech = PairedRecordMechanism(ks, 2, eps, n_sampled=1)
    rng = np.random.default_rng(np.random.SeedSequence(0, spawn_key=(int(round(eps * 1000)), 1)))
    Xt, yt = mech.release(Xtr[~val], ytr[~val], rng=rng)
    for prior, M in (("naive-bayes", 4), ("latent-class", 8)):
        t = time.perf_counter()
        est = SpreadLogisticRegressionCV(
            Cs=(0.01, 0.1, 1.0, 10.0),
            prior=prior,
            n_latent_classes=M,
            encoding="onehot",
            random_state=0,
            cv_max_iter=40,
        ).fit(Xt, yt, mechanism=mech)
        sc = np.asarray(est.cv_results_["mean_test_score"], float)
        acc = float(np.mean(est.predict(Xtr[val]) == ytr[val]))
        sec = time.perf_counter() - t
        print(f"eps {eps} {prior}/{M}: C {est.C_}, best mean held-out score {np.nanmax(sc):.5f}, ", end="")
        print(f"val acc {acc:.4f} ({sec:.0f} s)", flush=True)
