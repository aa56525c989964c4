"""What each node is doing at each scrape: one small integer per (node, grid step).

Every metric is a function of these activity codes plus noise and a few overlays
(precursors, the slowdown's bursts), so the organisations' signals agree with one
another by construction.
"""

from __future__ import annotations

IDLE = 0
DOWN = 1  # rebooting: node agents are not scraped, ``up`` is 0
STARTING = 2  # container start, NCCL set-up, model build
OLD_INIT = 3  # reading the unsharded Arrow files at validation scale (2-4 nodes): fine
SLOW_INIT = 4  # the same reads from 60 nodes: metadata saturated, bursts between stalls
FAST_INIT = 5  # rank-sharded files after the fix: large sequential reads
CKPT_LOAD = 6  # a restarted session loads its last checkpoint
TRAIN = 7
CHECKPOINT = 8  # saving a checkpoint: NFS RPC slots full, link nearly idle
BURNIN = 9  # GPU stress test on a node outside the job

NAMES = {
    IDLE: "idle",
    DOWN: "down",
    STARTING: "starting",
    OLD_INIT: "init_unsharded",
    SLOW_INIT: "init_slow",
    FAST_INIT: "init_sharded",
    CKPT_LOAD: "checkpoint_load",
    TRAIN: "train",
    CHECKPOINT: "checkpoint",
    BURNIN: "burn_in",
}
