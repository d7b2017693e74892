"""Solve time of the Gaussian W-DRO linear regression (Farokhi 2020 §4): Theorem 6's SDP vs the
equivalent SOCP (the default), on one synthetic problem, in the same run, and how far apart their
solutions are (relative objective gap, largest coefficient difference). Prints a table; no files.

    python benchmarks/bench_dro_sdp.py                  # p_x = 30, n = 1000 (~1 min)
    python benchmarks/bench_dro_sdp.py --p 10 --repeats 5
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # BLAS threads only add overhead here
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from fedrr.datasets import make_linear_gaussian  # noqa: E402
from fedrr.estimators import GaussianDROLinearRegression  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--p", type=int, default=30, help="number of inputs p_x (default 30)")
    ap.add_argument("--n", type=int, default=1000, help="number of training rows (default 1000)")
    ap.add_argument("--repeats", type=int, default=5, help="timed SOCP fits per radius (median reported)")
    ap.add_argument("--sdp-repeats", type=int, default=1, help="timed SDP fits per radius (median reported)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    data = make_linear_gaussian(args.n, rng.normal(size=args.p), intercept=1.0, noise_std=0.5, rng=rng)
    # inputs noised as by a Gaussian mechanism (σ = 1 per coordinate): ρ = √p_x · σ is the auto radius
    X = data.X + rng.normal(size=data.X.shape)
    radii = {"small (0.1)": 0.1, f"auto-like (√p_x = {math.sqrt(args.p):.2f})": math.sqrt(args.p), "large (300)": 300.0}
    print(
        f"Gaussian W-DRO linear regression, p_x = {args.p}, n = {args.n}; median of {args.sdp_repeats} SDP "
        f"and {args.repeats} SOCP fits (each fit includes building the cvxpy problem)"
    )
    print(f"{'radius':<28}{'SDP [s]':>10}{'SOCP [s]':>10}{'ratio':>9}{'|Δobj|/obj':>12}{'max|Δcoef|':>12}")
    for label, rho in radii.items():
        times, fits = {}, {}
        for method in ("sdp", "socp"):
            ts = []
            for _ in range(args.sdp_repeats if method == "sdp" else args.repeats):
                t0 = time.perf_counter()
                fits[method] = GaussianDROLinearRegression(rho=rho, method=method).fit(X, data.y)
                ts.append(time.perf_counter() - t0)
            times[method] = statistics.median(ts)
        d_obj = abs(fits["sdp"].objective_ - fits["socp"].objective_) / fits["socp"].objective_
        d_coef = float(np.max(np.abs(fits["sdp"].coef_ - fits["socp"].coef_)))
        print(
            f"{label:<28}{times['sdp']:>10.3f}{times['socp']:>10.4f}{times['sdp'] / times['socp']:>8.0f}x"
            f"{d_obj:>12.1e}{d_coef:>12.1e}"
        )


if __name__ == "__main__":
    main()
