"""Running cells: `cells.run_cell` (one fully specified fit, a pure function of its cell), the
runner that maps it over a grid in parallel into the store, the metrics of a trained model, and
the loading of user plugins.

Knows the algorithms, models and data sets through their registries; knows nothing of specs,
tables or figures."""
