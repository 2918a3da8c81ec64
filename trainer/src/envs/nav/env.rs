//! The environment: a map, its pose graph, exact distances to its goals and the
//! macro-actions between junctions.

use super::*;

/// A macro-action: move to the next junction along one free direction.
#[derive(Clone, Debug, PartialEq)]
pub struct Macro {
    /// Direction of departure as a heading index (0 east, 3 south, 6 west, 9 north).
    pub heading: usize,
    /// Cells along the way, from the current one to the junction.
    pub cells: Vec<(usize, usize)>,
    pub actions: Vec<usize>,
    /// Pose at the end: within `ARRIVE_RADIUS` of the junction's centre, facing the way it
    /// arrived, or inside a goal's radius where the episode ends.
    pub end: Pose,
    pub goal: Option<Goal>,
    /// Metres moved.
    pub length: f64,
    /// The frame seen at `end`: the map is known, so this is the view the controller leads
    /// to.
    pub view: Vec<u8>,
}

/// Open cells and goal positions, for plots.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub rows: usize,
    pub cols: usize,
    /// Row-major, `rows * cols`.
    pub open: Vec<bool>,
    pub start: Vec<(usize, usize)>,
    /// Goal centres in metres (x, y).
    pub goals: Vec<(Goal, (f32, f32))>,
    pub waypoint: Option<(f32, f32)>,
}

/// The environment: a map, its pose graph and the exact distances to its goals.
#[derive(Clone, Debug)]
pub struct Nav {
    pub map: Map,
    pub gamma: f64,
    pub near_reward: f32,
    pub far_reward: f32,
    pub(super) graph: Graph,
    pub(super) to_near: Vec<u32>,
    pub(super) to_far: Vec<u32>,
    pub(super) to_waypoint: Option<Vec<u32>>,
    pub(super) geo_near: Vec<f32>,
    pub(super) geo_far: Vec<f32>,
}

impl Nav {
    /// Builds the pose graph and the distance tables (about 0.1 s for the default map).
    pub fn new(map: Map) -> Nav {
        let graph = Graph::new(&map);
        let near = Map::centre_units(map.near);
        let far = Map::centre_units(map.far);
        let to = |c: (i32, i32)| graph.bfs(|p| within(p.gx, p.gy, c, GOAL_RADIUS), None);
        let to_near = to(near);
        let to_far = to(far);
        let to_waypoint = map.waypoint.map(|w| to(Map::centre_units(w)));
        let geo_near = graph.geodesic(near, GOAL_RADIUS);
        let geo_far = graph.geodesic(far, GOAL_RADIUS);
        Nav {
            map,
            gamma: GAMMA,
            near_reward: 1.0,
            far_reward: 1.0,
            graph,
            to_near,
            to_far,
            to_waypoint,
            geo_near,
            geo_far,
        }
    }

    /// The default branching layout ([`BRANCHING`]).
    pub fn branching() -> Result<Nav> {
        Ok(Nav::new(Map::parse(BRANCHING)?))
    }

    pub fn reward(&self, g: Goal) -> f32 {
        match g {
            Goal::Near => self.near_reward,
            Goal::Far => self.far_reward,
        }
    }

    pub(super) fn costs(&self, g: Goal) -> &[u32] {
        match g {
            Goal::Near => &self.to_near,
            Goal::Far => &self.to_far,
        }
    }

    /// The goal whose radius holds the pose, if any.
    pub fn goal_at(&self, p: Pose) -> Option<Goal> {
        [Goal::Near, Goal::Far].into_iter().find(|&g| {
            within(
                p.gx,
                p.gy,
                Map::centre_units(self.map.goal_cell(g)),
                GOAL_RADIUS,
            )
        })
    }

    /// Whether an agent can stand at the pose.
    pub fn is_free(&self, p: Pose) -> bool {
        self.map.free(p.gx, p.gy)
    }

