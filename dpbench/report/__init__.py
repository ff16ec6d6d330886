"""`dpbench report`: a static HTML site from the stored tables, one page per experiment with
interactive figures, the ledger behind every point, audits, claims and provenance (`site`; the
charts in `charts`; page script and style in `assets/`)."""

from dpbench.core.moved import forward

__getattr__ = forward(__name__)  # the names of the old module dpbench.report, with a DeprecationWarning
