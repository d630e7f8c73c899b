"""GPU inference support: hardware profiles, the pre-launch memory check, and the
``vllm serve`` process. Prefect-free: ``flows/vllm_runner.py`` wraps it for flows."""