    /// One action; `None` for an action index other than 0, 1, 2.
    pub fn step(&self, p: Pose, action: usize) -> Option<Transition> {
        let h = p.h();
        let (pose, moved) = match action {
            FORWARD => {
                let (mx, my) = MOVES[h];
                let q = Pose {
                    gx: p.gx + mx,
                    gy: p.gy + my,
                    heading: h as u8,
                };
                if self.map.free(q.gx, q.gy) {
                    let len = ((mx * mx + my * my) as f64).sqrt() / LATTICE as f64;
                    (q, len)
                } else {
                    (
                        Pose {
                            heading: h as u8,
                            ..p
                        },
                        0.0,
                    )
                }
            }
            LEFT | RIGHT => {
                let turn = if action == LEFT { HEADINGS - 1 } else { 1 };
                let heading = ((h + turn) % HEADINGS) as u8;
                (Pose { heading, ..p }, 0.0)
            }
            _ => return None,
        };
        let goal = self.goal_at(pose);
        Some(Transition {
            pose,
            reward: goal.map_or(0.0, |g| self.reward(g)),
            done: goal.is_some(),
            goal,
            moved,
        })
    }

    /// Fewest actions from the pose to the goal (`None`: the pose is not free or the goal
    /// is out of reach). 0 inside the goal's radius.
    pub fn steps_to(&self, p: Pose, g: Goal) -> Option<u32> {
        let n = self.graph.node(p)?;
        let c = self.costs(g)[n];
        (c != NONE).then_some(c)
    }

    /// The goal with the fewest actions to it (near on ties).
    pub fn nearest_goal(&self, p: Pose) -> Option<Goal> {
        let near = self.steps_to(p, Goal::Near);
        let far = self.steps_to(p, Goal::Far);
        match (near, far) {
            (Some(n), Some(f)) => Some(if f < n { Goal::Far } else { Goal::Near }),
            (Some(_), None) => Some(Goal::Near),
            (None, Some(_)) => Some(Goal::Far),
            (None, None) => None,
        }
    }

    /// V*(p) = max over goals of r_g * gamma^(d_g - 1); 0 at a goal and where no goal can
    /// be reached.
    pub fn optimal_value(&self, p: Pose) -> f64 {
        if self.goal_at(p).is_some() {
            return 0.0;
        }
        [Goal::Near, Goal::Far]
            .into_iter()
            .filter_map(|g| {
                let d = self.steps_to(p, g)?;
                Some(self.reward(g) as f64 * self.gamma.powi(d as i32 - 1))
            })
            .fold(0.0, f64::max)
    }

    pub(super) fn follow(&self, cost: &[u32], start: Pose) -> Option<(Vec<usize>, Pose)> {
        let mut p = start;
        let mut actions = vec![];
        let budget = cost[self.graph.node(p)?];
        if budget == NONE {
            return None;
        }
        while let Some(a) = self.graph.greedy(cost, self.graph.node(p)?) {
            // The graph is the dynamics, so each action lowers the cost by one; the
            // budget only guards against a broken table.
            if actions.len() as u32 >= budget {
                return None;
            }
            p = self.step(p, a)?.pose;
            actions.push(a);
        }
        Some((actions, p))
    }

    /// A shortest action sequence from the pose to the goal (`None` for the nearest goal).
    pub fn plan(&self, p: Pose, goal: Option<Goal>) -> Option<Vec<usize>> {
        let g = match goal {
            Some(g) => g,
            None => self.nearest_goal(p)?,
        };
        Some(self.follow(self.costs(g), p)?.0)
    }

    /// The shortest way to within `GOAL_RADIUS` of the centre of cell `via`, then the
    /// shortest way from there to the goal.
    pub fn plan_via(&self, p: Pose, via: (usize, usize), goal: Goal) -> Option<Vec<usize>> {
        let computed;
        let to_via = match (&self.to_waypoint, self.map.waypoint) {
            (Some(t), Some(w)) if w == via => t,
            _ => {
                let c = Map::centre_units(via);
                computed = self.graph.bfs(|q| within(q.gx, q.gy, c, GOAL_RADIUS), None);
                &computed
            }
        };
        let (mut first, mid) = self.follow(to_via, p)?;
        first.extend(self.follow(self.costs(goal), mid)?.0);
        Some(first)
    }

