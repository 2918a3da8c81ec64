#!/usr/bin/env python3
"""Validation data from a real physics engine: gymnasium-robotics' MuJoCo `PointMaze`.

A noisy waypoint controller wanders between random cells (it heads for the next cell of
the shortest cell path to its current goal cell, and draws a new goal on arrival), in
episodes of 1000 steps from random cells. Each row within 0.45 of a fixed target cell's
centre carries a reward of 1 and is terminal (the data run on: the next row starts a new
trajectory), or with `--nonterminal` is not (D4RL's maze2d style). The truth for each
state is minus the geodesic distance of (x, y) to the target (a 0.05 grid over the open
cells), saved beside the data as `<out>_truth.npy`.

    python3 -m pip install numpy mujoco gymnasium-robotics
    python3 scripts/pointmaze.py gen --out large.npz [--env PointMaze_Large-v3 --goal 7,9]
        [--steps 200000 --seed 0 --noise 0.1 --heavy --nonterminal --hz 100 --drop 0]
    laq train --data large.npz --out run
    laq predict --model run/value.safetensors --data large.npz --out v.csv
    python3 scripts/pointmaze.py score large_truth.npy v.csv

`score` takes any truth array with one value per row (`laq gen nav-branching --truth`
writes V* so).

`--heavy` doubles the joints' damping and halves the actuators' gear. `--hz H` logs H
rows a second instead of the physics' own 100 (a robot's logs at 400 Hz, or thinned to
25 Hz): the same motion in more or fewer rows, episodes of 10 s, the action noise scaled
to shake the ball as much per second. `--drop P` loses each logged state with chance P,
as a robot's logs lose messages: the row before it then spans two or more steps (the
controller acts on at every step; a rewarded state is always logged). docs/trust.md has
the figures this data gave.

`minari` records goal-reaching episodes with Minari's own `DataCollector`, as Minari's
D4RL PointMaze datasets are laid out: the goal is in the observation (`desired_goal`), a
new random one each episode, and the step that reaches it ends the episode as a
truncation (the next goes on from there, `--reset`: from a random start; `--uncut N`: not
cut at goals, the collector's own episodes of N steps; `--hz H` as for `gen`). The truth
is minus the geodesic distance to the goal each row's observation shows.

    python3 -m pip install "minari[create]"
    MINARI_DATASETS_PATH=datasets python3 scripts/pointmaze.py minari \
        --id pointmaze/large/goals-v0 [--env PointMaze_Large-v3 --steps 200000 --seed 0 --hz 100]
    laq train --data datasets/pointmaze/large/goals-v0 --out run

`sensors` adds what a robot's logs hold beside the state: channels of noise, channels
that wander slowly on their own (a battery, a temperature), noise on the measured
position; the rows, rewards and truth unchanged:

    python3 scripts/pointmaze.py sensors medium.npz --drift 4 --out medium_drift.npz

`frames` draws such a dataset as a camera above the maze would see the ball: two frames
stacked along channels, the ball now and one step before (its motion), `[N, 2, S, S]`
u8, the rows, rewards and truth unchanged. Long-horizon image data of another physics:

    python3 scripts/pointmaze.py frames large.npz --size 32 --out large_frames.npz
    laq train --data large_frames.npz --out run_frames
"""
import argparse
import heapq
from collections import deque

import numpy as np


# The target cell of each layout when --goal is not given: the cells the docs' runs use.
GOALS = {"PointMaze_Large": "7,9", "PointMaze_Medium": "6,6", "PointMaze_UMaze": "1,1"}


