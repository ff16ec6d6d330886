"""`dpbench bench`: the speed benchmarks, DP-SGD steps beside Opacus, and the JAX path's suites on a device."""

from __future__ import annotations

import sys
import time

import click

from dpbench.cli.blas_threads import USER_THREAD_ENV  # first: its thread settings precede numpy's import

# isort: split
from dpbench.bench.suites import SUITES as BENCH_SUITES  # imports numpy
from dpbench.cli.options import DATA_HELP, Checked
from dpbench.core.errors import DpbenchError
from dpbench.core.validation import Integral, Interval
from dpbench.on_jax.device import DEVICES  # imports no JAX


@click.command()
@click.option("--suite", "suites", multiple=True, type=click.Choice(tuple(BENCH_SUITES)),
              help="suite to run (repeatable; default: all); what each measures: dpbench/bench/suites.py")
@click.option("--against", type=click.Choice(["opacus"]), default=None,
              help="instead of the suites: dpbench's DP-SGD steps (the steps suite) side by side with Opacus "
                   "(hooks and ghost clipping) per model and batch size, and their ratio; needs the optional "
                   "extra: pip install torch==2.13.0 'dpbench[opacus]' (dpbench/bench/opacus.py)")
@click.option("--repeats", default=1, show_default=True, type=Checked(Interval(Integral, 1)),
              help="best of this many runs")
@click.option("--output", default="results/bench.json", show_default=True, type=click.Path(dir_okay=False),
              help="where the JSON records go")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False), help=DATA_HELP)
@click.option("--device", default="cpu", show_default=True, type=click.Choice(DEVICES),
              help="cpu: the numpy suites (--suite); gpu or jax-cpu: instead, the JAX path's suites on that device "
                   "(steps, many trainings, a whole audit) beside the numpy steps suite at the same shapes "
                   "(dpbench/bench/jax_suites.py); needs pip install 'dpbench[jax]' (and 'jax[cuda12]' for gpu)")
