"""What keeps folio safe on a host it shares with other users (docs/security.md).

Belongs here: private folders and secret files (owner and mode checked on every use),
the per-home and per-server secrets folio's own servers require, the environment a child
process may inherit, redaction of credentials in what folio writes or prints, and names
made safe for a terminal or a markdown table. Nothing here imports Prefect.
"""
