"""Regression check: a profile's per-seed curve points against a stored reference.

The reference (`results/<experiment>/reference-<profile>.csv`, committed) holds one row per
(algorithm, dataset, model, epsilon, metric, seed repetition): the selected hyperparameters'
value of that metric. A cell is a pure function of its key, so on one machine a rerun gives
bitwise the same numbers and any difference means the code changed.

Status of a curve point (mean over seeds), in this order:
  same     |new_r - ref_r| <= atol + rtol * |ref_r| for every seed r: float noise. On one
           machine a rerun is bitwise equal. Another CPU picks other OpenBLAS, numpy and numba
           kernels (AVX2 vs AVX-512), so last bits differ; fits carry that through as ~1e-9
           relative (measured on every ci profile), far inside rtol.
  unstable the point is float-sensitive: a fit that amplifies last bits into a different model
           (Bolt-on's convex step size on the non-convex MLP diverges) gives, on another CPU,
           another draw of the same random outcome, so no per-seed tolerance separates a code
           change from a CPU change. Such points are found when the reference is written
           (`check --update` reruns the profile under the FLOAT_VARIANTS kernel settings and
           stores per seed envelope_r = max |variant_r - ref_r|); a point whose algorithm,
           dataset, model and epsilon has any metric with an envelope beyond float noise is
           reported with its numbers and never fails. It is named in the report, so a reader
           knows which curves `check` cannot guard.
  within   the seeds are shared, so the per-seed differences d_r = new_r - ref_r are paired:
           |mean(d)| <= k * SE(d), SE(d) = std(d) / sqrt(#seeds) — a change that moves seeds
           both ways by seed noise (e.g. a reordered random stream) passes;
  DRIFT    otherwise: a systematic move (every seed the same way) fails, however small
           compared with the spread between seeds. Measured: a 10% larger DP-SGD noise moves the
           curve means by < 0.5 unpaired standard errors, so an unpaired rule could not see it.
missing (in the reference, not produced) and new (produced, not in the reference) also fail.
A point with a single seed (an audit's lower bound, a one-seed profile) has no spread to judge a
move by: anything beyond `same` is DRIFT.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from dpbench.analysis.curves import GROUP

POINT = [*GROUP, "metric"]
DEFAULT_K = 3.0
DEFAULT_RTOL = 1e-6
DEFAULT_ATOL = 1e-9

#: numpy's AVX-512 dispatch targets (numpy >= 2.4 names first, then the older ones; unknown
#: names are ignored by numpy)
_NUMPY_AVX512 = "X86_V4 AVX512_ICL AVX512_SPR AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_KNL AVX512_KNM"
#: Kernel settings another x86-64 CPU of this kind could run: each only restricts which
#: instructions OpenBLAS (OPENBLAS_CORETYPE), numpy (NPY_DISABLE_CPU_FEATURES) and numba
#: (NUMBA_CPU_NAME) may use, so it is safe on any CPU with AVX2. `check --update` reruns the
#: profile under each to measure every point's float envelope.
FLOAT_VARIANTS: dict[str, dict[str, str]] = {
    "avx2": {"OPENBLAS_CORETYPE": "Haswell", "NUMBA_CPU_NAME": "haswell",
             "NPY_DISABLE_CPU_FEATURES": _NUMPY_AVX512},
    "avx": {"OPENBLAS_CORETYPE": "Sandybridge", "NUMBA_CPU_NAME": "sandybridge",
            "NPY_DISABLE_CPU_FEATURES": f"X86_V3 {_NUMPY_AVX512} AVX2 FMA3"},
}


def variant_environment(name: str) -> dict[str, str]:
    """This process's environment with FLOAT_VARIANTS[name] applied."""
    return {**os.environ, **FLOAT_VARIANTS[name]}


