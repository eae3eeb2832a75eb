"""Offline tools around the model: what `govd eval`, `govd select-features` and the benchmarks
use, and what `govd run` never imports (tests/test_import_closure.py holds it to that).

- `selection`: seed 000's feature selection (frequency prefilter, Lasso);
- `scaling_selection`: the counters the scaling form conditions its curves on;
- `regression_data`: eq. 10's regression samples built from sweep tables or run traces;
- `arnlms`: the seed's baseline, an autoregressive frame-time predictor learned by NLMS;
- `misorder`: the model's Kendall tau with its time or power replaced by each phase's truth;
- `truth`: a policy replayed on each phase's true curves (`TrueCurves`), one unit late;
- `domains`: the two-clock-domain experiments (governing memory too, against core only).
"""
