#!/usr/bin/env python3
"""A two-joint arm's logs: gymnasium's MuJoCo `Reacher-v5`, the state as its joints read it.

The arm (links of 0.10 and 0.11, a torque on each joint) moves its fingertip to a target
drawn by the environment for each episode, from a random configuration. A row's state is
what a robot's logs hold: its joint angles (cos and sin of each), the target's (x, y) and
its joint velocities; the fingertip's position, which the environment's own observation
adds, is left out, so V must learn where the fingertip is from the angles (`--cartesian`
keeps it). The reward is 1 where a step ends with the fingertip within 2 cm of the
target, terminal there; an episode cut after 100 steps ends in a timeout.

The controller, like a teleoperator without recorded commands: a PD law on the joints
towards the configuration that puts the fingertip on the target (of the two, elbow up or
down, the one nearer in the joints), with Gaussian noise on each torque (`--noise`, std
0.3), one step in five (`--random`, 0.2) a random torque, and in `--detour` of the
episodes (0.3) first a random configuration for 10 to 40 steps.

The truth for each row is minus the joints' distance to the nearer of those two
configurations (radians; velocities ignored): the arm moves its joints, and a joint
turns as fast as the other. `<out>_truth.npy` holds it; `<out>_tip_truth.npy` holds
minus the fingertip's distance to the target, which is not what the arm must travel.

    python3 -m pip install numpy "mujoco==3.2.7" "gymnasium==1.4.0"
    python3 scripts/reacher.py --out reacher.npz [--steps 100000 --seed 0]
    laq train --data reacher.npz --out run
    laq predict --model run/value.safetensors --data reacher.npz --out v.csv
    python3 scripts/pointmaze.py score reacher_truth.npy v.csv

docs/trust.md ("A robot arm") has the figures this data gave.
"""
import numpy as np
from logs import Rows, arguments

LINKS = (0.1, 0.11)
REACHED = 0.02
HORIZON = 100


def wrap(a):
    return (a + np.pi) % (2 * np.pi) - np.pi


def tip(q):
    """The fingertip's (x, y) at joint angles `q`."""
    a, b = q[..., 0], q[..., 0] + q[..., 1]
    return np.stack(
        [LINKS[0] * np.cos(a) + LINKS[1] * np.cos(b), LINKS[0] * np.sin(a) + LINKS[1] * np.sin(b)],
        axis=-1,
    )


def solutions(target):
    """The two joint configurations (elbow one way and the other) that put the fingertip
    on `target`."""
    r2 = float(np.dot(target, target))
    c = np.clip((r2 - LINKS[0] ** 2 - LINKS[1] ** 2) / (2 * LINKS[0] * LINKS[1]), -1.0, 1.0)
    out = []
    for elbow in (np.arccos(c), -np.arccos(c)):
        shoulder = np.arctan2(target[1], target[0]) - np.arctan2(
            LINKS[1] * np.sin(elbow), LINKS[0] + LINKS[1] * np.cos(elbow)
        )
        out.append(np.array([wrap(shoulder), elbow]))
    return out


def joints_apart(q, s):
    """The joints' distance between configurations `q` and `s` (the shoulder turns
    freely; the elbow, limited to +-3, does not wrap)."""
    return np.hypot(wrap(q[0] - s[0]), q[1] - s[1])


def nearest(q, target):
    """Of the two configurations that reach `target`, the one nearer `q` in the joints."""
    return min(solutions(target), key=lambda s: joints_apart(q, s))


def main():
    def more(p):
        p.add_argument("--noise", type=float, default=0.3, help="std of the torque noise")
        p.add_argument("--detour", type=float, default=0.3, help="share of episodes with a detour")
        p.add_argument("--cartesian", action="store_true", help="keep the fingertip's offset")

    a = arguments(
        __doc__, "share of random torques", random=0.2, more=more,
        shares=[("detour", "the episodes")],
    )

    import gymnasium as gym

    rng = np.random.default_rng(a.seed)
    env = gym.make("Reacher-v5").unwrapped
    env.reset(seed=a.seed)

    def state():
        o = env._get_obs()
        # cos q0, cos q1, sin q0, sin q1, target x, y, velocities, fingertip - target.
        return o if a.cartesian else o[:8]

    rows, truth, tip_truth = Rows(a.steps), [], []
    while not rows.full():
        env.reset(seed=int(rng.integers(1 << 30)))
        goal = env.goal.copy()
        if np.linalg.norm(goal) < 0.03:
            continue
        qpos = env.data.qpos.copy()
        qpos[0] = rng.uniform(-np.pi, np.pi)
        qpos[1] = rng.uniform(-2.8, 2.8)
        env.set_state(qpos, np.zeros(env.model.nv))
        detour = int(rng.integers(10, 41)) if rng.random() < a.detour else 0
        aside = np.array([rng.uniform(-np.pi, np.pi), rng.uniform(-2.8, 2.8)])
        for t in range(HORIZON):
            q = env.data.qpos[:2].copy()
            w = env.data.qvel[:2].copy()
            s = state()
            want = aside if t < detour else nearest(q, goal)
            err = np.array([wrap(want[0] - q[0]), want[1] - q[1]])
            act = np.clip(2.0 * err - 0.3 * w, -1, 1) + rng.normal(0, a.noise, 2)
            if rng.random() < a.random:
                act = rng.uniform(-1, 1, 2)
            env.do_simulation(np.clip(act, -1, 1), env.frame_skip)
            s2 = state()
            hit = bool(np.linalg.norm(tip(env.data.qpos[:2]) - goal) <= REACHED)
            truth.append(-joints_apart(q, nearest(q, goal)))
            tip_truth.append(-float(np.linalg.norm(tip(q) - goal)))
            if rows.add(s, s2, hit, t == HORIZON - 1):
                break
    rows.save(a.out, truth)
    np.save(a.out.removesuffix(".npz") + "_tip_truth.npy", np.asarray(tip_truth, np.float32))
    print(
        f"{a.out}: {len(rows.rew)} transitions, {int(sum(rows.term))} reached, "
        f"{int(sum(rows.tout))} timed out"
    )


if __name__ == "__main__":
    main()
