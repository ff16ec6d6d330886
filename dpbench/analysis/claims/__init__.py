"""Paper claims as code: each claim a paper (or its docs page) makes about a reproduced figure, as
a relation over the curves tested with paired statistics across seeds, and its verdict.

An experiment's `claims:` block lists them (`parse_claims`, `parse`). What a claim may test is a
claim kind, one `claim_kind(...)` declaration each (`kinds`: its relations, its own keys with their
constraints, its statement and its evaluation); the built-in kinds comparison, trend,
spread, rate and audit are in `builtin`, the screens that mark what cannot inform a claim in
`screens`. The paired statistics (the sign test of the median per-seed statistic and its
interval, partial conjunctions for the quantifiers, Holm, the seeds an undecided claim would
need) are in `stats`; the error and power of the procedure on an experiment's own per-seed
shapes in `shapes`;
the sequential design of `dpbench decide` (looks, spending, sequential p-values, the family's
verdicts) in `sequential`; the verdicts in `verdicts`; the tables in `tables`.

Pure tables in, tables out: the per-seed points come from `per_seed_points` (selected runs) and
the audits table from `dpbench.audit.multi_run`; nothing here trains or reads files.
"""

from dpbench.analysis.claims.builtin import AXES
from dpbench.analysis.claims.claim import Claim
from dpbench.analysis.claims.kinds import CLAIM_KINDS, ClaimKind, Field, Reading, claim_kind
from dpbench.analysis.claims.parse import claim_keys, parse_claims
from dpbench.analysis.claims.points import POINT_COLUMNS, per_seed_points
from dpbench.analysis.claims.sequential import DEFAULT_LOOKS, Design
from dpbench.analysis.claims.stats import ALPHA, MAX_SEEDS, POWER, SubTest, holm, seeds_needed
from dpbench.analysis.claims.tables import (SELECTION_BLOCK, SUMMARY_BLOCK, VERDICT_ORDER, fill_readme, markdown,
                                            readme_block, selection_markdown, status_text, summary_markdown, table,
                                            verdict_text)
from dpbench.analysis.claims.verdicts import VERDICTS, Verdict, check_points, evaluate, significant_points

_holm = holm
_seeds_needed = seeds_needed

__all__ = ["ALPHA", "AXES", "CLAIM_KINDS", "Claim", "ClaimKind", "DEFAULT_LOOKS", "Design", "Field", "MAX_SEEDS",
           "POINT_COLUMNS", "POWER",
           "Reading", "SubTest", "VERDICTS", "Verdict", "check_points", "claim_keys", "claim_kind", "evaluate",
           "fill_readme", "holm", "markdown", "parse_claims", "per_seed_points", "readme_block", "seeds_needed",
           "SELECTION_BLOCK", "selection_markdown", "significant_points", "status_text", "SUMMARY_BLOCK",
           "summary_markdown", "table",
           "VERDICT_ORDER", "verdict_text"]
