#!/usr/bin/env python3
"""Frames another tool renders, at a size no network was built for: Farama's MiniGrid.

The agent of `MiniGrid-FourRooms-v0` (a 19 x 19 grid of four rooms; `--env` names another
MiniGrid environment) turns left, turns right or steps forward; its layout and its goal
are those of the environment reset with `--layout` (default 3), and every episode starts
it on a random free cell (one it can reach the goal from) facing a random way. A noisy
waypoint controller drives it, as logs gathered without a task would: it heads for a random free cell by the fewest
actions, then another, one action in `--random` (default 0.2) a random one instead.
Stepping onto the goal gives a reward of 1 and ends the episode (MiniGrid's own reward
falls with the steps since the reset; here the reward is the goal's alone, so that V has
one truth); an episode cut after 500 steps ends in a timeout.

Observations are MiniGrid's own rendering of the whole grid (`RGBImgObsWrapper`), `--tile`
pixels a cell (default 4: 76 x 76 RGB), stored as gymnasium gives them, channels last
(`[N, H, W, 3]` u8); `--view partial` stores the agent's own 7 x 7 cells ahead instead
(`RGBImgPartialObsWrapper`: 28 x 28 at the default tile), where many places look alike.
The truth for each row is minus the fewest actions from its pose (cell and facing) to the
goal, by breadth-first search, saved as `<out>_truth.npy`: V should rank the frames by it.

    python3 -m pip install numpy minigrid
    python3 scripts/rooms.py --out grid.npz [--steps 30000 --tile 4 --seed 0]
    laq train --data grid.npz --out run
    laq predict --model run/value.safetensors --data grid.npz --out v.csv
    python3 scripts/pointmaze.py score grid_truth.npy v.csv

`--minari ID` records the environment's own observations through Minari's
`DataCollector` instead, as Minari's MiniGrid datasets hold them: a dict of `direction`,
`image` (the symbolic encoding of the 7 x 7 cells ahead, `[7, 7, 3]` u8: object, colour,
state) and `mission` (text); with `--view full`, `image` is the whole grid so encoded
(`FullyObsWrapper`, as the `optimal-fullobs` datasets). The same layout, starts,
controller and reward; the truth, in the dataset's row order, is saved at `--out`.

    python3 -m pip install numpy minigrid "minari[create]"
    MINARI_DATASETS_PATH=datasets python3 scripts/rooms.py --minari minigrid/rooms/noisy-v0 --out rooms_truth.npy
    laq train --data datasets/minigrid/rooms/noisy-v0 --out run

docs/trust.md ("Frames another tool renders") has the figures this data gave.
"""
from collections import deque

import numpy as np
from logs import arguments

LEFT, RIGHT, FORWARD = 0, 1, 2


def fewest_actions(free, target, dir_vec):
    """The fewest actions (left, right, forward) from every (x, y, facing) to stand on
    `target`: breadth-first search backwards from it; unreachable poses are absent."""
    steps = {(target[0], target[1], d): 0 for d in range(4)}
    todo = deque(steps)
    while todo:
        x, y, d = todo.popleft()
        n = steps[(x, y, d)] + 1
        before = [(x, y, (d + 1) % 4), (x, y, (d - 1) % 4)]  # turned left, turned right
        bx, by = x - dir_vec[d][0], y - dir_vec[d][1]
        if (bx, by) in free:
            before.append((bx, by, d))  # stepped forward
        for p in before:
            if p not in steps:
                steps[p] = n
                todo.append(p)
    return steps


def layout(u, a):
    """The free cells of the reset grid `u`, its goal, the unit step of each facing, the
    fewest actions to the goal from every pose, and the cells to start from."""
    from minigrid.core.constants import DIR_TO_VEC

    cells = [(i, j) for i in range(u.width) for j in range(u.height)]
    free = {c for c in cells if u.grid.get(*c) is None or u.grid.get(*c).can_overlap()}
    goals = [c for c in cells if u.grid.get(*c) is not None and u.grid.get(*c).type == "goal"]
    if len(goals) != 1:
        raise SystemExit(f"{a.env}: {len(goals)} goals with --layout {a.layout}; one is needed")
    goal = goals[0]
    dir_vec = [tuple(int(v) for v in DIR_TO_VEC[d]) for d in range(4)]
    to_goal = fewest_actions(free, goal, dir_vec)
    # Cells walled off from the goal (a crossing's closed pockets) are never visited.
    starts = sorted(c for c in free if c != goal and (c[0], c[1], 0) in to_goal)
    return free, goal, dir_vec, to_goal, starts


def controller(a, free, goal, dir_vec, starts, rng):
    """The noisy waypoint controller: a function of the pose, for one episode."""
    plan = {"waypoint": None}

    def act(pose):
        if plan["waypoint"] is None or pose[:2] == plan["waypoint"]:
            plan["waypoint"] = starts[rng.integers(len(starts))]
            if rng.random() < 0.25:
                plan["waypoint"] = goal
            plan["to"] = fewest_actions(free, plan["waypoint"], dir_vec)
        if rng.random() < a.random:
            return int(rng.integers(3))
        return best_action(pose, plan["to"], free, dir_vec)

    return act


