import pickle, warnings, numpy as np
warnings.filterwarnings("ignore")
from fedrr.datasets import load_mnist_7_vs_9, train_test_split_per_class
from fedrr.estimators import SpreadLogisticRegression
from fedrr.io import rng_for
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.parallel import SerialExecutor
import fedrr.estimators.spread._kernels as K
ds = load_mnist_7_vs_9()
rng = rng_for(0, 77)
train, test = train_test_split_per_class(ds, 400, 100, rng)
idx = rng.integers(0, train.X.shape[0], 9000)
X, y = train.X[idx], train.y[idx]
rm = RecordMechanism(RandomizedResponse(256, 0.3), RandomizedResponse(2, 0.3), n_features=X.shape[1])
Xt, yt = rm.release(X, y, rng=rng)
orig = K.rr_chain
saved = []
def wrap(*a):
    if len(saved) < 40:
        saved.append([x.copy() if isinstance(x, np.ndarray) else x for x in a])
    return orig(*a)
K.rr_chain = wrap
est = SpreadLogisticRegression(random_state=0, executor=SerialExecutor(), max_iter=12).fit(Xt, yt, mechanism=rm)
print(len(saved), saved[0][1].shape, saved[-1][5], saved[-1][4])
pickle.dump(saved[-4:], open("/tmp/kx/args.pkl", "wb"))
