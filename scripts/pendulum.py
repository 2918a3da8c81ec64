#!/usr/bin/env python3
"""Another body that must swing: gymnasium's Pendulum, swung up and logged without torques.

A pendulum whose motor (at most 2) cannot lift it from below in one go: it must swing to
gather energy, then be caught upright. A scripted controller with noise drives it: pump
energy (full torque the way it turns, against it when above the energy of standing
still upright), and a PD controller within 0.5 rad of upright; one step in `--random`
(default 0.3) a random torque instead. Half of the episodes start hanging nearly at
rest, the other half anywhere (angle and speed uniform over their ranges). The state is
gymnasium's observation (cos, sin of the angle, the angular speed); a reward of 1 where a
step ends upright (within 0.2 rad, slower than 1 rad/s), terminal there; an episode cut
after 300 steps ends in a timeout.

The truth for each row is minus the fewest steps to upright from its state, by value
iteration on a 361 x 321 grid of angle and speed with the environment's own dynamics
(torques -2, -1, 0, 1, 2; bilinear between grid points), saved as `<out>_truth.npy`: V
should rank the states by it.

    python3 -m pip install numpy gymnasium
    python3 scripts/pendulum.py --out pend.npz [--steps 100000 --seed 0]
    laq train --data pend.npz --out run
    laq predict --model run/value.safetensors --data pend.npz --out v.csv
    python3 scripts/pointmaze.py score pend_truth.npy v.csv

docs/trust.md ("A car in a valley") has the figures this data gave.
"""
import numpy as np
from logs import Rows, arguments, fewest_steps

MAX_SPEED, MAX_TORQUE, DT, G = 8.0, 2.0, 0.05, 10.0
UP_ANGLE, UP_SPEED = 0.2, 1.0


def wrap(th):
    return (th + np.pi) % (2 * np.pi) - np.pi


def step(th, thdot, u):
    """gymnasium's Pendulum-v1 dynamics restated, vectorised, for the truth (m = l = 1)."""
    u = np.clip(u, -MAX_TORQUE, MAX_TORQUE)
    thdot = np.clip(thdot + (3 * G / 2 * np.sin(th) + 3.0 * u) * DT, -MAX_SPEED, MAX_SPEED)
    return th + thdot * DT, thdot


def upright(th, thdot):
    return (np.abs(wrap(th)) < UP_ANGLE) & (np.abs(thdot) < UP_SPEED)


def generate(a):
    import gymnasium as gym

    env = gym.make("Pendulum-v1").unwrapped
    env.reset(seed=a.seed)
    rng = np.random.default_rng(a.seed)
    rows, angles = Rows(a.steps), []
    while not rows.full():
        if rng.random() < 0.5:
            env.state = np.array([np.pi + rng.uniform(-0.3, 0.3), rng.uniform(-0.5, 0.5)])
        else:
            env.state = np.array([rng.uniform(-np.pi, np.pi), rng.uniform(-MAX_SPEED, MAX_SPEED)])
        if upright(*env.state):
            continue
        for t in range(300):
            th, thdot = env.state
            o = np.array([np.cos(th), np.sin(th), thdot], np.float32)
            # The swing conserves thdot^2 / 2 + 1.5 g cos(th); standing still upright,
            # 1.5 g: pump below it, brake above it, catch near the top.
            energy = 0.5 * thdot**2 + 1.5 * G * np.cos(th)
            if abs(wrap(th)) < 0.5:
                u = -10.0 * wrap(th) - 2.0 * thdot
            else:
                u = MAX_TORQUE * np.sign(thdot if thdot != 0 else 1.0)
                u = u if energy < 1.5 * G else -u
            if rng.random() < a.random:
                u = rng.uniform(-MAX_TORQUE, MAX_TORQUE)
            o2, _, _, _, _ = env.step(np.array([u], np.float32))
            hit = bool(upright(*env.state))
            angles.append((th, thdot))
            if rows.add(o, o2.astype(np.float32), hit, t == 299):
                break
    angles = np.array(angles)
    fewest = fewest_steps(step, upright, (-np.pi, -MAX_SPEED), (np.pi, MAX_SPEED), (361, 321),
                          (-2.0, -1.0, 0.0, 1.0, 2.0), periodic=True)
    truth = -fewest(angles[:, 0], angles[:, 1])
    rows.save(a.out, truth)
    print(f"{a.out}: {len(rows.rew)} transitions, {int(sum(rows.rew))} rewarded, "
          f"fewest steps to upright {np.median(-truth):.0f} (median), {np.max(-truth):.0f} (most)")


def main():
    generate(arguments(__doc__, "share of random torques"))


if __name__ == "__main__":
    main()
