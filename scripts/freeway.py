#!/usr/bin/env python3
"""Atari frames of another game and policy: ALE Freeway through `ale-py`.

A random policy (up 60%, no-op 30%, down 10% by default; `--up P` moves up with
probability P and splits the rest 3:1 between no-op and down; the game's sticky actions
on) plays `ALE/Freeway-v5` (four frames skipped per step) for `--steps` transitions.
`--wait K` plays as a trained agent does instead: up, unless pressing up for the next K
steps, tried on a copy of the emulator's state, gets the chicken hit, then no-op; one
step in twenty a random action (K = 5: about 65 steps a crossing, as a trained agent's
32 or so per game). `--anneal F` plays as the replay of a DQN agent in training holds
(the paper's Freeway data, after Agarwal et al. 2020): the chance of a random action falls
from 1 to the policy's own over the first F of the steps.
Observations are the last four grey frames, each reduced to `--size` x `--size` by block
means, stacked along channels (`[N, 4, S, S]` u8); a crossing gives a reward of 1; the
game's end is terminal, a truncation a timeout. The truth for each row is the chicken's height
before the step (RAM byte 14: 6 at the bottom, about 177 at the top), saved beside the
data as `<out>_truth.npy`: V should rank frames by it.

    python3 -m pip install numpy ale-py
    python3 scripts/freeway.py --out freeway.npz [--steps 50000 --size 32 --seed 0]
        [--up 0.6 | --wait 5] [--anneal 0.5]
    laq train --data freeway.npz --out run
    laq predict --model run/value.safetensors --data freeway.npz --out v.csv
    python3 scripts/pointmaze.py score freeway_truth.npy v.csv

docs/trust.md ("Long horizons in frames") has the figures this data gave.
"""
import argparse

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=50000)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--up", type=float, default=0.6)
    p.add_argument("--wait", type=int, default=0, help="look K steps ahead, waiting for gaps")
    p.add_argument("--anneal", type=float, default=0.0,
                   help="share of the steps over which random actions give way to the policy")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if not 0.0 <= a.up <= 1.0:
        p.error(f"--up {a.up}: a probability, 0 to 1")
    if a.wait < 0:
        p.error(f"--wait {a.wait}: a number of steps, 0 or more")
    if not 0.0 <= a.anneal <= 1.0:
        p.error(f"--anneal {a.anneal}: a share of the steps, 0 to 1")
    policy = [0.75 * (1.0 - a.up), a.up, 0.25 * (1.0 - a.up)]

    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    rng = np.random.default_rng(a.seed)
    env = gym.make("ALE/Freeway-v5", obs_type="grayscale")

    def small(f):
        ys = (np.arange(a.size + 1) * f.shape[0]) // a.size
        xs = (np.arange(a.size + 1) * f.shape[1]) // a.size
        sums = np.add.reduceat(np.add.reduceat(f.astype(np.float32), ys[:-1], 0), xs[:-1], 1)
        return (sums / np.outer(np.diff(ys), np.diff(xs))).round().astype(np.uint8)

    ale = env.unwrapped.ale

    def height():
        return ale.getRAM()[14]

    def clear_ahead():
        """Whether pressing up for the next `--wait` steps keeps the chicken from being
        pushed back (a crossing, from near the top to the bottom, is no hit)."""
        state, last = ale.cloneState(), height()
        clear = True
        for _ in range(4 * a.wait):
            ale.act(env.unwrapped._action_set[1])
            y = height()
            if y < last:
                clear = last >= 150
                break
            last = y
        ale.restoreState(state)
        return clear

    def act():
        if a.anneal > 0 and rng.random() < 1.0 - len(rew) / (a.anneal * a.steps):
            return rng.integers(3)
        if a.wait == 0:
            return rng.choice(3, p=policy)
        if rng.random() < 0.05:
            return rng.integers(3)
        return 1 if clear_ahead() else 0

    obs, nxt, rew, term, tout, truth = [], [], [], [], [], []
    frame, _ = env.reset(seed=a.seed)
    stack, y = [small(frame)] * 4, height()
    while len(rew) < a.steps:
        frame, r, ended, cut, _ = env.step(act())
        after = stack[1:] + [small(frame)]
        obs.append(np.stack(stack))
        nxt.append(np.stack(after))
        rew.append(r)
        term.append(ended)
        tout.append(cut and not ended)
        truth.append(y)
        stack, y = after, height()
        if ended or cut:
            frame, _ = env.reset()
            stack, y = [small(frame)] * 4, height()
    np.savez(
        a.out,
        observations=np.array(obs),
        next_observations=np.array(nxt),
        rewards=np.array(rew, np.float32),
        terminals=np.array(term),
        timeouts=np.array(tout),
    )
    np.save(a.out.removesuffix(".npz") + "_truth.npy", np.array(truth, np.float64))
    print(f"{a.out}: {len(rew)} transitions, {int(sum(rew))} crossings")


if __name__ == "__main__":
    main()
