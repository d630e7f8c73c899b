"""The index mirrors the sources: one live version per source in the store, the outputs
and the done-index (docs/index-sync.md).

What belongs here: the per-source record naming the live version (:mod:`.live`), the
retirement of a replaced version's outputs (:mod:`.retire`), and ``--sync``, which
removes what belongs to sources gone from their roots (:mod:`.sync`). The pipeline's load
stage (:mod:`folio.pipeline.load`) and start (:mod:`folio.pipeline.prepare`) use them.
"""
