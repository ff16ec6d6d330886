"""One experiment end to end, the orchestration the CLI verbs share: run its cells and audits
(`pipeline`), read what the store holds (`inventory`, `audits`), render tables, figures, claims and
the manifest (`render`, `verdicts`, `manifest`), read the committed tables back (`stored`), and
rerun under other CPU kernels for a reference's float envelope (`variants`). No algorithm logic
and no formulas."""
