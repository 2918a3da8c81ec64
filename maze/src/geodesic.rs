//! Geodesic shortest paths of the body to the target disc, in fixed-size arrays, and
//! SPL (success weighted by path length).

use core::f32::consts::PI;

use laq_runtime::Error;

use crate::{distance, Layout, RADIUS, TARGET_RADIUS};

/// Points sampled on the target circle.
///
/// ```
/// assert_eq!(laq_maze::TARGET_SAMPLES, 64);
/// ```
pub const TARGET_SAMPLES: usize = 64;

/// How far graph nodes sit outside the grown walls' corners, and target points inside
/// the target circle.
const NUDGE: f32 = 1e-3;

/// Geodesic distances to the target disc for the robot's body, exact up to the sampling
/// of the target circle: a visibility graph over the convex corners of the grown walls
/// (see [`Layout::segment_clear`]) and [`TARGET_SAMPLES`] points of the target circle,
/// with room for `N` corners.
///
/// Shortest paths among polygons bend only at convex obstacle corners, so the graph's
/// nodes are the corners of the grown wall cells (nudged 1e-3 outwards) that are free.
/// Each node's distance to the target is computed once (Dijkstra); a query connects the
/// point to every node and target point it sees.
///
/// ```
/// use laq_maze::{Geodesic, U_MAZE};
///
/// let g = Geodesic::<32>::new(&U_MAZE)?;
/// // From the far arm's end: around the middle wall, about 4.
/// let d = g.to_target(3.5, 1.5).unwrap();
/// assert!((d - 4.0).abs() < 0.01);
/// // In the top corridor the target is in sight: 2 to the centre, 1.5 to the disc.
/// assert!((g.to_target(1.5, 3.5).unwrap() - 1.5).abs() < 2e-3);
/// assert_eq!(g.to_target(1.5, 1.7), Some(0.0));
/// // Inside a wall.
/// assert_eq!(g.to_target(2.5, 1.5), None);
/// # Ok::<(), laq_runtime::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Geodesic<'a, const N: usize> {
    layout: Layout<'a>,
    nodes: [[f32; 2]; N],
    to_target: [f32; N],
    n: usize,
}

impl<'a, const N: usize> Geodesic<'a, N> {
    /// Builds the graph: O(n^2) visibility tests for n free corners.
    /// [`Error::BufferTooSmall`] if the layout has more than `N` of them.
    ///
    /// ```
    /// use laq_maze::{Geodesic, MEDIUM_MAZE};
    /// use laq_runtime::Error;
    ///
    /// assert_eq!(Geodesic::<8>::new(&MEDIUM_MAZE).err(), Some(Error::BufferTooSmall));
    /// assert!(Geodesic::<128>::new(&MEDIUM_MAZE).is_ok());
    /// ```
    pub fn new(layout: &Layout<'a>) -> Result<Self, Error> {
        let mut g = Geodesic {
            layout: *layout,
            nodes: [[0.0; 2]; N],
            to_target: [f32::INFINITY; N],
            n: 0,
        };
        for r in 0..layout.rows() {
            for c in 0..layout.cols() {
                if !layout.is_wall(r, c) {
                    continue;
                }
                for (dr, dc) in [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)] {
                    let (sr, sc): (f32, f32) = (2.0 * dr - 1.0, 2.0 * dc - 1.0);
                    let p = [
                        r as f32 + dr + sr * (RADIUS + NUDGE),
                        c as f32 + dc + sc * (RADIUS + NUDGE),
                    ];
                    if layout.segment_clear(p, p, RADIUS) {
                        *g.nodes.get_mut(g.n).ok_or(Error::BufferTooSmall)? = p;
                        g.n += 1;
                    }
                }
            }
        }
        let (nodes, n) = (g.nodes, g.n);
        for (t, p) in g.to_target.iter_mut().zip(&nodes).take(n) {
            *t = direct(layout, *p);
        }
        // Dijkstra from the target over the nodes (dense graph, O(n^2)); iterators
        // rather than indexing, so there are no bounds checks that could panic.
        let mut done = [false; N];
        for _ in 0..n {
            let mut closest: Option<(usize, f32)> = None;
            for (i, (&d, &fin)) in g.to_target.iter().zip(&done).enumerate().take(n) {
                if !fin && d.is_finite() && closest.is_none_or(|(_, b)| d < b) {
                    closest = Some((i, d));
                }
            }
            let Some((u, du)) = closest else { break };
            let (Some(&pu), Some(fin)) = (nodes.get(u), done.get_mut(u)) else {
                break;
            };
            *fin = true;
            for ((t, &fin), pv) in g.to_target.iter_mut().zip(&done).zip(&nodes).take(n) {
                if !fin && layout.segment_clear(pu, *pv, RADIUS) {
                    *t = t.min(du + distance(pu, *pv));
                }
            }
        }
        Ok(g)
    }

    /// The graph's nodes: the free corners of the grown walls.
    ///
    /// ```
    /// use laq_maze::{Geodesic, U_MAZE};
    ///
    /// let g = Geodesic::<32>::new(&U_MAZE)?;
    /// // The middle wall's two inner corners, among others.
    /// assert!(g.nodes().iter().any(|p| (p[0] - 3.101).abs() < 1e-6 && (p[1] - 3.101).abs() < 1e-6));
    /// assert!(g.nodes().len() <= 32);
    /// # Ok::<(), laq_runtime::Error>(())
    /// ```
    pub fn nodes(&self) -> &[[f32; 2]] {
        self.nodes.get(..self.n).unwrap_or(&[])
    }

    /// The shortest path length for the body from (x, y) to the target disc: 0 inside
    /// it, `None` if (x, y) is not a free position or cannot reach the target.
    ///
    /// ```
    /// use laq_maze::{Geodesic, Layout};
    ///
    /// let corridor = Layout::parse(b"#######\n#GOOOO#\n#######")?;
    /// let g = Geodesic::<32>::new(&corridor).unwrap();
    /// // Straight along the corridor to the disc's edge: 4 - 0.5.
    /// assert!((g.to_target(1.5, 5.5).unwrap() - 3.5).abs() < 2e-3);
    /// // Too close to the wall for the body.
    /// assert_eq!(g.to_target(1.05, 3.0), None);
    /// # Ok::<(), laq_maze::LayoutError>(())
    /// ```
    pub fn to_target(&self, x: f32, y: f32) -> Option<f32> {
        let p = [x, y];
        if !self.layout.segment_clear(p, p, RADIUS) {
            return None;
        }
        if self.layout.in_target(p) {
            return Some(0.0);
        }
        let mut best = direct(&self.layout, p);
        for (v, g) in self.nodes().iter().zip(&self.to_target) {
            if g.is_finite() && self.layout.segment_clear(p, *v, RADIUS) {
                best = best.min(distance(p, *v) + g);
            }
        }
        best.is_finite().then_some(best)
    }
}