def generate(a):
    import gymnasium as gym
    import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)
    rng = np.random.default_rng(a.seed)
    env = gym.make(a.env, continuing_task=True, max_episode_steps=10**9).unwrapped
    maze = env.maze
    grid = np.array(maze.maze_map)
    if a.heavy:
        model = env.point_env.model
        model.dof_damping[:] *= 2
        model.actuator_gear[:] *= 0.5
    noise = at_rate(env.point_env, a.hz, a.noise)
    length = round(10 * a.hz)
    cells, routes = cell_routes(grid)
    goal = a.goal or next((g for k, g in GOALS.items() if a.env.startswith(k)), None)
    if goal is None:
        raise SystemExit(f"{a.env} has no default target: give --goal row,col")
    gi, gj = map(int, goal.split(","))
    if not (0 <= gi < grid.shape[0] and 0 <= gj < grid.shape[1]):
        rows, cols = grid.shape
        raise SystemExit(f"--goal {goal} lies outside the {rows}x{cols} map of {a.env}")
    if grid[gi, gj] != 0:
        raise SystemExit(f"--goal {goal} is a wall of {a.env}")
    target = maze.cell_rowcol_to_xy(np.array([gi, gj]))

    obs, nxt, rew, term, tout = [], [], [], [], []
    while len(rew) < a.steps:
        start = cells[rng.integers(len(cells))]
        o, _ = env.reset(
            seed=int(rng.integers(1 << 30)),
            options={"reset_cell": np.array(start), "goal_cell": np.array([gi, gj])},
        )
        s = o["observation"].copy()
        goal = cells[rng.integers(len(cells))]

        def step(s):
            """The controller's action at `s`, one physics step: the state it leads to and
            whether that reaches the target."""
            here = tuple(int(v) for v in maze.cell_xy_to_rowcol(s[:2]))
            way = maze.cell_rowcol_to_xy(np.array(routes[goal].get(here, goal)))
            act = np.clip(10 * (way - s[:2]) - s[2:], -1, 1) + rng.normal(0, noise, 2)
            o, *_ = env.step(np.clip(act, -1, 1))
            s2 = o["observation"].copy()
            return s2, bool(np.linalg.norm(s2[:2] - target) <= 0.45)

        for t in range(length):
            here = tuple(int(v) for v in maze.cell_xy_to_rowcol(s[:2]))
            if here == goal:
                goal = cells[rng.integers(len(cells))]
            s2, hit = step(s)
            # A lost message: the controller goes on acting, the log holds the state only
            # some steps later (a reward is never lost).
            while a.drop and not hit and rng.random() < a.drop:
                s2, hit = step(s2)
            obs.append(s)
            nxt.append(s2)
            rew.append(1.0 if hit else 0.0)
            term.append(hit and not a.nonterminal)
            tout.append(t == length - 1 and not term[-1])
            s = s2
            if len(rew) >= a.steps:
                tout[-1] = not term[-1]
                break
    obs = np.array(obs, np.float32)
    np.savez(
        a.out,
        observations=obs,
        next_observations=np.array(nxt, np.float32),
        rewards=np.array(rew, np.float32),
        terminals=np.array(term),
        timeouts=np.array(tout),
    )
    np.save(a.out.removesuffix(".npz") + "_truth.npy", -geodesic(grid, (gi, gj), obs, maze))
    print(f"{a.out}: {len(rew)} transitions, {int(sum(rew))} rewarded, {int(sum(term))} terminal")


def at_rate(point, hz, noise):
    """Log the ball `point` (gymnasium-robotics' `PointEnv`) at `hz` rows a second, and
    return the action noise that shakes it as much per second as `noise` does at 100.

    The environment steps its physics at 100 Hz; a log at another rate holds the same
    motion in more (or fewer) rows: a higher rate shortens the physics step, a lower one
    takes several physics steps a row. The noise is drawn anew each row."""
    if hz > 100:
        point.model.opt.timestep = 1.0 / hz
    elif hz < 100:
        point.frame_skip = max(1, round(100 / hz))
    return noise * np.sqrt(hz / 100)


def cell_routes(grid):
    """For each open cell, and each goal cell, the next cell on a shortest cell path."""
    rows, cols = grid.shape
    cells = [(i, j) for i in range(rows) for j in range(cols) if grid[i, j] == 0]

    def towards(goal):
        step = {goal: goal}
        queue = deque([goal])
        while queue:
            c = queue.popleft()
            for d in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                n = (c[0] + d[0], c[1] + d[1])
                if 0 <= n[0] < rows and 0 <= n[1] < cols and grid[n] == 0 and n not in step:
                    step[n] = c
                    queue.append(n)
        return step

    return cells, {c: towards(c) for c in cells}


