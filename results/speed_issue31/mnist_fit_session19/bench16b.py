import pickle, time, sys, numpy as np
import fedrr.estimators.spread._kernels as K
calls = pickle.load(open("/tmp/kx/args.pkl", "rb"))
def conv(a, dt):
    a = list(a)
    for i in (1, 3, 20): a[i] = a[i].astype(dt)
    return a
sets = {"int32": [conv(a, np.int32) for a in calls], "int16": [conv(a, np.int16) for a in calls]}
for cs in sets.values(): K.rr_chain(*cs[0])
ts = {k: [] for k in sets}
for rep in range(15):
    for k, cs in sets.items():
        t = time.perf_counter()
        for a in cs: K.rr_chain(*a)
        ts[k].append((time.perf_counter() - t) / len(cs) * 1e3)
for k, v in ts.items(): print(k, "median ms/call %.2f" % np.median(v), "min %.2f" % min(v))
