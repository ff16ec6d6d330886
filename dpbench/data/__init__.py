"""Data sets of the reproduced papers: `load(name)` -> `Dataset` (see base.py).

UCI data (uci.py, preprocessing in preprocess.py, ALGORITHMS.md §0.3): `adult`, `bank`,
`kddcup99`, `breast_cancer`, `iris`. Synthetic heavy-tailed data of paper 004 (synthetic.py,
ALGORITHMS.md §10.7): `synthetic_linear`, `synthetic_logistic`. Credit Card Fraud of paper 003
(creditcard.py): `credit_card`, a user-supplied Kaggle file ($DPBENCH_DATA/creditcard/creditcard.csv,
never downloaded), balanced 492 + 492 rows. A fixed finite population for excess population risk
(population.py, paper 002): `synthetic_population`, whose test split is the whole pool.

Every `load` keyword except `**options` is common to all data sets (`COMMON_PARAMS`);
`option_names(name)` lists the per-data-set options so the YAML validator can reject unknown
ones. A bad name or option raises ValueError (one line, listing valid values); a missing or
corrupt raw file raises `dpbench.errors.DataError` (one line: data set, paths looked at, how to
get the data).
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

import numpy as np

from dpbench.data import creditcard, population, synthetic, uci
from dpbench.data.base import Dataset

#: Keyword parameters of `load` shared by every data set (not part of option_names()).
COMMON_PARAMS = frozenset({"seed", "n", "test_fraction", "val_fraction", "data_dir"})


@dataclass(frozen=True)
class DatasetInfo:
    """Registry entry: what a data set is and where it comes from."""

    name: str
    description: str
    citation: str  # paper(s) and UCI id
    task: str  # "classification" | "regression"
    source: str  # "uci" | "synthetic" | "user-supplied"
    uci_id: int | None = None
    known_parameter: bool = False  # the true parameter w* is known (Dataset.w_star)
    population: bool = False  # the test split is the whole population (excess population risk is exact)


DATASETS: dict[str, DatasetInfo] = {
    **{
        name: DatasetInfo(
            name=name,
            description=spec.description,
            citation=spec.citation,
            task="classification",
            source="uci",
            uci_id=spec.uci_id,
        )
        for name, spec in uci.SPECS.items()
    },
    "synthetic_linear": DatasetInfo(
        name="synthetic_linear",
        description="y = <w*,x> + centred LogNormal noise (heavy-tailed regression), n=1e5, d=10",
        citation=synthetic.CITATION,
        task="regression",
        source="synthetic",
        known_parameter=True,
    ),
    "synthetic_logistic": DatasetInfo(
        name="synthetic_logistic",
        description="y = sign(<w*,x> + centred LogLogistic noise), n=1e5, d=10",
        citation=synthetic.CITATION,
        task="classification",
        source="synthetic",
        known_parameter=True,
    ),
    "credit_card": DatasetInfo(
        name="credit_card",
        description=creditcard.DESCRIPTION,
        citation=creditcard.CITATION,
        task="classification",
        source="user-supplied",
    ),
    "synthetic_population": DatasetInfo(
        name="synthetic_population",
        description=population.DESCRIPTION,
        citation=population.CITATION,
        task="classification",
        source="synthetic",
        known_parameter=True,
        population=True,
    ),
}


def _info(name: object) -> DatasetInfo:
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid: {', '.join(DATASETS)}")
    return DATASETS[name]


def option_names(name: str) -> set[str]:
    """Names of the **options `load(name, ...)` accepts (besides COMMON_PARAMS)."""
    info = _info(name)
    if name == "credit_card":
        return creditcard.option_names()
    if name == "synthetic_population":
        return population.option_names()
    return uci.option_names(name) if info.source == "uci" else synthetic.option_names(name)


def data_dir(explicit: str | os.PathLike | None = None) -> pathlib.Path:
    """Data folder: `explicit`, else $DPBENCH_DATA, else ./data (UCI layout, see uci.py)."""
    return uci.data_dir(explicit)


def verify(data_dir: str | os.PathLike | None = None, *, include_absent_optional: bool = False) -> list[dict]:
    """Check every known raw UCI file against its SHA-256 and parse it; then the credit-card file.

    One dict per file: dataset, file, path, expected_sha256, actual_sha256 (None if absent),
    ok (bool), rows (parsed rows, None if absent/bad), error (None or a short reason).

    The user-supplied `creditcard/creditcard.csv` (creditcard.verify_record) has expected_sha256
    None (no known sum: it is parsed, not checked) and the extra key `required: False`. It is
    listed when present; when absent only with `include_absent_optional=True` (then
    actual_sha256=None, ok=False, error="absent (user-supplied)"), because a consumer that counts
    every record with actual_sha256=None as missing (the current `dpbench data verify`) would
    otherwise fail for an optional file.
    """
    records = uci.verify(data_dir)
    card = creditcard.verify_record(data_dir)
    if card["actual_sha256"] is not None or include_absent_optional:
        records.append(card)
    return records


def load(
    name: str,
    *,
    seed: int = 0,
    n: int | None = None,
    test_fraction: float = 0.2,
    val_fraction: float = 0.2,
    data_dir: str | os.PathLike | None = None,
    **options: object,
) -> Dataset:
    """Load and preprocess a data set; same arguments -> bit-identical arrays in any process of one machine.

    `n`: UCI and credit_card -- optional uniform subsample of the cleaned (credit_card: balanced)
    table drawn with `seed` before the split (KDDCup99 papers: 70,000); synthetic_linear/logistic
    -- number of generated rows (default 100,000); synthetic_population -- number of TRAINING rows
    drawn from the pool (default 1,000).
    `test_fraction`/`val_fraction` are fractions of all (used) rows; train is the rest
    (synthetic_population: val = round(val_fraction * n) extra rows, test_fraction ignored, test =
    the whole pool).
    """
    info = _info(name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    seed = int(seed)
    valid = option_names(name)
    unknown = sorted(set(options) - valid)
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(unknown)} for dataset '{name}'; valid: "
            + (", ".join(sorted(valid)) if valid else "none")
        )
    if name == "credit_card":
        return creditcard.load(
            seed=seed,
            n=n,
            test_fraction=test_fraction,
            val_fraction=val_fraction,
            data_dir=data_dir,
            **options,
        )
    if name == "synthetic_population":
        return population.make(
            seed=seed, n=n, test_fraction=test_fraction, val_fraction=val_fraction, **options
        )
    if info.source == "uci":
        return uci.load_uci(
            name,
            seed=seed,
            n=n,
            test_fraction=test_fraction,
            val_fraction=val_fraction,
            data_dir=data_dir,
            **options,
        )
    return synthetic.make(
        name, seed=seed, n=n, test_fraction=test_fraction, val_fraction=val_fraction, **options
    )


__all__ = [
    "COMMON_PARAMS",
    "DATASETS",
    "Dataset",
    "DatasetInfo",
    "data_dir",
    "load",
    "option_names",
    "verify",
]
