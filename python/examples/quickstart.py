"""Train a value function on random walks along a corridor and use it.

    pip install ./python
    python python/examples/quickstart.py

States are (x, 1) for x in 0..9; reaching x = 9 pays 1 and ends the episode. The data
holds no actions: laq mines latent actions from the transitions, learns Q over them and
exports V, which ranks states by how close they are to the reward.
"""

import logging
import tempfile

import numpy as np

import laq

logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

rng = np.random.default_rng(0)
obs, nxt, rew, term = [], [], [], []
for _ in range(60):
    x = int(rng.integers(0, 9))
    for _ in range(20):
        x2 = min(max(x + (1 if rng.random() < 0.6 else -1), 0), 9)
        obs.append([x, 1.0])
        nxt.append([x2, 1.0])
        rew.append(1.0 if x2 == 9 else 0.0)
        term.append(x2 == 9)
        x = x2
        if x == 9:
            break

data = {
    "observations": np.array(obs, dtype=np.float32),
    "next_observations": np.array(nxt, dtype=np.float32),
    "rewards": np.array(rew, dtype=np.float32),
    "terminals": np.array(term),
}

with tempfile.TemporaryDirectory() as out:
    # Settings are named as in `laq config default`; these keep the run to seconds.
    fast: dict = {
        "second_seed": False,
        "mining.steps": 500,
        "dqn.steps": 1000,
        "distill.steps": 500,
    }
    model = laq.train(data, out=out, seed=0, **fast)
    states = np.array([[x, 1.0] for x in range(9)], dtype=np.float32)
    print("V along the corridor:", np.round(model.values(states), 3))
    best = model.select(states[[1, 7, 4]])
    print("best of x = 1, 7, 4:", [1, 7, 4][best])
