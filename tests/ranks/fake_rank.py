"""A rank without torch, for testing zeroplan.distributed's launcher where torch is irrelevant (it
starts in milliseconds). Config JSON: {"steps": N, "step_s": seconds} (defaults 1 and 0). Rank 0 listens on MASTER_PORT as
torch's store would, so a taken port fails it with EADDRINUSE. Each step ticks the progress counter;
ZEROPLAN_TEST_FAULT=RANK:exit|hang:TICK injects a fault. The result is the rank's view as JSON."""

import json
import os
import socket
import sys
import time

from zeroplan.distributed.child import rank_main


def _body(env, heartbeat, config_json):
    config = json.loads(config_json)
    listener = None
    if env.rank == 0:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((env.master_addr, env.master_port))  # OSError EADDRINUSE when taken
        listener.listen()
    sys.stderr.write(f"fake rank {env.rank} of {env.world_size} started\n")
    for _ in range(config.get("steps", 1)):
        heartbeat.tick()
        time.sleep(config.get("step_s", 0.0))
    if listener is not None:
        listener.close()
    return json.dumps({"rank": env.rank, "world": env.world_size, "local_rank": env.local_rank,
                       "omp": os.environ.get("OMP_NUM_THREADS")})


if __name__ == "__main__":
    sys.exit(rank_main("fake", _body, fault_env="ZEROPLAN_TEST_FAULT"))
