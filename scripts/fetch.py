#!/usr/bin/env python3
"""A robot arm's logs: the Fetch arm of gymnasium-robotics reaching and pushing (MuJoCo).

`FetchReach-v4` (move the gripper to a goal) or `FetchPush-v4` (push a block to a goal
on the table), driven by a scripted controller with noise, the goal drawn by the
environment for each episode. The controller, like a teleoperator without recorded
commands: reach moves the gripper towards the goal; push moves it above a point behind
the block (seen from the goal), lowers it and pushes through the block towards the goal.
In `--detour` of the episodes (default 0.3) it first heads for a point of its own (reach:
a random point in the workspace; push: a random point on the table, pushing the block
there) for 10 to 40 steps. Each action gets Gaussian noise (`--noise`, std 0.2) and,
one step in five, is replaced by a random one.

A row's state is the environment's `observation` followed by its `desired_goal` (the goal
is in the state, as Minari stores it); the reward is 1 where the step ends in success
(the environment's `is_success`: the gripper, or the block, within 5 cm of the goal),
terminal there; an episode cut after `--horizon` steps (default 100) ends in a timeout.

The truth for each row is minus the distance still to travel before the step: reach, the
gripper's distance to the goal; push, the gripper's distance to the point behind the block
plus the block's distance to the goal (a block off the table: minus 10). It is saved as
`<out>_truth.npy`: V should rank the states by it.

    python3 -m pip install numpy "mujoco==3.2.7" "gymnasium-robotics==1.4.2"
    python3 scripts/fetch.py --task push --out push.npz [--steps 100000 --seed 0]
    laq train --data push.npz --out run
    laq predict --model run/value.safetensors --data push.npz --out v.csv
    python3 scripts/pointmaze.py score push_truth.npy v.csv

docs/trust.md ("A robot arm") has the figures this data gave.
"""
import argparse

import numpy as np
from logs import Rows

# How far behind the block (from the goal) the gripper starts a push, and how far past
# the block's centre it aims while pushing: the block is 5 cm wide.
BEHIND = 0.06
THROUGH = 0.05
# Above the block while getting behind it, so the gripper does not knock it.
CLEAR = 0.06


def unit(v):
    n = np.linalg.norm(v)
    return v / n if n > 1e-9 else np.zeros_like(v)


def push_target(grip, block, goal):
    """Where the pushing controller moves the gripper next."""
    way = unit(goal[:2] - block[:2])
    behind = np.append(block[:2] - BEHIND * way, block[2])
    lined_up = np.linalg.norm(grip[:2] - behind[:2]) < 0.02
    at_height = abs(grip[2] - block[2]) < 0.015
    # Pushing: behind the block, at its height, and not past it.
    along = np.dot(grip[:2] - block[:2], way)
    across = np.linalg.norm(grip[:2] - block[:2] - along * way)
    if along < -0.02 and across < 0.02 and at_height:
        return np.append(block[:2] + THROUGH * way, block[2])
    if lined_up:
        return behind
    if grip[2] < block[2] + CLEAR - 0.01 and np.linalg.norm(grip[:2] - block[:2]) < 0.1:
        # Rise before moving across, or the gripper sweeps the block along.
        return np.append(grip[:2], block[2] + CLEAR)
    return np.append(behind[:2], block[2] + CLEAR)


def truth_of(task, obs, goal):
    grip = obs[:3]
    if task == "reach":
        return -np.linalg.norm(grip - goal)
    block = obs[3:6]
    if block[2] < 0.35:
        return -10.0
    way = unit(goal[:2] - block[:2])
    behind = np.append(block[:2] - BEHIND * way, block[2])
    return -(np.linalg.norm(grip - behind) + np.linalg.norm(block[:2] - goal[:2]))


def generate(a):
    import gymnasium as gym
    import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)
    rng = np.random.default_rng(a.seed)
    name = {"reach": "FetchReach-v4", "push": "FetchPush-v4"}[a.task]
    env = gym.make(name).unwrapped
    rows, truth = Rows(a.steps), []
    episodes = 0
    while not rows.full():
        o, _ = env.reset(seed=int(rng.integers(1 << 30)))
        episodes += 1
        goal = o["desired_goal"].copy()
        s = o["observation"].copy()
        detour = int(rng.integers(10, 41)) if rng.random() < a.detour else 0
        if a.task == "reach":
            aside = goal + rng.uniform(-0.15, 0.15, 3)
        else:
            aside = np.append(s[3:5] + rng.uniform(-0.15, 0.15, 2), goal[2])
        for t in range(a.horizon):
            heading = aside if t < detour else goal
            if a.task == "reach":
                target = heading
            else:
                target = push_target(s[:3], s[3:6], heading)
            act = np.append(np.clip(10.0 * (target - s[:3]), -1, 1), -1.0)
            act[:3] += rng.normal(0, a.noise, 3)
            if rng.random() < 0.2:
                act[:3] = rng.uniform(-1, 1, 3)
            o, _, _, _, info = env.step(np.clip(act, -1, 1))
            s2 = o["observation"].copy()
            hit = bool(info["is_success"])
            truth.append(truth_of(a.task, s, goal))
            if rows.add(np.concatenate([s, goal]), np.concatenate([s2, goal]), hit,
                        t == a.horizon - 1):
                break
            s = s2
    rows.save(a.out, truth)
    print(f"{a.out}: {len(rows.rew)} transitions, {episodes} episodes, "
          f"{int(sum(rows.rew))} rewarded")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", choices=["reach", "push"], default="push")
    p.add_argument("--steps", type=int, default=100000)
    p.add_argument("--horizon", type=int, default=100)
    p.add_argument("--noise", type=float, default=0.2, help="std of the action noise")
    p.add_argument("--detour", type=float, default=0.3, help="share of episodes with a detour")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if a.horizon < 1:
        p.error(f"--horizon {a.horizon}: at least one step")
    if not 0.0 <= a.detour <= 1.0:
        p.error(f"--detour {a.detour}: a share of the episodes, 0 to 1")
    generate(a)


if __name__ == "__main__":
    main()
