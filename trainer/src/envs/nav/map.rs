//! The maze: walls, start cells, goal cells and an optional detour waypoint.

use super::*;

/// The maze: walls, start cells, goal cells and an optional detour waypoint cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Map {
    pub rows: usize,
    pub cols: usize,
    pub(super) walls: Vec<bool>,
    pub start: Vec<(usize, usize)>,
    pub near: (usize, usize),
    pub far: (usize, usize),
    pub waypoint: Option<(usize, usize)>,
}

impl Map {
    /// Parses a layout: `#` wall, `.` open, `S` start cell, `N` near goal, `F` far goal, `W`
    /// detour waypoint; one `N`, one `F`, at most one `W`, at least one `S`.
    pub fn parse(layout: &str) -> Result<Map> {
        let lines: Vec<&str> = layout
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let rows = lines.len();
        let cols = lines.first().map(|l| l.chars().count()).unwrap_or(0);
        if rows < 3 || cols < 3 || lines.iter().any(|l| l.chars().count() != cols) {
            bail!("a navigation layout needs equal rows of at least 3 cells");
        }
        let mut walls = vec![false; rows * cols];
        let (mut start, mut near, mut far, mut waypoint) = (vec![], vec![], vec![], vec![]);
        for (r, l) in lines.iter().enumerate() {
            for (c, ch) in l.chars().enumerate() {
                match ch {
                    '#' => walls[r * cols + c] = true,
                    '.' => {}
                    'S' => start.push((r, c)),
                    'N' => near.push((r, c)),
                    'F' => far.push((r, c)),
                    'W' => waypoint.push((r, c)),
                    other => bail!("unknown layout cell `{other}` at row {r}, column {c}"),
                }
            }
        }
        if near.len() != 1 || far.len() != 1 || waypoint.len() > 1 || start.is_empty() {
            bail!(
                "a navigation layout needs one `N`, one `F`, at least one `S` and at most one \
                 `W` (found {}, {}, {}, {})",
                near.len(),
                far.len(),
                start.len(),
                waypoint.len()
            );
        }
        Ok(Map {
            rows,
            cols,
            walls,
            start,
            near: near[0],
            far: far[0],
            waypoint: waypoint.first().copied(),
        })
    }

    /// Whether cell (row, col) is a wall; everything outside the map is.
    pub fn is_wall(&self, r: i64, c: i64) -> bool {
        r < 0
            || c < 0
            || r as usize >= self.rows
            || c as usize >= self.cols
            || self.walls[r as usize * self.cols + c as usize]
    }

    pub fn is_open(&self, (r, c): (usize, usize)) -> bool {
        !self.is_wall(r as i64, c as i64)
    }

    pub fn goal_cell(&self, g: Goal) -> (usize, usize) {
        match g {
            Goal::Near => self.near,
            Goal::Far => self.far,
        }
    }

    /// A cell's centre in lattice units.
    pub(super) fn centre_units((r, c): (usize, usize)) -> (i32, i32) {
        (
            c as i32 * LATTICE + LATTICE / 2,
            r as i32 * LATTICE + LATTICE / 2,
        )
    }

    /// A goal's centre in metres.
    pub fn goal_point(&self, g: Goal) -> (f32, f32) {
        let (r, c) = self.goal_cell(g);
        (c as f32 + 0.5, r as f32 + 0.5)
    }

    /// Whether the agent's disc fits at lattice point (gx, gy) without touching a wall.
    pub fn free(&self, gx: i32, gy: i32) -> bool {
        let l = LATTICE as i64;
        let (x, y) = (gx as i64, gy as i64);
        let (c, r) = (x.div_euclid(l), y.div_euclid(l));
        if self.is_wall(r, c) {
            return false;
        }
        let rad = RADIUS as f64 * LATTICE as f64;
        for dr in -1..=1 {
            for dc in -1..=1 {
                if self.is_wall(r + dr, c + dc) {
                    let (x0, y0) = ((c + dc) * l, (r + dr) * l);
                    let (qx, qy) = (x.clamp(x0, x0 + l), y.clamp(y0, y0 + l));
                    let d2 = (x - qx).pow(2) + (y - qy).pow(2);
                    if (d2 as f64) < rad * rad {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// The cell holding a pose.
    pub fn cell_of(&self, p: Pose) -> Option<(usize, usize)> {
        let (c, r) = (p.gx.div_euclid(LATTICE), p.gy.div_euclid(LATTICE));
        (r >= 0 && c >= 0 && self.is_open((r as usize, c as usize)))
            .then_some((r as usize, c as usize))
    }

    /// The open neighbour in direction `d` (0 east, 1 south, 2 west, 3 north).
    pub fn neighbour(&self, (r, c): (usize, usize), d: usize) -> Option<(usize, usize)> {
        let (dr, dc) = [(0i64, 1i64), (1, 0), (0, -1), (-1, 0)].get(d)?;
        let (nr, nc) = (r as i64 + dr, c as i64 + dc);
        (!self.is_wall(nr, nc)).then_some((nr as usize, nc as usize))
    }

    /// Junctions are where a macro-action stops: open cells with other than two open
    /// neighbours (crossings, dead ends, room cells) and goal cells. Corridor bends are not.
    pub fn is_junction(&self, cell: (usize, usize)) -> bool {
        self.is_open(cell)
            && ((0..4)
                .filter(|&d| self.neighbour(cell, d).is_some())
                .count()
                != 2
                || cell == self.near
                || cell == self.far)
    }
}
