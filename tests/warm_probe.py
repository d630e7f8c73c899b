"""A command for the warm server's tests (tests/test_warm.py): preloaded by the server,
run in its children, it writes down what a child sees and does what its argv says.

    probe FACTS_FILE CODE [sleep S] [stdin] [helper]
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time

from folio.warm import client

AFTER_FORK: list[int] = []


def after_fork() -> None:
    AFTER_FORK.append(os.getpid())
    client.enter_child()


def main() -> int:
    facts_file, code, *rest = sys.argv[1:]
    facts: dict[str, object] = {
        "pid": os.getpid(), "ppid": os.getppid(), "parent": client.parent_pid(),
        "pgid": os.getpgid(0), "cwd": os.getcwd(),
        "argv": sys.argv, "umask": _umask(), "env": dict(os.environ),
        "after_fork": AFTER_FORK == [os.getpid()], "stdout_tty": sys.stdout.isatty(),
        "frozen": gc.get_freeze_count(), "gc_enabled": gc.isenabled(),
        "comm": open("/proc/self/comm").read().strip(),
        "cpus": sorted(os.sched_getaffinity(0)), "nice": os.getpriority(os.PRIO_PROCESS, 0),
    }
    if "stdin" in rest:
        facts["stdin"] = sys.stdin.read()
    if "helper" in rest:  # a helper forked by the same server, talking over pipes
        child = client.spawn_module("tests.warm_probe", ["echo"], pipe_stdin=True,
                                    pipe_stdout=True)
        assert child is not None and child.stdin is not None and child.stdout is not None
        child.stdin.write(b"ping\n")
        child.stdin.close()
        facts["helper"] = {"answer": child.stdout.read().decode(), "code": child.wait(10),
                           "pid": child.pid}
    _write(facts_file, facts)
    print(f"probe {os.getpid()} says hello")
    if "sleep" in rest:
        time.sleep(float(rest[rest.index("sleep") + 1]))
    return int(code)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write(path: str, facts: dict[str, object]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(facts, fh)
    os.replace(tmp, path)


if __name__ == "__main__":
    if sys.argv[1:] == ["echo"]:  # the helper: its parents (the server's, the caller's)
        print(f"{os.getppid()} {client.parent_pid()} {sys.stdin.read().strip()}")
        raise SystemExit(7)
    raise SystemExit(main())