def minari_goals(a):
    """Goal-reaching episodes recorded by Minari's own `DataCollector`, as Minari's D4RL
    PointMaze datasets are: the goal is part of the observation (a dict of `observation`,
    `achieved_goal`, `desired_goal`), a random cell's centre jittered; the waypoint
    controller heads for it; the step that reaches it is rewarded and ends the episode as
    a truncation; the next episode goes on from there to a new goal (its first observation
    still shows the old one, as the environment returns it), or with `--reset` starts from
    a reset (a random start and goal). The truth of each transition is minus the geodesic
    distance of its position to the goal its observation shows (`goal_truth`)."""
    import warnings

    import gymnasium as gym
    import gymnasium_robotics
    import minari
    from minari import DataCollector, StepDataCallback

    class EndAtGoal(StepDataCallback):
        def __call__(self, env, obs, info, action=None, rew=None, terminated=None, truncated=None):
            step = super().__call__(env, obs, info, action, rew, terminated, truncated)
            if step["info"].get("success", False):
                step["truncated"] = True
            return step

    # The controller's actions are float64 within the float32 action box; the collector
    # would warn at every step that the dtype differs.
    warnings.filterwarnings("ignore", message="Action is not in action space")
    gym.register_envs(gymnasium_robotics)
    env = gym.make(a.env, continuing_task=True, reset_target=True, max_episode_steps=10**9)
    noise = at_rate(env.unwrapped.point_env, a.hz, a.noise)
    maze = env.unwrapped.maze
    grid = np.array(maze.maze_map)
    _, routes = cell_routes(grid)
    # `--uncut N`: the collector's own episodes (the goal changes within them), a reset
    # every N steps.
    cut = {} if a.uncut else {"step_data_callback": EndAtGoal}
    env = DataCollector(env, record_infos=False, **cut)
    rng = np.random.default_rng(a.seed)
    obs, _ = env.reset(seed=a.seed)
    for t in range(a.steps):
        s, goal = obs["observation"], obs["desired_goal"]
        here = tuple(int(v) for v in maze.cell_xy_to_rowcol(s[:2]))
        cell = tuple(int(v) for v in maze.cell_xy_to_rowcol(goal))
        step = routes[cell].get(here, cell)
        way = goal if step == cell else maze.cell_rowcol_to_xy(np.array(step))
        act = np.clip(10 * (way - s[:2]) - s[2:], -1, 1) + rng.normal(0, noise, 2)
        obs, _, _, _, info = env.step(np.clip(act, -1, 1))
        if (a.reset and info["success"]) or (a.uncut and (t + 1) % a.uncut == 0):
            obs, _ = env.reset(seed=int(rng.integers(1 << 30)))
    ds = env.create_dataset(dataset_id=a.id, algorithm_name="noisy waypoint controller")
    truth = goal_truth(ds, maze)
    out = a.truth or a.id.replace("/", "_") + "_truth.npy"
    np.save(out, truth)
    where = minari.storage.get_dataset_path(a.id)
    print(f"{where}: {ds.total_steps} transitions in {ds.total_episodes} episodes; truth {out}")


def goal_truth(ds, maze):
    """Minus the geodesic distance of each row's position to the goal its observation
    shows: V is a function of the observation, and the first row of an episode that goes
    on from the last one shows that one's goal, which it has reached."""
    grid = np.array(maze.maze_map)
    pos, goal = [], []
    for ep in ds.iterate_episodes():
        pos.append(ep.observations["observation"][:-1, :2])
        goal.append(ep.observations["desired_goal"][:-1])
    pos, goal = np.concatenate(pos), np.concatenate(goal)
    cells = np.array([maze.cell_xy_to_rowcol(g) for g in goal])
    truth = np.empty(len(pos))
    for c in {tuple(int(v) for v in x) for x in cells}:
        rows = (cells[:, 0] == c[0]) & (cells[:, 1] == c[1])
        truth[rows] = -geodesic(grid, c, pos[rows], maze)
    return truth


def geodesic(grid, goal, obs, maze, res=20):
    """Shortest-path distance from each state's (x, y) to the goal cell's centre, over a
    grid of `1 / res` cells covering the open cells (8-connected)."""
    rows, cols = grid.shape
    free = np.kron(grid == 0, np.ones((res, res), bool))
    dist = np.full(free.shape, np.inf)
    src = (int((goal[0] + 0.5) * res), int((goal[1] + 0.5) * res))
    dist[src] = 0.0
    heap = [(0.0, src)]
    moves = [(dr, dc, np.hypot(dr, dc)) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc]
    while heap:
        d, (r, c) = heapq.heappop(heap)
        if d > dist[r, c]:
            continue
        for dr, dc, w in moves:
            rr, cc = r + dr, c + dc
            if 0 <= rr < free.shape[0] and 0 <= cc < free.shape[1] and free[rr, cc]:
                if d + w < dist[rr, cc]:
                    dist[rr, cc] = d + w
                    heapq.heappush(heap, (d + w, (rr, cc)))
    scale = maze.maze_size_scaling
    j = (obs[:, 0] + cols * scale / 2) / scale
    i = (rows * scale / 2 - obs[:, 1]) / scale
    ri = np.clip((i * res).astype(int), 0, free.shape[0] - 1)
    ci = np.clip((j * res).astype(int), 0, free.shape[1] - 1)
    d = dist[ri, ci] / res
    finite = np.isfinite(d)
    d[~finite] = d[finite].max()
    return d