def seed_points(selected: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Long table: one row per (algorithm, dataset, model, epsilon, metric, rep) of the selected runs.

    `selected` maps each metric to the runs selected for it (curves.selected_by_metric).
    """
    parts = [runs[[*GROUP, "rep"]].assign(metric=metric, value=runs[metric])
             for metric, runs in selected.items() if not runs.empty and metric in runs]
    if not parts:
        return pd.DataFrame(columns=[*POINT, "rep", "value"])
    long = pd.concat(parts, ignore_index=True).dropna(subset=["value"])
    return long[[*POINT, "rep", "value"]].sort_values([*POINT, "rep"], na_position="first").reset_index(drop=True)


def with_envelope(points: pd.DataFrame, variants: list[pd.DataFrame]) -> pd.DataFrame:
    """`points` with column `envelope`: per (point, seed), the largest |variant - points| over
    the same points computed under other kernels (FLOAT_VARIANTS). A point or seed a variant
    did not produce gets no envelope from it (0); NaN on one side only counts as infinite."""
    keyed = points.assign(_k=_key(points))
    envelope = np.zeros(len(points))
    for other in variants:
        other = other.assign(_k=_key(other))[["_k", "rep", "value"]].rename(columns={"value": "_v"})
        joined = keyed[["_k", "rep", "value"]].merge(other, on=["_k", "rep"], how="left")
        a, b = joined["value"].to_numpy(dtype=float), joined["_v"].to_numpy(dtype=float)
        moved = np.where(np.isnan(b), 0.0, np.where(np.isnan(a), np.inf, np.abs(b - a)))
        envelope = np.maximum(envelope, moved)
    return points.assign(envelope=envelope)


def float_noise(values: np.ndarray | pd.Series, *, rtol: float = DEFAULT_RTOL,
                atol: float = DEFAULT_ATOL) -> np.ndarray | pd.Series:
    """How far a value may move by last-bit differences alone (the `same` tolerance)."""
    return atol + rtol * np.abs(values)


def sensitive_groups(reference: pd.DataFrame) -> set[str]:
    """(algorithm, dataset, model, epsilon) groups with a value whose envelope exceeds float noise."""
    if "envelope" not in reference:
        return set()
    moved = reference["envelope"].fillna(0) > float_noise(reference["value"].fillna(0))
    return set(_group_key(reference[moved]))


def _group_key(df: pd.DataFrame) -> pd.Series:
    eps = df["epsilon"].map(lambda e: "" if pd.isna(e) else repr(float(e)))
    return df["label"].astype(str) + "|" + df["dataset_label"].astype(str) + "|" + df["model_label"].astype(str) \
        + "|" + eps


def _key(df: pd.DataFrame) -> pd.Series:
    return _group_key(df) + "|" + df["metric"].astype(str)


def compare(new: pd.DataFrame, reference: pd.DataFrame, *, k: float = DEFAULT_K, rtol: float = DEFAULT_RTOL,
            atol: float = DEFAULT_ATOL) -> pd.DataFrame:
    """One row per curve point with ref/new means, paired difference, its SE and a status."""
    unstable = sensitive_groups(reference)
    new, reference = new.assign(_k=_key(new)), reference.assign(_k=_key(reference))
    rows = []
    for point in sorted(set(new["_k"]) | set(reference["_k"])):
        ref_rows = reference[reference["_k"] == point].set_index("rep")
        a = ref_rows["value"]
        envelope = ref_rows["envelope"] if "envelope" in ref_rows else pd.Series(0.0, index=a.index)
        b = new[new["_k"] == point].set_index("rep")["value"]
        first = (reference if len(a) else new)
        meta = first[first["_k"] == point].iloc[0]
        row = {c: meta[c] for c in POINT}
        row.update(ref_mean=a.mean() if len(a) else np.nan, new_mean=b.mean() if len(b) else np.nan,
                   seeds=len(b.index.intersection(a.index)), envelope=float(envelope.max()) if len(a) else np.nan)
        if not len(a):
            row.update(status="new", delta=np.nan, se=np.nan, z=np.nan, detectable=np.nan)
        elif not len(b):
            row.update(status="missing", delta=np.nan, se=np.nan, z=np.nan, detectable=np.nan)
        else:
            common = a.index.intersection(b.index)
            d = (b.loc[common] - a.loc[common]).to_numpy(dtype=float)
            delta = float(b.mean() - a.mean())
            se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else np.inf
            z = abs(delta) / se if se > 0 else (0.0 if delta == 0 else np.inf)
            ref_common = a.loc[common].to_numpy(dtype=float)
            if set(a.index) == set(b.index) and np.all(np.abs(d) <= float_noise(ref_common, rtol=rtol, atol=atol)):
                status = "same"
            elif point.rpartition("|")[0] in unstable:
                status = "unstable"  # float-sensitive: another CPU draws another outcome
            elif set(a.index) != set(b.index):
                status = "DRIFT"  # the seeds differ: the profile itself changed
            elif d.size == 1:
                status = "DRIFT"  # one seed (e.g. an audit's bound): no spread to excuse a move
            else:
                status = "within" if z <= k else "DRIFT"
            # the smallest |mean paired difference| this point would call a DRIFT: k SE, or (one seed, no
            # spread to excuse a move) anything beyond float noise
            detectable = k * se if np.isfinite(se) else float(np.max(float_noise(ref_common, rtol=rtol, atol=atol)))
            row.update(status=status, delta=delta, se=se, z=z, detectable=detectable)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*POINT, "ref_mean", "new_mean", "delta", "se", "z", "detectable", "seeds",
                                       "envelope", "status"])


def failed(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["status"].isin(["DRIFT", "missing", "new"])]


def report(table: pd.DataFrame, k: float) -> str:
    """Readable summary: counts per status, then every point that is not `same`."""
    counts = table["status"].value_counts().to_dict()
    head = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("same", "within", "unstable", "DRIFT", "missing", "new"))
    lines = [f"{len(table)} curve points: {head} (within = paired difference inside {k:g} standard errors)"]
    shift = table.loc[table["detectable"].notna() & (table["status"] != "same")] if "detectable" in table else table
    if not shift.empty:  # a point whose seeds did not move at all has no paired spread to size a shift with
        worst = shift.loc[shift["detectable"].idxmax()]
        lines.append(f"smallest shift each moved point would call a DRIFT ({k:g} SE of its paired difference): median "
                     f"{shift['detectable'].median():.3g}, largest {worst['detectable']:.3g} ({worst['label']}, "
                     f"{worst['dataset_label']} {worst['model_label']}, {worst['metric']}, mean "
                     f"{worst['ref_mean']:.3g}); per moved point in the column `detectable` below")
    unstable = table[table["status"] == "unstable"]
    if not unstable.empty:
        lines.append("unstable = float-sensitive (other CPU kernels changed the reference's fit beyond float noise), "
                     "shown, not judged: " + ", ".join(sorted({f"{r.label}/{r.dataset_label}/{r.model_label}"
                                                                for r in unstable.itertuples()})))
    moved = table[table["status"] != "same"]
    if not moved.empty:
        show = moved.assign(epsilon=moved["epsilon"].map(lambda e: "-" if pd.isna(e) else f"{e:g}"))
        show = show[["status", "label", "dataset_label", "model_label", "epsilon", "metric", "ref_mean", "new_mean",
                     "delta", "z", "detectable", "seeds"]]
        with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format",
                               lambda v: f"{v:.6g}"):
            lines.append(show.rename(columns={"dataset_label": "dataset", "model_label": "model",
                                              "z": "|delta|/SE"}).to_string(index=False))
    return "\n".join(lines)


def write_reference(points: pd.DataFrame, variants: list[pd.DataFrame], path: str | os.PathLike
                    ) -> tuple[pd.DataFrame, int]:
    """Store `points` (with the float envelope of the kernel variants' reruns) as the reference at
    `path`; returns the stored table and how many of its values are float-sensitive."""
    from dpbench.core.store import atomic_write_bytes_via

    points = with_envelope(points, variants)
    atomic_write_bytes_via(path, lambda tmp: points.to_csv(tmp, index=False, float_format="%.17g"))
    return points, int((points["envelope"] > float_noise(points["value"])).sum())


def against_reference(points: pd.DataFrame, path: str | os.PathLike, *, k: float = DEFAULT_K,
                      create_with: str = "dpbench check SPEC --update") -> pd.DataFrame:
    """`compare` of `points` with the reference stored at `path` (DpbenchError naming `create_with`
    when there is none)."""
    from pathlib import Path

    from dpbench.core.errors import DpbenchError

    if not Path(path).is_file():
        raise DpbenchError(f"{path}: no reference; create it with `{create_with}`")
    return compare(points, pd.read_csv(path), k=k)
