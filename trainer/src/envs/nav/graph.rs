//! The pose graph and its exact shortest paths.

use super::*;

/// The pose graph: every (lattice point, heading) of every open cell, with forward edges
/// and their reverse (turn edges are implicit).
#[derive(Clone, Debug)]
pub(super) struct Graph {
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) open_index: Vec<u32>,
    pub(super) cells: Vec<(usize, usize)>,
    /// Per lattice position: the disc fits there.
    pub(super) free: Vec<bool>,
    /// Per lattice position: inside a goal's radius (episodes end there).
    pub(super) terminal: Vec<bool>,
    pub(super) fwd: Vec<u32>,
    pub(super) pred_start: Vec<u32>,
    pub(super) preds: Vec<u32>,
}

impl Graph {
    pub(super) fn new(map: &Map) -> Graph {
        let mut open_index = vec![NONE; map.rows * map.cols];
        let mut cells = vec![];
        for r in 0..map.rows {
            for c in 0..map.cols {
                if map.is_open((r, c)) {
                    open_index[r * map.cols + c] = cells.len() as u32;
                    cells.push((r, c));
                }
            }
        }
        let mut g = Graph {
            rows: map.rows,
            cols: map.cols,
            open_index,
            cells,
            free: vec![],
            terminal: vec![],
            fwd: vec![],
            pred_start: vec![],
            preds: vec![],
        };
        let positions = g.cells.len() * L * L;
        let near = Map::centre_units(map.near);
        let far = Map::centre_units(map.far);
        g.free = (0..positions)
            .map(|p| {
                let q = g.pose(p * HEADINGS);
                map.free(q.gx, q.gy)
            })
            .collect();
        g.terminal = (0..positions)
            .map(|p| {
                let q = g.pose(p * HEADINGS);
                g.free[p]
                    && (within(q.gx, q.gy, near, GOAL_RADIUS)
                        || within(q.gx, q.gy, far, GOAL_RADIUS))
            })
            .collect();
        g.fwd = (0..g.len())
            .map(|n| {
                if !g.free[n / HEADINGS] {
                    return NONE;
                }
                let p = g.pose(n);
                let (mx, my) = MOVES[p.h()];
                let q = Pose {
                    gx: p.gx + mx,
                    gy: p.gy + my,
                    ..p
                };
                match map.free(q.gx, q.gy).then(|| g.node(q)).flatten() {
                    Some(m) => m as u32,
                    None => NONE,
                }
            })
            .collect();
        let mut count = vec![0u32; g.len() + 1];
        for &m in &g.fwd {
            if m != NONE {
                count[m as usize + 1] += 1;
            }
        }
        for i in 0..g.len() {
            count[i + 1] += count[i];
        }
        let mut fill = count.clone();
        let mut preds = vec![0u32; count[g.len()] as usize];
        for (n, &m) in g.fwd.iter().enumerate() {
            if m != NONE {
                preds[fill[m as usize] as usize] = n as u32;
                fill[m as usize] += 1;
            }
        }
        g.pred_start = count;
        g.preds = preds;
        g
    }

    pub(super) fn len(&self) -> usize {
        self.cells.len() * PER_CELL
    }

    /// Index of a lattice position (no heading).
    pub(super) fn position(&self, gx: i32, gy: i32) -> Option<usize> {
        let (c, r) = (gx.div_euclid(LATTICE), gy.div_euclid(LATTICE));
        if c < 0 || r < 0 || c as usize >= self.cols || r as usize >= self.rows {
            return None;
        }
        let o = self.open_index[r as usize * self.cols + c as usize];
        if o == NONE {
            return None;
        }
        let (sx, sy) = (
            gx.rem_euclid(LATTICE) as usize,
            gy.rem_euclid(LATTICE) as usize,
        );
        Some(o as usize * L * L + sy * L + sx)
    }

    pub(super) fn node(&self, p: Pose) -> Option<usize> {
        Some(self.position(p.gx, p.gy)? * HEADINGS + p.h())
    }