def ranks(v):
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(len(v))
    # Ties share their average rank.
    _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=r)
    return (sums / counts)[inverse]


def score(a):
    truth = np.load(a.truth)
    # `value`, not the last column: a V learned above a cost per step has its return
    # in the log's units after it, the same order at coarser float steps.
    with open(a.values) as f:
        column = f.readline().strip().split(",").index("value")
    values = np.loadtxt(a.values, delimiter=",", skiprows=1, usecols=column)
    if len(values) != len(truth):
        raise SystemExit(f"{a.values}: {len(values)} rows, {a.truth}: {len(truth)}")
    print(f"Spearman {np.corrcoef(ranks(values), ranks(truth))[0, 1]:.3f}")


def frames(a):
    d = np.load(a.data)
    obs, nxt = d["observations"][:, :2], d["next_observations"][:, :2]
    term = d["terminals"].astype(bool)
    tout = d["timeouts"].astype(bool) if "timeouts" in d else np.zeros_like(term)
    # The position one step before: the row before, where it continues into this one.
    before = obs.copy()
    joined = ~term[:-1] & ~tout[:-1] & (np.abs(nxt[:-1] - obs[1:]).max(1) < 1e-6)
    before[1:][joined] = obs[:-1][joined]
    lo = min(obs.min(), nxt.min()) - 0.2
    hi = max(obs.max(), nxt.max()) + 0.2
    centres = (np.arange(a.size) + 0.5) / a.size * (hi - lo) + lo
    sigma = 0.8 * (hi - lo) / a.size

    def draw(p):
        # A Gaussian ball of 0.8 pixels; rows are y (image row 0 at the lowest y).
        gx = np.exp(-((centres[None, :] - p[:, :1]) ** 2) / (2 * sigma**2))
        gy = np.exp(-((centres[None, :] - p[:, 1:]) ** 2) / (2 * sigma**2))
        return (255 * gy[:, :, None] * gx[:, None, :]).round().astype(np.uint8)

    def stack(now, then):
        out = np.empty((len(now), 2, a.size, a.size), np.uint8)
        for i in range(0, len(now), 20000):
            out[i : i + 20000, 0] = draw(now[i : i + 20000])
            out[i : i + 20000, 1] = draw(then[i : i + 20000])
        return out

    keep = {k: d[k] for k in ("rewards", "terminals", "timeouts") if k in d}
    np.savez(a.out, observations=stack(obs, before), next_observations=stack(nxt, obs), **keep)
    print(f"{a.out}: {len(obs)} transitions of [2, {a.size}, {a.size}] frames")


