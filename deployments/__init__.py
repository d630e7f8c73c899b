"""Code that creates work pools and deployments (what prefect.yaml cannot say)."""
