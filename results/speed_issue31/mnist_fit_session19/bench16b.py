"""One E-step kernel call with int32 and with int16 states, alternating (the part; ``capture.py``
first): the same calls, the same outputs, 15 repeats; median and min ms per call.

    PYTHONPATH=<tree> python bench16b.py
"""

import pickle
import time

import numpy as np

import fedrr.estimators.spread._kernels as kernels

with open("/tmp/kx/args.pkl", "rb") as f:
    calls = pickle.load(f)


def with_states(args, dtype):
    args = list(args)
    for i in (1, 3, 20):  # xtT, stateT, new_stateT
        args[i] = args[i].astype(dtype)
    return args


sets = {"int32": [with_states(a, np.int32) for a in calls], "int16": [with_states(a, np.int16) for a in calls]}
for cs in sets.values():
    kernels.rr_chain(*cs[0])  # compile
ts = {k: [] for k in sets}
for _ in range(15):
    for k, cs in sets.items():
        t = time.perf_counter()
        for a in cs:
            kernels.rr_chain(*a)
        ts[k].append((time.perf_counter() - t) / len(cs) * 1e3)
for k, v in ts.items():
    print(k, f"median ms/call {np.median(v):.2f}", f"min {min(v):.2f}")
