"""Writes configs/data/survey.csv and survey_test.csv: a synthetic survey with known structure, for
the "your own table" tutorial (docs/tutorial/your-own-table.md).

    python configs/data/make_survey.py          # deterministic (seed 2026): the committed files

2,000 + 1,000 people. Numeric age (18–79) and weekly hours (5–70); categorical region (north, south,
east, west), education (school, college, degree) and smoker (no, yes). The label ``buys`` (no, yes)
follows a logistic model: log-odds = −1.2 + 0.06·(age − 40) + 0.05·(hours − 38) + 1.6·[degree]
+ 0.8·[college] + 0.8·[region = west] − 1.0·[smoker = yes]; 49 % of the 2,000 buy.
Nothing here is real data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def make(n: int, rng: np.random.Generator) -> pd.DataFrame:
    age = rng.integers(18, 80, n)
    hours = np.clip(np.round(rng.normal(38, 11, n)), 5, 70).astype(int)
    region = rng.choice(["north", "south", "east", "west"], n, p=[0.3, 0.3, 0.2, 0.2])
    education = rng.choice(["school", "college", "degree"], n, p=[0.45, 0.3, 0.25])
    smoker = rng.choice(["no", "yes"], n, p=[0.8, 0.2])
    logit = (
        -1.2
        + 0.06 * (age - 40)
        + 0.05 * (hours - 38)
        + 1.6 * (education == "degree")
        + 0.8 * (education == "college")
        + 0.8 * (region == "west")
        - 1.0 * (smoker == "yes")
    )
    buys = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    return pd.DataFrame(
        {"age": age, "hours": hours, "region": region, "education": education, "smoker": smoker, "buys": buys}
    )


if __name__ == "__main__":
    rng = np.random.default_rng(2026)
    here = Path(__file__).parent
    make(2000, rng).to_csv(here / "survey.csv", index=False)
    make(1000, rng).to_csv(here / "survey_test.csv", index=False)
