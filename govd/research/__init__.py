"""Offline tools around the model: what `govd eval`, `govd select-features` and the benchmarks
use, and what `govd run` never imports (tests/test_import_closure.py holds it to that).

- `selection`: seed 000's feature selection (frequency prefilter, Lasso);
- `scaling_selection`: the counters the scaling form conditions its curves on;
- `regression_data`: eq. 10's regression samples built from sweep tables or run traces;
- `arnlms`: the seed's baseline, an autoregressive frame-time predictor learned by NLMS.
"""
