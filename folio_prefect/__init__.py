"""folio's Prefect layer, installed under one name that cannot collide.

The card fixes the repository's top-level folders ``flows/``, ``tasks/`` and
``deployments/``; installed as top-level packages under those names they would clash with
any other project that ships a ``tasks`` or ``flows`` package. So the folders stay where
the card puts them and this package reaches them through symbolic links: they are imported
as ``folio_prefect.flows``, ``folio_prefect.tasks`` and ``folio_prefect.deployments``, a
wheel carries them under that name, and mypy checks them there. The core package,
``folio``, imports none of this (tests/test_core_is_prefect_free.py).
"""
