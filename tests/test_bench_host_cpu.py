"""bench/host_cpu.py sorts the GPU host's processes by what they are: a warm server's
children share its command line, so their names (folio.warm.server._name_process) decide;
the real name a warm child gets is checked in tests/test_warm.py."""

from __future__ import annotations

from bench.host_cpu import kind

SERVER = "/venv/bin/python3 -m folio.warm.server /tmp/folio-warm-0/ab.sock folio_prefect.x 3600"


def test_a_warm_servers_children_are_told_apart_by_their_names() -> None:
    assert kind(SERVER, "folio:engine") == "folio-flow"  # a worker's flow run
    assert kind(SERVER, "folio:cli") == "folio-flow"  # folio ingest
    assert kind(SERVER, "folio:zygote") == "folio-page-workers"  # and the workers it forks
    assert kind(SERVER, "folio:validatio") == "folio-validation"
    assert kind(SERVER, "python3") == "folio-warm-server"
    # not taken for Prefect's server for the folio_prefect in its command line (it was)
    assert kind("/venv/bin/python3 -m prefect server start", "python3") == (
        "prefect-server-and-worker")
    assert kind("VLLM::EngineCore", "VLLM::EngineCor") == "vllm-engine-core"
