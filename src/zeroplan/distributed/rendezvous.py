"""Where a rank learns who it is: a launcher's environment (torchrun, SLURM) or our own local spawn,
and how the local launcher picks a free port for the TCP store."""

from __future__ import annotations

import errno
import os
import socket
import sys
from dataclasses import dataclass
from typing import Mapping
from datetime import timedelta
import threading

from zeroplan.core.errors import InputError, RunFailed

LOCAL_HOST = "127.0.0.1"
DEFAULT_MASTER_PORT = "29500"  # torchrun's default, for SLURM scripts that export only MASTER_ADDR
EXIT_ADDRESS_IN_USE = 98  # a rank exits with errno 98 so the launcher knows to retry on another port


@dataclass(frozen=True)
class RankEnv:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    node_id: str  # ranks with the same node_id share a node (intra-node span)


def _int(environ: Mapping[str, str], name: str) -> int:
    try:
        return int(environ[name])
    except ValueError:
        raise InputError(name, f"environment variable is '{environ[name]}', not a whole number",
                         "fix the launcher's environment") from None


def launcher_env(environ: Mapping[str, str] = os.environ) -> RankEnv | None:
    """The job this process belongs to when torchrun (RANK, WORLD_SIZE, MASTER_ADDR) or SLURM
    (SLURM_PROCID, SLURM_NTASKS and an exported MASTER_ADDR) started it; None when run by hand."""
    if "MASTER_ADDR" not in environ:
        return None
    if "RANK" in environ and "WORLD_SIZE" in environ:
        rank, world = _int(environ, "RANK"), _int(environ, "WORLD_SIZE")
        local_rank = _int(environ, "LOCAL_RANK") if "LOCAL_RANK" in environ else 0
    elif "SLURM_PROCID" in environ and "SLURM_NTASKS" in environ:
        rank, world = _int(environ, "SLURM_PROCID"), _int(environ, "SLURM_NTASKS")
        local_rank = _int(environ, "SLURM_LOCALID") if "SLURM_LOCALID" in environ else 0
    else:
        return None
    if world < 2:
        raise InputError("WORLD_SIZE", f"a collective needs at least 2 ranks, the launcher started {world}",
                         "start 2 or more processes")
    if not 0 <= rank < world:
        raise InputError("RANK", f"{rank} is outside 0..{world - 1}", "fix the launcher's environment")
    port = _int(environ, "MASTER_PORT") if "MASTER_PORT" in environ else int(DEFAULT_MASTER_PORT)
    node = environ.get("GROUP_RANK") or environ.get("SLURM_NODEID") or socket.gethostname()
    return RankEnv(rank, world, local_rank, environ["MASTER_ADDR"], port, str(node))


def export_for_env_init(env: RankEnv) -> None:
    """torch's env:// init reads these; under torchrun they are already set (and must stay, so the
    agent's store is reused), under SLURM we fill them from the SLURM_* values."""
    os.environ.setdefault("RANK", str(env.rank))
    os.environ.setdefault("WORLD_SIZE", str(env.world_size))
    os.environ.setdefault("LOCAL_RANK", str(env.local_rank))
    os.environ.setdefault("MASTER_PORT", str(env.master_port))


def free_port(host: str = LOCAL_HOST) -> int:
    """A port the kernel just handed out: bind to port 0 and read it back. Another process can still
    take it before rank 0 listens on it; the launcher retries when a rank reports EADDRINUSE."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def is_address_in_use(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return True
    text = str(exc).lower()
    return "eaddrinuse" in text or "address already in use" in text


class RankFailed(RunFailed):
    """A rank could not run (port taken, no rendezvous in time): one line, exit_code (1 by default)."""


class PortTaken(RankFailed):
    pass


def join_group(backend: str, env: RankEnv, timeout_s: float, device=None, label: str = "zeroplan") -> None:
    """init_process_group (env://) within timeout_s on every rank.

    torch passes the timeout to its TCP store, yet a rank whose MASTER_PORT is held by something other
    than rank 0's store (rank 0 failed to listen: EADDRINUSE) waits on it far longer; a watchdog ends
    such a rank with one line. A port taken on this rank raises PortTaken."""
    import torch.distributed as dist

    export_for_env_init(env)
    joined = threading.Event()

    def watchdog() -> None:
        if not joined.wait(timeout_s):
            sys.stderr.write(f"{label}: error: rank {env.rank}: no rendezvous with {env.master_addr}:"
                             f"{env.master_port} within {timeout_s:g} s (--timeout); check that rank 0 "
                             "started and that MASTER_PORT is free\n")
            sys.stderr.flush()
            os._exit(1)

    threading.Thread(target=watchdog, name="zeroplan-rendezvous-watchdog", daemon=True).start()
    try:
        dist.init_process_group(backend, init_method="env://", rank=env.rank, world_size=env.world_size,
                                timeout=timedelta(seconds=timeout_s),
                                device_id=device if device is not None and device.type == "cuda" else None)
    except Exception as exc:
        if is_address_in_use(exc):
            raise PortTaken(f"rank {env.rank}: cannot listen on {env.master_addr}:{env.master_port}: the port is "
                            "taken (errno 98, EADDRINUSE); set MASTER_PORT to a free port") from None
        raise
    finally:
        joined.set()
