"""Checks of what a run produced: validation of each document's text with Great
Expectations (:mod:`.validation`, run in a child process by
:mod:`.validation_child`, the suite in :mod:`.validation_gx`) and the checks a
finished run's outputs are read back with (:mod:`.run_checks`).
"""
