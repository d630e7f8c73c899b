"""What a run is told: :mod:`.config` (``PipelineConfig`` and its sections, each
setting reachable as ``--set section.key=value`` and ``FOLIO_SECTION__KEY``; the
operational sections that bound a run's use of its host in :mod:`.resources`),
:mod:`.run_config` (how the CLI, the environment and a preset resolve into one),
:mod:`.presets` (named hardware/engine profiles) and :mod:`.vocabulary` (the names
the settings and the outputs share).
"""