/// Point `i` of the target circle (just inside it), if the body fits there.
fn target_sample(layout: &Layout<'_>, i: usize) -> Option<[f32; 2]> {
    let a = 2.0 * PI * i as f32 / TARGET_SAMPLES as f32;
    let r = TARGET_RADIUS - NUDGE;
    let [tx, ty] = layout.target_point();
    let p = [tx + r * libm::cosf(a), ty + r * libm::sinf(a)];
    layout.segment_clear(p, p, RADIUS).then_some(p)
}

/// The straight-line distance from `p` to the nearest target point it sees.
fn direct(layout: &Layout<'_>, p: [f32; 2]) -> f32 {
    (0..TARGET_SAMPLES)
        .filter_map(|i| target_sample(layout, i))
        .filter(|&b| layout.segment_clear(p, b, RADIUS))
        .map(|b| distance(p, b))
        .fold(f32::INFINITY, f32::min)
}

/// Success weighted by path length: `shortest / max(travelled, shortest)` for a
/// success, 0 for a failure, 1 for a success that needed no travel.
///
/// ```
/// use laq_maze::spl;
///
/// assert_eq!(spl(false, 2.0, 2.0), 0.0);
/// assert_eq!(spl(true, 2.0, 4.0), 0.5);
/// assert_eq!(spl(true, 2.0, 1.9), 1.0);
/// assert_eq!(spl(true, 0.0, 0.0), 1.0);
/// ```
pub fn spl(success: bool, shortest: f32, travelled: f32) -> f32 {
    let longest = travelled.max(shortest);
    match (success, longest > 0.0) {
        (false, _) => 0.0,
        (true, false) => 1.0,
        (true, true) => shortest / longest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MEDIUM_MAZE, U_MAZE};

    #[test]
    fn geodesic_along_a_straight_corridor() {
        let m = Layout::parse(b"#######\n#GOOOO#\n#######").unwrap();
        let g = Geodesic::<32>::new(&m).unwrap();
        let d = g.to_target(1.5, 5.5).unwrap();
        assert!((d - 3.5).abs() < 2e-3, "{d}");
        // Off the corridor's axis: still a straight line to the circle.
        let d = g.to_target(1.2, 4.0).unwrap();
        let euclid = libm::sqrtf(0.3 * 0.3 + 2.5 * 2.5) - 0.5;
        assert!((d - euclid).abs() < 2e-3, "{d} vs {euclid}");
        assert_eq!(g.to_target(1.5, 1.7), Some(0.0));
        assert_eq!(g.to_target(0.5, 3.0), None);
        assert_eq!(g.to_target(1.05, 3.0), None);
    }

    #[test]
    fn geodesic_around_the_u() {
        let g = Geodesic::<32>::new(&U_MAZE).unwrap();
        // From the far arm's end: around the middle wall's grown corners (3.1, 3.1) and
        // (1.9, 3.1), then straight to the disc.
        let leg = libm::sqrtf(0.4 * 0.4 + 1.6 * 1.6);
        let expected = leg + 1.2 + (leg - 0.5);
        let d = g.to_target(3.5, 1.5).unwrap();
        assert!((d - expected).abs() < 1e-2, "{d} vs {expected}");
        let d = g.to_target(1.5, 3.5).unwrap();
        assert!((d - 1.5).abs() < 2e-3, "{d}");
        // Monotone along the corridor.
        let along = [
            (1.5, 2.5),
            (1.5, 3.5),
            (2.5, 3.5),
            (3.5, 3.5),
            (3.5, 2.5),
            (3.5, 1.5),
        ];
        let ds = along.map(|(x, y)| g.to_target(x, y).unwrap());
        assert!(ds.windows(2).all(|w| w[0] < w[1]), "{ds:?}");
    }

    #[test]
    fn capacity() {
        // The firmware's 32 nodes hold the U-maze; the medium maze needs more.
        assert_eq!(Geodesic::<32>::new(&U_MAZE).unwrap().nodes().len(), 24);
        let n = Geodesic::<256>::new(&MEDIUM_MAZE).unwrap().nodes().len();
        assert_eq!(n, 58);
        // Every open cell of the medium maze reaches the target.
        let g = Geodesic::<128>::new(&MEDIUM_MAZE).unwrap();
        for r in 0..8 {
            for c in 0..8 {
                if !MEDIUM_MAZE.is_wall(r, c) {
                    let d = g.to_target(r as f32 + 0.5, c as f32 + 0.5).unwrap();
                    assert!(d.is_finite());
                }
            }
        }
    }
}