    /// Geodesic distance in metres from the pose's position to the goal's radius.
    pub fn geodesic(&self, p: Pose, g: Goal) -> Option<f64> {
        let i = self.graph.position(p.gx, p.gy)?;
        let d = match g {
            Goal::Near => self.geo_near[i],
            Goal::Far => self.geo_far[i],
        };
        d.is_finite().then_some(d as f64)
    }

    /// The geodesic shortest path length to G_near, the reference length of SPL.
    pub fn geodesic_to_near(&self, p: Pose) -> Option<f64> {
        self.geodesic(p, Goal::Near)
    }

    /// A uniformly random free pose in the start cells.
    pub fn random_start(&self, rng: &mut impl Rng) -> Pose {
        loop {
            let (r, c) = self.map.start[rng.random_range(0..self.map.start.len())];
            let p = Pose {
                gx: (c * L) as i32 + rng.random_range(0..LATTICE),
                gy: (r * L) as i32 + rng.random_range(0..LATTICE),
                heading: rng.random_range(0..HEADINGS) as u8,
            };
            // Start cells lie away from goals, and most of a cell is free, so this ends
            // after a few draws.
            if self.is_free(p) && self.goal_at(p).is_none() {
                return p;
            }
        }
    }

    /// Open cells and goal positions, for plots.
    pub fn layout(&self) -> Layout {
        let m = &self.map;
        let centre = |(r, c): (usize, usize)| (c as f32 + 0.5, r as f32 + 0.5);
        Layout {
            rows: m.rows,
            cols: m.cols,
            open: (0..m.rows * m.cols)
                .map(|i| m.is_open((i / m.cols, i % m.cols)))
                .collect(),
            start: m.start.clone(),
            goals: vec![
                (Goal::Near, m.goal_point(Goal::Near)),
                (Goal::Far, m.goal_point(Goal::Far)),
            ],
            waypoint: m.waypoint.map(centre),
        }
    }

    /// The cells from `from` along direction `d` up to the next junction, and the direction
    /// of the last move.
    pub(super) fn corridor(
        &self,
        from: (usize, usize),
        d: usize,
    ) -> Option<(Vec<(usize, usize)>, usize)> {
        let mut cells = vec![from];
        let mut cur = self.map.neighbour(from, d)?;
        let mut last = d;
        loop {
            cells.push(cur);
            if cur == from || self.map.is_junction(cur) || cells.len() > self.graph.cells.len() {
                break;
            }
            let back = (last + 2) % 4;
            let Some((nd, next)) = (0..4)
                .filter(|&k| k != back)
                .find_map(|k| self.map.neighbour(cur, k).map(|c| (k, c)))
            else {
                break;
            };
            last = nd;
            cur = next;
        }
        Some((cells, last))
    }

    /// The macro-actions available at the pose: one per open neighbouring cell, each moving
    /// along the corridor to the next junction (or into a goal). Empty at a goal.
    pub fn controllers(&self, p: Pose, renderer: &Renderer) -> Vec<Macro> {
        let Some(cell) = self.map.cell_of(p) else {
            return vec![];
        };
        if self.goal_at(p).is_some() || !self.is_free(p) {
            return vec![];
        }
        (0..4)
            .filter_map(|d| {
                let (cells, last) = self.corridor(cell, d)?;
                self.run_macro(p, d * 3, cells, last * 3, renderer)
            })
            .collect()
    }

