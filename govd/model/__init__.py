"""The live model: what a governor learns and predicts from, every tick, in the daemon.

- the interface: `base` (the `Model` protocol and the `Predictions` record every form fills
  each tick), `forms` (forms registered by name, ``auto`` resolved from the target in force),
  `settings` (the model's settings, one set for every form);
- the forms: the seed form, seed 000's eq. 10 (`online` for one clock domain, `two_domain` for
  (core, memory) pairs; their compiled ticks `tick`, `pairs`, `predict`), and the scaling form
  (`scaling_model`, its compiled tick `scaling`);
- the learners they call: `rls` (covariance-form RLS), `dcd` (DCD-RLS), `rescale` (exact
  power-of-two counter scales);
- around them: `stress` (when to reset and fall back), `prior` (seeding the seed form from
  clusters of scaling curves; the file is `govd.formats.prior`).

The kernels compiled ahead of time (``_aot_*``) sit here beside their sources; what compiles
them is `govd.kernels`. Offline tools (feature selection, the AR-NLMS baseline) are
`govd.research`, which the daemon never imports.
"""
