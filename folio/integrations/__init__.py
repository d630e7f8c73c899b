"""folio inside LangChain and LlamaIndex: a retriever over an index an ingest wrote, and
a loader/reader of its outputs for teams that keep their own store.

Optional extras (``pip install 'folio[langchain]'``, ``'folio[llamaindex]'``): each
module imports its framework's core package only, and nothing here is imported by the
rest of folio. docs/retrieval.md shows both.
"""