    pub(super) fn run_macro(
        &self,
        p: Pose,
        heading: usize,
        cells: Vec<(usize, usize)>,
        arrival: usize,
        renderer: &Renderer,
    ) -> Option<Macro> {
        let junction = *cells.last()?;
        let centre = Map::centre_units(junction);
        let mut allowed = vec![false; self.graph.cells.len()];
        for &(r, c) in &cells {
            allowed[self.graph.open_index[r * self.map.cols + c] as usize] = true;
        }
        let cost = self.graph.bfs(
            |q| {
                (q.h() == arrival && within(q.gx, q.gy, centre, ARRIVE_RADIUS))
                    || self.goal_at(q).is_some()
            },
            Some(&allowed),
        );
        let (actions, end) = self.follow(&cost, p)?;
        let mut length = 0.0;
        let mut q = p;
        for &a in &actions {
            let t = self.step(q, a)?;
            length += t.moved;
            q = t.pose;
        }
        Some(Macro {
            heading,
            cells,
            actions,
            end,
            goal: self.goal_at(end),
            length,
            view: renderer.render(&self.map, end),
        })
    }

    /// Rolls out the data-collection policy (see the module documentation).
    pub fn generate(&self, cfg: &GenConfig, seed: u64) -> Result<NavData> {
        validate(cfg)?;
        let waypoint = match (&self.to_waypoint, self.map.waypoint) {
            (Some(t), Some(w)) => Some((t, Map::centre_units(w))),
            _ if cfg.mix[1] > 0.0 => {
                bail!("detour episodes need a waypoint `W` in the layout")
            }
            _ => None,
        };
        let renderer = Renderer::new(cfg.size, cfg.size)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let counts = allocate(cfg.episodes, cfg.mix);
        let mut kinds: Vec<Kind> = Kind::ALL
            .iter()
            .flat_map(|&k| std::iter::repeat_n(k, counts[k.index()]))
            .collect();
        kinds.shuffle(&mut rng);

        let frame = renderer.frame_len();
        let obs_len = frame * cfg.frames;
        let mut d = NavData {
            obs_shape: vec![3 * cfg.frames, cfg.size, cfg.size],
            observations: vec![],
            next_observations: vec![],
            rewards: vec![],
            terminals: vec![],
            timeouts: vec![],
            actions: vec![],
            poses: vec![],
            next_poses: vec![],
            episodes: vec![],
        };
        let mut img = Vec::with_capacity(frame);
        for kind in kinds {
            let start = d.len();
            let mut p = self.random_start(&mut rng);
            let mut via = (kind == Kind::Detour).then_some(waypoint).flatten();
            let target = if kind == Kind::Far {
                &self.to_far
            } else {
                &self.to_near
            };
            renderer.render_into(&self.map, p, &mut img);
            let mut stack: Vec<u8> = img.repeat(cfg.frames);
            let mut goal = None;
            for t in 0..cfg.max_steps {
                if let Some((_, w)) = via {
                    if within(p.gx, p.gy, w, GOAL_RADIUS) {
                        via = None;
                    }
                }
                let cost = via.map_or(target, |(c, _)| c);
                let planned = self.graph.node(p).and_then(|n| self.graph.greedy(cost, n));
                let a = match planned {
                    Some(a) if rng.random::<f64>() >= cfg.epsilon => a,
                    _ => rng.random_range(0..NUM_ACTIONS),
                };
                let Some(tr) = self.step(p, a) else {
                    bail!("internal error: action {a} out of range");
                };
                renderer.render_into(&self.map, tr.pose, &mut img);
                d.observations.extend_from_slice(&stack);
                stack.drain(..frame);
                stack.extend_from_slice(&img);
                debug_assert_eq!(stack.len(), obs_len);
                d.next_observations.extend_from_slice(&stack);
                d.rewards.push(tr.reward);
                d.terminals.push(tr.done);
                d.timeouts.push(!tr.done && t + 1 == cfg.max_steps);
                d.actions.push(a as i64);
                d.poses.push(p);
                d.next_poses.push(tr.pose);
                p = tr.pose;
                if tr.done {
                    goal = tr.goal;
                    break;
                }
            }
            d.episodes.push(Episode {
                kind,
                start,
                len: d.len() - start,
                goal,
            });
        }
        Ok(d)
    }
}