    pub(super) fn pose(&self, n: usize) -> Pose {
        let (o, rest) = (n / PER_CELL, n % PER_CELL);
        let (pos, h) = (rest / HEADINGS, rest % HEADINGS);
        let (sy, sx) = (pos / L, pos % L);
        let (r, c) = self.cells[o];
        Pose {
            gx: (c * L + sx) as i32,
            gy: (r * L + sy) as i32,
            heading: h as u8,
        }
    }

    pub(super) fn turned(n: usize, action: usize) -> usize {
        let h = n % HEADINGS;
        let step = if action == LEFT { HEADINGS - 1 } else { 1 };
        n - h + (h + step) % HEADINGS
    }

    /// Fewest actions from every node to a free pose satisfying `target`, moving only
    /// through cells marked in `allowed` (by open-cell index) and never past a goal, where
    /// episodes end. `NONE` where no path exists.
    pub(super) fn bfs(&self, target: impl Fn(Pose) -> bool, allowed: Option<&[bool]>) -> Vec<u32> {
        let mut cost = vec![NONE; self.len()];
        let mut queue = VecDeque::new();
        let ok = |n: usize| allowed.is_none_or(|a| a[n / PER_CELL]);
        for n in 0..self.len() {
            if self.free[n / HEADINGS] && ok(n) && target(self.pose(n)) {
                cost[n] = 0;
                queue.push_back(n);
            }
        }
        while let Some(n) = queue.pop_front() {
            let next = cost[n] + 1;
            let fwd = &self.preds[self.pred_start[n] as usize..self.pred_start[n + 1] as usize];
            let turns = [Self::turned(n, LEFT), Self::turned(n, RIGHT)];
            for m in turns.into_iter().chain(fwd.iter().map(|&m| m as usize)) {
                if cost[m] == NONE && ok(m) && !self.terminal[m / HEADINGS] {
                    cost[m] = next;
                    queue.push_back(m);
                }
            }
        }
        cost
    }

    /// The first action of a shortest path (forward, then left, then right on ties), or
    /// `None` at the target or where it is unreachable.
    pub(super) fn greedy(&self, cost: &[u32], n: usize) -> Option<usize> {
        let c = cost[n];
        if c == 0 || c == NONE {
            return None;
        }
        let succ = |a: usize| match a {
            FORWARD => self.fwd[n] as usize,
            _ => Self::turned(n, a),
        };
        [FORWARD, LEFT, RIGHT]
            .into_iter()
            .find(|&a| (a != FORWARD || self.fwd[n] != NONE) && cost[succ(a)] == c - 1)
    }

    /// Geodesic distance in metres from every lattice position to the disc of `radius`
    /// around `centre`, over free positions with 16-neighbour moves (within about 3% of
    /// the Euclidean shortest path).
    pub(super) fn geodesic(&self, centre: (i32, i32), radius: f32) -> Vec<f32> {
        const OFFS: [(i32, i32); 16] = [
            (1, 0),
            (-1, 0),
            (0, 1),
            (0, -1),
            (1, 1),
            (1, -1),
            (-1, 1),
            (-1, -1),
            (2, 1),
            (2, -1),
            (-2, 1),
            (-2, -1),
            (1, 2),
            (1, -2),
            (-1, 2),
            (-1, -2),
        ];
        let n = self.free.len();
        let mut dist = vec![f32::INFINITY; n];
        let mut heap = BinaryHeap::new();
        for p in 0..n {
            let q = self.pose(p * HEADINGS);
            if self.free[p] && within(q.gx, q.gy, centre, radius) {
                dist[p] = 0.0;
                heap.push(Reverse((0u32, p as u32)));
            }
        }
        // Bits of non-negative floats order like the floats.
        while let Some(Reverse((bits, p))) = heap.pop() {
            let d = f32::from_bits(bits);
            let p = p as usize;
            if d > dist[p] {
                continue;
            }
            let q = self.pose(p * HEADINGS);
            for (ox, oy) in OFFS {
                let Some(m) = self.position(q.gx + ox, q.gy + oy) else {
                    continue;
                };
                if !self.free[m] {
                    continue;
                }
                let nd = d + ((ox * ox + oy * oy) as f32).sqrt() / LATTICE as f32;
                if nd < dist[m] {
                    dist[m] = nd;
                    heap.push(Reverse((nd.to_bits(), m as u32)));
                }
            }
        }
        dist
    }
}
