"""What a run writes: a document's markdown and JSON (:mod:`.outputs`), its chunks
(:mod:`.chunking`) and their embeddings (:mod:`.embeddings`), and the run's
report (:mod:`.report`). Where chunks are stored is :mod:`folio.stores`; where
files go is :mod:`folio.io`.
"""
