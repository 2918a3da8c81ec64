#!/usr/bin/env python3
"""Another physics, a long horizon: gymnasium's MountainCar, logged without its actions.

A car in a valley, too weak to climb the right hill directly, must swing back and forth
to build up energy: value depends on the velocity as much as on the position, and the
goal is a hundred or more steps away. `--force` and `--gravity` change the physics
(gymnasium's 0.001 and 0.0025: a weaker engine needs more swings). A scripted controller with noise drives it: push
in the direction the car moves (left at rest), one step in `--random` (default 0.3) a
random push instead. Half of the episodes start where gymnasium starts them (at rest,
position -0.6 to -0.4), the other half anywhere (position and velocity uniform over
their ranges), as logs gathered over many runs would. A reward of 1 where the car
reaches the flag (position 0.5), terminal there; an episode cut after 500 steps ends in
a timeout.

The truth for each row is minus the fewest steps to the flag from its state, by value
iteration on a 451 x 451 grid of position and velocity with the environment's own
dynamics (bilinear between grid points), saved as `<out>_truth.npy`: V should rank the
states by it.

    python3 -m pip install numpy gymnasium
    python3 scripts/mountaincar.py --out car.npz [--steps 100000 --seed 0] [--force 0.0007]
    laq train --data car.npz --out run
    laq predict --model run/value.safetensors --data car.npz --out v.csv
    python3 scripts/pointmaze.py score car_truth.npy v.csv

docs/trust.md ("A car in a valley") has the figures this data gave.
"""
import numpy as np
from logs import Rows, arguments, fewest_steps

LOW = np.array([-1.2, -0.07])
HIGH = np.array([0.6, 0.07])
FLAG = 0.5
FORCE, GRAVITY = 0.001, 0.0025


def step(pos, vel, push):
    """gymnasium's MountainCar-v0 dynamics restated, vectorised, for the truth; push in
    {-1, 0, 1} (the environment's actions 0, 1, 2)."""
    vel = np.clip(vel + push * FORCE - np.cos(3 * pos) * GRAVITY, LOW[1], HIGH[1])
    pos = np.clip(pos + vel, LOW[0], HIGH[0])
    vel = np.where((pos == LOW[0]) & (vel < 0), 0.0, vel)
    return pos, vel


def at_flag(pos, vel):
    return pos >= FLAG


def generate(a):
    import gymnasium as gym

    global FORCE, GRAVITY
    FORCE, GRAVITY = a.force, a.gravity
    env = gym.make("MountainCar-v0").unwrapped
    env.force, env.gravity = FORCE, GRAVITY
    env.reset(seed=a.seed)
    rng = np.random.default_rng(a.seed)
    rows = Rows(a.steps)
    while not rows.full():
        if rng.random() < 0.5:
            env.state = np.array([rng.uniform(-0.6, -0.4), 0.0])
        else:
            env.state = np.array([rng.uniform(LOW[0], FLAG), rng.uniform(LOW[1], HIGH[1])])
        s = env.state.astype(np.float32)
        for t in range(500):
            push = 1 if s[1] > 0 else -1
            if rng.random() < a.random:
                push = int(rng.integers(-1, 2))
            s2, _, hit, _, _ = env.step(push + 1)
            if rows.add(s, s2, hit, t == 499):
                break
            s = s2
    obs = np.array(rows.obs, np.float32)
    fewest = fewest_steps(step, at_flag, LOW, HIGH, (451, 451), (-1, 0, 1))
    truth = -fewest(obs[:, 0].astype(np.float64), obs[:, 1].astype(np.float64))
    rows.save(a.out, truth)
    print(f"{a.out}: {len(rows.rew)} transitions, {int(sum(rows.rew))} rewarded, "
          f"fewest steps to the flag {np.median(-truth):.0f} (median), {np.max(-truth):.0f} (most)")


def physics(p):
    p.add_argument("--force", type=float, default=FORCE, help="the engine's push")
    p.add_argument("--gravity", type=float, default=GRAVITY)


def main():
    a = arguments(__doc__, "share of random pushes", more=physics)
    if not (a.force > 0 and a.gravity > 0):
        raise SystemExit(f"--force {a.force}, --gravity {a.gravity}: both must be above 0")
    generate(a)


if __name__ == "__main__":
    main()