def generate(a):
    import gymnasium as gym
    from minigrid.wrappers import RGBImgObsWrapper, RGBImgPartialObsWrapper

    env = gym.make(a.env, max_steps=10**9)
    wrap = RGBImgObsWrapper if a.view == "full" else RGBImgPartialObsWrapper
    view = wrap(env, tile_size=a.tile)
    u = env.unwrapped
    view.reset(seed=a.layout)
    free, goal, dir_vec, to_goal, starts = layout(u, a)
    rng = np.random.default_rng(a.seed)
    obs, rew, term, tout, truth = [], [], [], [], []
    nxt = []
    while len(rew) < a.steps:
        view.reset(seed=a.layout)
        u.agent_pos = np.array(starts[rng.integers(len(starts))])
        u.agent_dir = int(rng.integers(4))
        s = view.observation(u.gen_obs())["image"]
        act = controller(a, free, goal, dir_vec, starts, rng)
        for t in range(500):
            pose = (int(u.agent_pos[0]), int(u.agent_pos[1]), int(u.agent_dir))
            _, _, hit, _, _ = view.step(act(pose))
            s2 = view.observation(u.gen_obs())["image"]
            obs.append(s)
            nxt.append(s2)
            truth.append(-to_goal[pose])
            rew.append(1.0 if hit else 0.0)
            term.append(bool(hit))
            last = t == 499 or len(rew) >= a.steps
            tout.append(not hit and last)
            if hit or last:
                break
            s = s2
    np.savez(
        a.out,
        observations=np.array(obs, np.uint8),
        next_observations=np.array(nxt, np.uint8),
        rewards=np.array(rew, np.float32),
        terminals=np.array(term),
        timeouts=np.array(tout),
    )
    np.save(a.out.removesuffix(".npz") + "_truth.npy", np.asarray(truth, np.float32))
    print(f"{a.out}: {len(rew)} transitions of {obs[0].shape} frames, {int(sum(rew))} rewarded, "
          f"fewest actions to the goal {np.median(-np.array(truth)):.0f} (median), "
          f"{-min(truth)} (most)")


def minari_rooms(a):
    """The same episodes recorded by Minari's `DataCollector` with the environment's own
    observations (see the module's docstring)."""
    import string

    import gymnasium as gym
    import minari
    from minari import DataCollector
    from minigrid.wrappers import FullyObsWrapper

    rng = np.random.default_rng(a.seed)

    class Start(gym.Wrapper):
        """Each reset: the layout `--layout`, the agent on a random start facing a random
        way. The reward is 1 on the goal (MiniGrid's own falls with the steps taken). The
        mission is text, as Minari stores it (it cannot store MiniGrid's own space)."""

        def __init__(self, env):
            super().__init__(env)
            chars = string.ascii_letters + string.digits + " ,.'-"
            self.observation_space = gym.spaces.Dict(
                {**env.observation_space.spaces, "mission": gym.spaces.Text(200, charset=chars)}
            )

        def reset(self, *, seed=None, options=None):
            self.env.reset(seed=a.layout)
            u = self.env.unwrapped
            u.agent_pos = np.array(starts[rng.integers(len(starts))])
            u.agent_dir = int(rng.integers(4))
            return u.gen_obs(), {}

        def step(self, action):
            obs, _, hit, cut, info = self.env.step(action)
            return obs, 1.0 if hit else 0.0, hit, cut, info

    inner = gym.make(a.env, max_steps=500)
    u = inner.unwrapped
    inner.reset(seed=a.layout)
    free, goal, dir_vec, to_goal, starts = layout(u, a)
    env = Start(inner)
    if a.view == "full":
        env = FullyObsWrapper(env)
    env = DataCollector(env, record_infos=False)
    truth, steps = [], 0
    while steps < a.steps:
        env.reset()
        act = controller(a, free, goal, dir_vec, starts, rng)
        while True:
            pose = (int(u.agent_pos[0]), int(u.agent_pos[1]), int(u.agent_dir))
            truth.append(-to_goal[pose])
            steps += 1
            _, _, hit, cut, _ = env.step(act(pose))
            if hit or cut:
                break
    ds = env.create_dataset(dataset_id=a.minari, algorithm_name="noisy waypoint controller")
    np.save(a.out, np.asarray(truth, np.float32))
    where = minari.storage.get_dataset_path(a.minari)
    print(f"{where}: {ds.total_steps} transitions in {ds.total_episodes} episodes; truth {a.out}")


def best_action(pose, plan, free, dir_vec):
    """The action that brings `pose` one step nearer the plan's target."""
    x, y, d = pose
    dx, dy = dir_vec[d]
    after = {LEFT: (x, y, (d - 1) % 4), RIGHT: (x, y, (d + 1) % 4)}
    if (x + dx, y + dy) in free:
        after[FORWARD] = (x + dx, y + dy, d)
    return min(after, key=lambda k: (plan.get(after[k], 10**9), k))


def main():
    def more(p):
        p.add_argument("--env", default="MiniGrid-FourRooms-v0")
        p.add_argument("--layout", type=int, default=3, help="the seed of the layout and goal")
        p.add_argument("--tile", type=int, default=4, help="pixels a cell")
        p.add_argument("--view", choices=("full", "partial"), default="full")
        p.add_argument("--minari", metavar="ID", help="record through Minari as this dataset id")
        p.set_defaults(steps=30000)

    a = arguments(__doc__, "share of random actions", random=0.2, more=more)
    if a.tile < 1:
        raise SystemExit(f"--tile {a.tile}: pixels a cell, 1 or more")
    if a.minari:
        minari_rooms(a)
    else:
        generate(a)


if __name__ == "__main__":
    main()
