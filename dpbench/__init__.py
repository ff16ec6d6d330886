"""dpbench: reproduce, compare and audit differentially private learning algorithms.

The package is layered; each subpackage imports only the ones below it (the contracts in
pyproject.toml, checked by `make test`):

    cli          the command-line verbs (parse, call, print)
    report       the static HTML site          | bench   the benchmarks
    experiment   one experiment end to end: run, collect, render, manifest, stored tables
    spec         experiment YAML -> Experiment (validated), the component catalogue
    figures      figure kinds and their drawing | audit   canaries, games, empirical epsilon bounds
    analysis     runs -> selection -> curves, claims, regression check (pure tables)
    run          cells, the runner, metrics, plugins
    algorithms   the fits                        models  losses and gradients
    data         loaders, preprocessing, fetch   privacy accounting and mechanisms (pure maths)
    core         errors, registry, keys, ledger, store, jit, validation

Flow: experiments/X.yaml -> spec -> cells -> runner -> store -> tables -> figures / claims /
check / report. Top-level module names such as `dpbench.ledger` still import, with a
DeprecationWarning naming the module that holds them (`dpbench.core.moved`).
"""

from dpbench.core import moved as _moved

__version__ = "0.1.0"

_moved.install()