def bench(suites, against, repeats, output, data_dir, device) -> None:
    """Speed benchmarks: print a table and write results/bench.json (machine info + records).

    With --against opacus: the steps suite (logreg and mlp, B in 1, 64, 256, 1024; dpbench in
    float64 on one BLAS thread) and the same DP-SGD steps through Opacus (float32, torch's default
    thread count unless OMP_NUM_THREADS is set), both tables and the comparison (dpbench / the
    faster Opacus mode, target 20x); the JSON holds "records" and "comparison". Exit 1 with the
    install line when torch or opacus is missing.

    With --device gpu (or jax-cpu: the same JAX path on the CPU), in this order: the JAX steps
    suite (1,000 DP-SGD steps in one jitted scan, Adult-sized data, logreg and mlp, B in 1, 256,
    1024), the numpy steps suite at the same models and batch sizes, the JAX many suite (10,000
    DP-SGD trainings of logreg, 100 steps of batch 200, vmapped; the numpy fit_many beside it at
    1,000) and a whole audit (100,000 trials a side on the GPU, 10,000 on jax-cpu; the numpy path
    beside it at 1,000). Compilation is excluded from every throughput and shown as
    compile_seconds. The JSON's machine info names the device. Not with --suite or --against;
    exit 2 with one line when JAX is not installed or sees no GPU.
    """
    import json

    from dpbench.bench import suites as bench_mod
    from dpbench.core.store import atomic_write_text

    if device != "cpu" and (against is not None or suites):
        given = f"--against {against}" if against is not None else "--suite"
        raise DpbenchError(f"--device {device} runs its own suites (the JAX path's steps, many and audit, beside the "
                           f"numpy steps suite); leave out {given}, or run {given} with --device cpu")
    if against is not None and suites:
        raise DpbenchError(f"--against {against} runs its own suites (steps, {against}); leave out --suite")
    if device != "cpu":
        _bench_device(device, repeats, output, data_dir)
        return
    if against == "opacus":
        from dpbench.bench import opacus as bench_opacus

        try:
            framework = bench_opacus.framework()
        except ImportError:
            click.echo(f"error: {bench_opacus.INSTALL_HINT}", err=True)
            sys.exit(1)
    chosen = suites or tuple(bench_mod.SUITES)
    info = bench_mod.machine_info()
    click.echo(f"machine: {info['cores']} cores, numpy {info['numpy']}, BLAS {info['blas']}, "
               f"BLAS threads {info['blas_threads']}")
    if against == "opacus":
        # torch's own default unless the user set a thread count (dpbench's OMP_NUM_THREADS=1 is for its cells)
        threads = None if USER_THREAD_ENV else bench_opacus.torch_default_threads()
        started = time.perf_counter()
        records = bench_mod.steps_suite(data_dir=data_dir, repeats=repeats, models=bench_opacus.MODELS,
                                        batch_sizes=bench_opacus.BATCH_SIZES, long_run=0)
        click.echo(f"suite steps: {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        opacus_records = bench_opacus.opacus_suite(data_dir=data_dir, repeats=repeats, threads=threads)
        click.echo(f"suite opacus ({framework}, torch threads "
                   f"{opacus_records[0].get('torch_threads') if opacus_records else threads}): "
                   f"{time.perf_counter() - started:.1f} s")
        comparison = bench_opacus.compare(records, opacus_records)
        info["against"] = framework
        click.echo(bench_mod.format_table(records))
        click.echo("")
        click.echo(bench_mod.format_table(opacus_records))
        click.echo("")
        click.echo(bench_opacus.format_comparison(comparison))
        records += opacus_records
        atomic_write_text(output, json.dumps({"machine": info, "records": records, "comparison": comparison},
                                             indent=2, default=str))
        click.echo(f"written: {output}")
        return
    records = []
    for name in chosen:
        started = time.perf_counter()
        records += bench_mod.SUITES[name](data_dir=data_dir, repeats=repeats)
        click.echo(f"suite {name}: {time.perf_counter() - started:.1f} s")
    click.echo(bench_mod.format_table(records))
    atomic_write_text(output, json.dumps({"machine": info, "records": records}, indent=2, default=str))
    click.echo(f"written: {output}")


def _bench_device(device: str, repeats: int, output: str, data_dir: str | None) -> None:
    """`bench --device gpu | jax-cpu`: the JAX suites and the numpy steps suite at the same shapes, three tables."""
    import json

    from dpbench.bench import jax_suites
    from dpbench.bench import suites as bench_mod
    from dpbench.core.store import atomic_write_text
    from dpbench.on_jax import device as jax_device

    jax_device.activate(device)  # one line (DpbenchError) when JAX is missing or sees no GPU, before any work
    info = bench_mod.machine_info()
    info["device"] = jax_device.describe(device)
    click.echo(f"machine: {info['cores']} cores, numpy {info['numpy']}, BLAS {info['blas']}, "
               f"BLAS threads {info['blas_threads']}; device {info['device']}")
    runs = [
        ("jax steps", lambda: jax_suites.jax_steps_suite(device, data_dir=data_dir, repeats=repeats)),
        ("steps (numpy)", lambda: bench_mod.steps_suite(data_dir=data_dir, repeats=repeats,
                                                        models=jax_suites.JAX_MODELS,
                                                        batch_sizes=jax_suites.JAX_BATCH_SIZES, long_run=0)),
        ("jax many", lambda: jax_suites.jax_many_suite(device, data_dir=data_dir, repeats=repeats)),
        ("jax audit", lambda: jax_suites.jax_audit_suite(device, data_dir=data_dir, repeats=repeats)),
    ]
    records: list[dict] = []
    for name, run in runs:
        started = time.perf_counter()
        records += run()
        click.echo(f"suite {name}: {time.perf_counter() - started:.1f} s")
    numpy_device = jax_device.describe("cpu")
    for rec in records:
        rec.setdefault("device", numpy_device)  # the numpy steps suite's records
    for suite in ("steps", "many", "audit"):
        chosen = [r for r in records if r["suite"] == suite]
        if suite == "steps":  # each shape's JAX row above its numpy rows
            chosen.sort(key=lambda r: (jax_suites.JAX_MODELS.index(r["model"]) if r["model"] in jax_suites.JAX_MODELS
                                       else len(jax_suites.JAX_MODELS), r["batch_size"], r.get("path") != "jax"))
        click.echo("")
        click.echo(bench_mod.format_table(chosen))
    atomic_write_text(output, json.dumps({"machine": info, "records": records}, indent=2, default=str))
    click.echo(f"written: {output}")
