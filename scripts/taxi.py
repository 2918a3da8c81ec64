#!/usr/bin/env python3
"""A task in two stages, logged as a discrete environment logs it: gymnasium's Taxi.

A taxi on a 5 x 5 grid with walls must drive to a passenger waiting at one of four
stands, pick them up and drop them at another: the value of a place depends on whether
the passenger is aboard, and the reward comes only at the end of both stages. A
controller with noise drives it: the fewest-steps action, one step in `--random`
(default 0.3) a random one of the six (the moves, pick-up and drop-off, which cost 10
where illegal). Episodes start where gymnasium starts them and are cut after 200 steps.

The observation is what gymnasium gives, one number a row that encodes the taxi's row
and column, where the passenger is and the destination (`--obs code`, the default), or
those four values decoded (`--obs decoded`). The rewards are gymnasium's (`--reward env`:
-1 a step, +20 for the drop-off, which ends the episode, -10 for an illegal pick-up or
drop-off) or 1 for the drop-off alone (`--reward sparse`).

The truth for each row is minus the fewest steps to finish the ride from its state,
found from the environment's own transition table, saved as `<out>_truth.npy`: V should
rank the states by it.

    python3 -m pip install numpy gymnasium
    python3 scripts/taxi.py --out taxi.npz [--steps 50000 --seed 0 --obs code --reward env]
    laq train --data taxi.npz --out run
    laq predict --model run --data taxi.npz --out v.csv
    python3 scripts/pointmaze.py score taxi_truth.npy v.csv

docs/trust.md ("A ride in two stages") has the figures this data gave.
"""
import numpy as np
from logs import arguments, save


def fewest_steps(table):
    """The fewest steps to a drop-off from each state of Taxi's transition table (every
    transition is certain), by value iteration."""
    n = len(table)
    steps = np.full(n, np.inf)
    for _ in range(n):
        best = steps.copy()
        for s in range(n):
            for (_, s2, _, done) in (t[0] for t in table[s].values()):
                best[s] = min(best[s], 1.0 + (0.0 if done else steps[s2]))
        if np.array_equal(best, steps):
            break
        steps = best
    return steps


def generate(a):
    import gymnasium as gym

    try:
        env = gym.make("Taxi-v4")
    except gym.error.Error:
        env = gym.make("Taxi-v3")  # gymnasium before 1.2
    table = env.unwrapped.P
    fewest = fewest_steps(table)
    rng = np.random.default_rng(a.seed)
    obs, nxt, rew, term, tout, truth = [], [], [], [], [], []

    def row(s):
        return [s] if a.obs == "code" else list(env.unwrapped.decode(s))

    episode = 0
    while len(rew) < a.steps:
        s, _ = env.reset(seed=a.seed * 1_000_003 + episode)
        episode += 1
        for t in range(200):
            if rng.random() < a.random:
                act = int(rng.integers(6))
            else:
                # The fewest-steps action (ties to the first).
                act = min(range(6), key=lambda u: 1.0 + (0.0 if table[s][u][0][3]
                                                         else fewest[table[s][u][0][1]]))
            s2, r, done, cut, _ = env.step(act)
            obs.append(row(s))
            nxt.append(row(s2))
            rew.append(float(r) if a.reward == "env" else float(done))
            term.append(bool(done))
            last = cut or t == 199 or len(rew) >= a.steps
            tout.append(not done and last)
            truth.append(-fewest[s])
            if done or last:
                break
            s = s2
    save(a.out, obs, nxt, rew, term, tout, truth)
    print(f"{a.out}: {len(rew)} transitions, {sum(term)} rides in {episode} episodes, fewest "
          f"steps to a drop-off {np.median(-np.array(truth)):.0f} (median), "
          f"{np.max(-np.array(truth)):.0f} (most); {len(set(map(tuple, obs)))} distinct states")


def main():
    def more(p):
        p.add_argument("--obs", choices=("code", "decoded"), default="code")
        p.add_argument("--reward", choices=("env", "sparse"), default="env")

    a = arguments(__doc__, "share of random actions", more=more)
    generate(a)


if __name__ == "__main__":
    main()
