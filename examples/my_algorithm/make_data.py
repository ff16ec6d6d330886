"""Write data.csv: a small deterministic data set for the plugin example (python make_data.py).

600 rows; numeric columns on very different scales (age in years, income in euros, debt ratio,
visits per month, a score in [0, 1]), one categorical column `region` with 3 levels, a few missing
numeric values (empty cells), and a label `outcome` in {approved, declined} drawn from a logistic
model of them. Fixed seed: running it again writes the same bytes.
"""
import csv
from pathlib import Path

import numpy as np

ROWS, SEED = 600, 20240601


def main(path: Path = Path(__file__).with_name("data.csv")) -> None:
    rng = np.random.default_rng(SEED)
    age = rng.integers(18, 80, ROWS)
    income = (np.round(rng.lognormal(10.4, 0.5, ROWS), -1)).astype(int)
    debt_ratio = np.round(rng.beta(2, 5, ROWS), 3)
    visits = rng.poisson(4, ROWS)
    score = np.round(rng.uniform(0, 1, ROWS), 3)
    region = rng.choice(["north", "south", "west"], ROWS, p=[0.5, 0.3, 0.2])
    logit = 2.5 * (0.04 * (age - 45) + 1.2 * np.log(income / 33000) - 4.0 * (debt_ratio - 0.3)
                   + 2.0 * (score - 0.5) + np.select([region == "south", region == "west"], [-0.8, 0.6], 0.0))
    outcome = np.where(rng.random(ROWS) < 1 / (1 + np.exp(-logit)), "approved", "declined")
    columns = {"age": age, "income": income, "debt_ratio": debt_ratio, "visits": visits, "score": score}
    missing = {name: set(rng.choice(ROWS, 4, replace=False)) for name in ("income", "debt_ratio", "visits")}
    with path.open("w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow([*columns, "region", "outcome"])
        for i in range(ROWS):
            out.writerow([("" if i in missing.get(k, ()) else v[i]) for k, v in columns.items()]
                         + [region[i], outcome[i]])


if __name__ == "__main__":
    main()