def sensors(a):
    """The same rows as a robot's logs hold them: `--noise K` channels of sensor noise
    (unit Gaussian, drawn anew each row), `--drift K` channels that wander slowly and
    independently of the ball (a battery, a temperature: random walks of step 0.02 per
    row, drawn anew where the data does not run on into the next row), `--pos-noise S`
    Gaussian noise of std S on the measured position (x, y), `--battery` a battery's level
    (from U(0.8, 1) where the data does not run on into the next row, then down 0.0005 a
    row, sd 0.0002), `--episode-clock` the steps since the trajectory began / 100. A row's
    next observation carries the next row's channels where the data runs on; the truth is
    unchanged."""
    d = dict(np.load(a.data))
    obs, nxt = d["observations"].astype(np.float64), d["next_observations"].astype(np.float64)
    rng = np.random.default_rng(a.seed)
    n = len(obs)
    runs_on = np.zeros(n, bool)
    runs_on[:-1] = np.abs(nxt[:-1] - obs[1:]).max(1) < 1e-6

    def following(now, fresh):
        after = np.empty_like(now)
        after[:-1] = now[1:]
        after[~runs_on] = fresh((~runs_on).sum())
        return after

    extra, extra_next = [], []
    if a.noise:
        now = rng.normal(size=(n, a.noise))
        extra.append(now)
        extra_next.append(following(now, lambda m: rng.normal(size=(m, a.noise))))
    if a.drift:
        now, after = np.empty((n, a.drift)), np.empty((n, a.drift))
        cur = rng.normal(size=a.drift)
        for i in range(n):
            now[i] = cur
            cur = cur + rng.normal(scale=0.02, size=a.drift)
            after[i] = cur
            if not runs_on[i]:
                cur = rng.normal(size=a.drift)
        extra.append(now)
        extra_next.append(after)
    if a.battery or a.episode_clock:
        level, steps = rng.uniform(0.8, 1.0), 0
        now, after = np.empty((n, 2)), np.empty((n, 2))
        for i in range(n):
            now[i] = level, steps / 100
            level, steps = level - 0.0005 + rng.normal(scale=0.0002), steps + 1
            after[i] = level, steps / 100
            if not runs_on[i]:
                level, steps = rng.uniform(0.8, 1.0), 0
        for j, wanted in enumerate([a.battery, a.episode_clock]):
            if wanted:
                extra.append(now[:, j : j + 1])
                extra_next.append(after[:, j : j + 1])
    if a.pos_noise:
        e = rng.normal(scale=a.pos_noise, size=(n, 2))
        obs[:, :2] += e
        nxt[:, :2] += following(e, lambda m: rng.normal(scale=a.pos_noise, size=(m, 2)))
    d["observations"] = np.concatenate([obs] + extra, 1).astype(np.float32)
    d["next_observations"] = np.concatenate([nxt] + extra_next, 1).astype(np.float32)
    np.savez(a.out, **d)
    truth = a.data[: -len(".npz")] + "_truth.npy"
    if a.data.endswith(".npz") and a.out.endswith(".npz"):
        try:
            np.save(a.out[: -len(".npz")] + "_truth.npy", np.load(truth))
        except FileNotFoundError:
            pass
    print(f"{a.out}: {n} transitions of {d['observations'].shape[1]} values")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen", help="generate a dataset and its truth")
    g.add_argument("--env", default="PointMaze_Large-v3")
    g.add_argument(
        "--goal",
        help="the target cell, row,col of the maze map (default: 7,9 large, 6,6 medium, "
        "1,1 U-maze)",
    )
    g.add_argument("--steps", type=int, default=200000)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--noise", type=float, default=0.1, help="std of the action noise")
    g.add_argument("--heavy", action="store_true")
    g.add_argument("--nonterminal", action="store_true")
    g.add_argument(
        "--drop", type=float, default=0.0, help="the chance that a row's message is lost"
    )
    g.add_argument(
        "--hz", type=float, default=100, help="rows a second (the physics steps at 100 Hz)"
    )
    g.add_argument("--out", required=True)
    s = sub.add_parser("score", help="Spearman of `laq predict`'s values against the truth")
    s.add_argument("truth")
    s.add_argument("values")
    m = sub.add_parser("minari", help="goal-reaching episodes written by Minari, goals in the state")
    m.add_argument("--env", default="PointMaze_Large-v3")
    m.add_argument("--steps", type=int, default=200000)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--noise", type=float, default=0.1, help="std of the action noise")
    m.add_argument("--id", default="pointmaze/large/goals-v0", help="the Minari dataset id")
    m.add_argument(
        "--reset",
        action="store_true",
        help="start each episode from a reset (a random start), not where the last one ended",
    )
    m.add_argument(
        "--uncut",
        type=int,
        metavar="N",
        help="do not end an episode at its goal (the goal changes within it); reset every N steps",
    )
    m.add_argument(
        "--hz", type=float, default=100, help="rows a second (the physics steps at 100 Hz)"
    )
    m.add_argument("--truth", help="where the truth goes (default: the id, / as _, _truth.npy)")
    f = sub.add_parser("frames", help="draw a dataset's positions as stacked frames")
    f.add_argument("data")
    f.add_argument("--size", type=int, default=32, help="frame width and height in pixels")
    f.add_argument("--out", required=True)
    c = sub.add_parser("sensors", help="add a robot's irrelevant or noisy channels to a dataset")
    c.add_argument("data")
    c.add_argument("--noise", type=int, default=0, metavar="K", help="channels of noise")
    c.add_argument("--drift", type=int, default=0, metavar="K", help="slowly wandering channels")
    c.add_argument("--pos-noise", type=float, default=0.0, metavar="S", help="std on (x, y)")
    c.add_argument("--battery", action="store_true", help="a battery draining each episode")
    c.add_argument("--episode-clock", action="store_true", help="steps since the episode began")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--out", required=True)
    a = p.parse_args()
    {"gen": generate, "score": score, "frames": frames, "minari": minari_goals,
     "sensors": sensors}[a.cmd](a)


if __name__ == "__main__":
    main()
