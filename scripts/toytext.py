#!/usr/bin/env python3
"""Discrete spaces, logged as gymnasium logs them: Taxi, FrozenLake, CliffWalking.

- `--env taxi` (the default): a taxi on a 5 x 5 grid with walls drives to a passenger,
  picks them up and drops them at another stand, so the value of a place depends on
  whether the passenger is aboard, and the reward comes only at the end of both stages.
  An illegal pick-up or drop-off costs 10.
- `--env frozenlake`: the 8 x 8 frozen lake, crossed to a goal between holes that end
  the episode; the ice is slippery (each move goes one of three ways, at random) unless
  `--firm`.
- `--env cliff`: the 4 x 12 cliff walk, where a step off the cliff costs 100 and puts the
  walker back at the start.

A controller with noise drives the body: the action of the best odds of reaching the
goal soon, one step in `--random` (default 0.3) a random one. Episodes start where
gymnasium starts them and are cut after 200 steps.

The observation is what gymnasium gives, one number a row that codes the state (`--obs
code`, the default), or its parts (`--obs decoded`: Taxi's row, column, passenger and
destination; the lake's or cliff's row and column). The rewards are gymnasium's
(`--reward env`) or 1 on reaching the goal alone (`--reward sparse`).

The truth for each row is the optimal discounted chance of reaching the goal from its
state (0.99 a step), by value iteration on the environment's own transition table, saved
as `<out>_truth.npy`: where moves are certain, the fewest steps to the goal rank states
alike. V should rank the states by it.

    python3 -m pip install numpy gymnasium
    python3 scripts/toytext.py --out taxi.npz [--env taxi --steps 50000 --seed 0]
    laq train --data taxi.npz --out run
    laq predict --model run --data taxi.npz --out v.csv
    python3 scripts/pointmaze.py score taxi_truth.npy v.csv

docs/trust.md ("Discrete spaces as gymnasium logs them") has the figures this data gave.
"""
import numpy as np
from logs import arguments, save

ENVS = {
    "taxi": (("Taxi-v4", "Taxi-v3"), {}),
    "frozenlake": (("FrozenLake-v1",), {"map_name": "8x8"}),
    "cliff": (("CliffWalking-v1", "CliffWalking-v0"), {}),
}
GAMMA = 0.99


def make(a):
    import gymnasium as gym

    names, kwargs = ENVS[a.env]
    if a.env == "frozenlake":
        kwargs = {**kwargs, "is_slippery": not a.firm}
    for name in names:
        try:
            return gym.make(name, **kwargs)
        except gym.error.Error:
            continue
    raise SystemExit(f"gymnasium has none of {names}")


def succeeds(env_name, r, done):
    """Whether a transition of the table reaches the goal."""
    return done and (r > 0 if env_name != "cliff" else True)


def optimal(table, env_name):
    """The optimal discounted chance of reaching the goal from each state, and each
    state's best actions' values, by value iteration over the transition table."""
    n, k = len(table), len(table[0])
    v = np.zeros(n)
    for _ in range(10_000):
        q = np.array([[sum(p * (1.0 if succeeds(env_name, r, d) else (0.0 if d else GAMMA * v[s2]))
                           for p, s2, r, d in table[s][u]) for u in range(k)] for s in range(n)])
        best = q.max(axis=1)
        if np.max(np.abs(best - v)) < 1e-10:
            return best, q
        v = best
    return v, q


def generate(a):
    env = make(a)
    table = env.unwrapped.P
    truth_of, q = optimal(table, a.env)
    rng = np.random.default_rng(a.seed)
    ncol = getattr(env.unwrapped, "ncol", None) or getattr(env.unwrapped, "shape", (0, 12))[1]
    obs, nxt, rew, term, tout, truth = [], [], [], [], [], []

    def row(s):
        if a.obs == "code":
            return [s]
        if a.env == "taxi":
            return list(env.unwrapped.decode(s))
        return list(divmod(int(s), ncol))

    episode, goals = 0, 0
    while len(rew) < a.steps:
        s, _ = env.reset(seed=a.seed * 1_000_003 + episode)
        episode += 1
        for t in range(200):
            k = q.shape[1]
            act = int(rng.integers(k)) if rng.random() < a.random else int(np.argmax(q[s]))
            s2, r, done, cut, _ = env.step(act)
            goal = succeeds(a.env, r, done)
            goals += goal
            obs.append(row(s))
            nxt.append(row(s2))
            rew.append(float(r) if a.reward == "env" else float(goal))
            term.append(bool(done))
            last = cut or t == 199 or len(rew) >= a.steps
            tout.append(not done and last)
            truth.append(truth_of[s])
            if done or last:
                break
            s = s2
    save(a.out, obs, nxt, rew, term, tout, truth)
    print(f"{a.out}: {len(rew)} transitions, {goals} goals reached in {episode} episodes, "
          f"{len(set(map(tuple, obs)))} distinct states")


def main():
    def more(p):
        p.add_argument("--env", choices=sorted(ENVS), default="taxi")
        p.add_argument("--obs", choices=("code", "decoded"), default="code")
        p.add_argument("--reward", choices=("env", "sparse"), default="env")
        p.add_argument("--firm", action="store_true", help="frozenlake: ice that is not slippery")

    generate(arguments(__doc__, "share of random actions", more=more))


if __name__ == "__main__":
    main()
