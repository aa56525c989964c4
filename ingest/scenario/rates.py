"""What each activity code means for the metrics, as tables indexed by code:
NIC rates, load, storage demand, GPU temperature, power and clock."""

from __future__ import annotations

import numpy as np

from ingest.scenario import activity as act
from ingest.scenario import causes
from ingest.scenario.config import GIB

CODES = 10


# Per activity code (index): storage-NIC receive (bytes/s) and its relative noise.
def _table(pairs: dict[int, float], default: float = 0.0) -> np.ndarray:
    table = np.full(CODES, default)
    for code, value in pairs.items():
        table[code] = value
    return table


A = act
RX_STORAGE = _table(
    {
        A.IDLE: 2e6,
        A.STARTING: 25e6,
        A.OLD_INIT: 6.4 * GIB,
        A.FAST_INIT: 8.4 * GIB,
        A.CKPT_LOAD: 2.5e9,
        A.TRAIN: 160e6,
        A.CHECKPOINT: 20e6,
        A.BURNIN: 1e6,
    }
)
RX_STORAGE_NOISE = _table({A.TRAIN: 0.3, A.IDLE: 0.3, A.STARTING: 0.2}, 0.04)
TX_STORAGE_BASE = _table({A.IDLE: 0.8e6, A.STARTING: 3e6, A.TRAIN: 6e6, A.BURNIN: 0.5e6}, 1.5e6)
RX_FRONT = _table(
    {
        A.IDLE: 0.4e6,
        A.STARTING: 650e6,
        A.OLD_INIT: 8e6,
        A.SLOW_INIT: 6e6,
        A.FAST_INIT: 10e6,
        A.CKPT_LOAD: 10e6,
        A.TRAIN: 260e6,
        A.CHECKPOINT: 240e6,
        A.BURNIN: 1e6,
    }
)
TX_FRONT = _table(
    {
        A.IDLE: 0.3e6,
        A.STARTING: 4e6,
        A.OLD_INIT: 5e6,
        A.SLOW_INIT: 4e6,
        A.FAST_INIT: 6e6,
        A.CKPT_LOAD: 6e6,
        A.TRAIN: 255e6,
        A.CHECKPOINT: 230e6,
        A.BURNIN: 0.8e6,
    }
)
LOAD1 = _table(
    {
        A.IDLE: 0.6,
        A.STARTING: 9,
        A.OLD_INIT: 22,
        A.SLOW_INIT: 88,
        A.FAST_INIT: 38,
        A.CKPT_LOAD: 30,
        A.TRAIN: 44,
        A.CHECKPOINT: 71,
        A.BURNIN: 17,
    }
)
METADATA_DEMAND = _table(
    {
        A.IDLE: 1500,
        A.STARTING: 5000,
        A.OLD_INIT: 65000,
        A.SLOW_INIT: 95000,
        A.FAST_INIT: 4500,
        A.CKPT_LOAD: 2500,
        A.TRAIN: 1300,
        A.CHECKPOINT: 5200,
        A.BURNIN: 300,
    }
)
METADATA_BACKGROUND = 90_000.0
SLOTS = _table({A.IDLE: 0.4, A.STARTING: 2, A.OLD_INIT: 72, A.FAST_INIT: 94, A.CKPT_LOAD: 60, A.TRAIN: 3.5})
BACKLOG = _table({A.OLD_INIT: 1.0, A.SLOW_INIT: 700, A.CHECKPOINT: 170, A.FAST_INIT: 0.5})
RETRANSMITS_PER_S = _table({A.SLOW_INIT: 0.35, A.CHECKPOINT: 0.04, A.OLD_INIT: 0.01}, 0.0004)
LATENCY = _table(
    {
        A.IDLE: 0.0006,
        A.STARTING: 0.0009,
        A.OLD_INIT: 0.0019,
        A.SLOW_INIT: 0.052,
        A.FAST_INIT: 0.0046,
        A.CKPT_LOAD: 0.0038,
        A.TRAIN: 0.0021,
        A.CHECKPOINT: 0.0068,
        A.BURNIN: 0.0006,
    }
)
SMALL_READS = _table({A.OLD_INIT: 1.0, A.SLOW_INIT: 1.0})
GPU_TEMP = _table(
    {
        A.IDLE: 33,
        A.STARTING: 37,
        A.OLD_INIT: 38,
        A.SLOW_INIT: 39,
        A.FAST_INIT: 40,
        A.CKPT_LOAD: 45,
        A.TRAIN: 67,
        A.CHECKPOINT: 57,
        A.BURNIN: 72,
    }
)
GPU_POWER = _table(
    {
        A.IDLE: 142,
        A.STARTING: 185,
        A.OLD_INIT: 175,
        A.SLOW_INIT: 168,
        A.FAST_INIT: 205,
        A.CKPT_LOAD: 265,
        A.TRAIN: 905,
        A.CHECKPOINT: 380,
        A.BURNIN: 955,
    }
)
SM_CLOCK = _table(
    {
        A.IDLE: 345,
        A.STARTING: 1410,
        A.OLD_INIT: 1410,
        A.SLOW_INIT: 1410,
        A.FAST_INIT: 1410,
        A.CKPT_LOAD: 1755,
        A.TRAIN: causes.BOOST_CLOCK_MHZ,
        A.CHECKPOINT: 1755,
        A.BURNIN: causes.BOOST_CLOCK_MHZ,
    }
)
TRAINING = (act.TRAIN, act.CHECKPOINT)
