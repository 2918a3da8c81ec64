//! The maze: a grid of unit cells given by borrowed bytes, the walls the body cannot
//! enter and the target disc.

use core::fmt;

/// Half-width of the body (the point mass, or the robot): the simulator tests the four
/// corners of its bounding square against the walls ([`Layout::blocked`]).
///
/// ```
/// use laq_maze::{RADIUS, U_MAZE};
///
/// // 0.05 from the wall above row 1: the body overlaps it.
/// assert!(U_MAZE.blocked(1.05, 1.5));
/// assert!(!U_MAZE.blocked(1.0 + RADIUS, 1.5));
/// ```
pub const RADIUS: f32 = 0.1;

/// Success: within this distance of the target cell's centre ([`Layout::in_target`]).
///
/// ```
/// use laq_maze::{TARGET_RADIUS, U_MAZE};
///
/// assert!(U_MAZE.in_target([1.5, 1.5 + TARGET_RADIUS]));
/// assert!(!U_MAZE.in_target([1.5, 2.01 + TARGET_RADIUS]));
/// ```
pub const TARGET_RADIUS: f32 = 0.5;

/// D4RL's U-maze: the target cell (1, 1) at one end of a U around a middle wall.
///
/// ```
/// use laq_maze::U_MAZE;
///
/// assert_eq!((U_MAZE.rows(), U_MAZE.cols(), U_MAZE.target()), (5, 5, (1, 1)));
/// assert_eq!(U_MAZE.target_point(), [1.5, 1.5]);
/// ```
pub const U_MAZE: Layout<'static> = built_in(b"#####\n#GOO#\n###O#\n#OOO#\n#####");

/// D4RL's medium maze (8 x 8), target cell (6, 6).
///
/// ```
/// use laq_maze::MEDIUM_MAZE;
///
/// assert_eq!((MEDIUM_MAZE.rows(), MEDIUM_MAZE.cols()), (8, 8));
/// assert_eq!(MEDIUM_MAZE.target(), (6, 6));
/// ```
pub const MEDIUM_MAZE: Layout<'static> =
    built_in(b"########\n#OO##OO#\n#OO#OOO#\n##OOO###\n#OO#OOO#\n#O#OO#O#\n#OOO#OG#\n########");

/// D4RL's large maze (9 x 12), target cell (7, 9): corridors of up to 9 cells, dead
/// ends and loops; the farthest open cell's centre is 12.7 units from the target disc
/// by the body's shortest path.
///
/// ```
/// use laq_maze::LARGE_MAZE;
///
/// assert_eq!((LARGE_MAZE.rows(), LARGE_MAZE.cols()), (9, 12));
/// assert_eq!(LARGE_MAZE.target(), (7, 9));
/// ```
pub const LARGE_MAZE: Layout<'static> = built_in(
    b"############\n#OOOO#OOOOO#\n#O##O#O#O#O#\n#OOOOOO#OOO#\n#O####O###O#\n#OO#O#OOOOO#\n##O#O#O#O###\n#OO#OOO#OGO#\n############",
);

/// A built-in layout, parsed at compile time; a layout that does not parse fails the
/// build (the `panic!` runs in const evaluation only).
#[allow(clippy::panic)]
const fn built_in(text: &'static [u8]) -> Layout<'static> {
    match Layout::parse(text) {
        Ok(layout) => layout,
        Err(_) => panic!("a built-in maze layout does not parse"),
    }
}

/// Why [`Layout::parse`] refused a layout.
///
/// ```
/// use laq_maze::{Layout, LayoutError};
///
/// assert_eq!(Layout::parse(b"###\n#O#\n###"), Err(LayoutError::NoTarget));
/// assert_eq!(LayoutError::NoTarget.to_string(), "the layout has no target cell `G`");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutError {
    /// Fewer than 3 rows or columns, or rows of different lengths.
    Shape,
    /// A byte other than `#`, `O`, `G` and the newlines between rows.
    UnknownCell(u8),
    /// No `G` cell.
    NoTarget,
    /// More than one `G` cell.
    SeveralTargets,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Shape => f.write_str("a maze layout needs equal rows of at least 3 cells"),
            LayoutError::UnknownCell(b) => {
                write!(f, "unknown maze cell `{}`", char::from(*b).escape_default())
            }
            LayoutError::NoTarget => f.write_str("the layout has no target cell `G`"),
            LayoutError::SeveralTargets => f.write_str("the layout has more than one `G`"),
        }
    }
}

impl core::error::Error for LayoutError {}

/// A maze as D4RL writes it: rows of cells separated by `\n`, `#` a wall, `O` open, `G`
/// the (open) target cell. Row `r`, column `c` is the unit square `[r, r + 1) x [c, c +
/// 1)` of the plane: x runs along the rows, y along the columns. Outside the grid
/// counts as wall.
///
/// The bytes are borrowed, so a layout can live in flash as a `const` ([`U_MAZE`],
/// [`MEDIUM_MAZE`], [`LARGE_MAZE`]) and costs nothing to copy.
///
/// ```
/// use laq_maze::Layout;
///
/// let corridor = Layout::parse(b"#######\n#GOOOO#\n#######")?;
/// assert!(corridor.is_wall(0, 3) && !corridor.is_wall(1, 3));
/// assert!(corridor.segment_clear([1.5, 1.5], [1.5, 5.5], 0.1));
/// # Ok::<(), laq_maze::LayoutError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout<'a> {
    /// The text: row `r` starts at byte `r * (cols + 1)`.
    text: &'a [u8],
    rows: usize,
    cols: usize,
    target: (usize, usize),
}

impl<'a> Layout<'a> {
    /// Reads a layout: at least 3 rows of the same length (at least 3), separated by
    /// `\n` (one final `\n` is allowed), of `#`, `O` and exactly one `G`.
    ///
    /// ```
    /// use laq_maze::{Layout, LayoutError};
    ///
    /// let closed = Layout::parse(b"###\n#G#\n###\n")?;
    /// assert_eq!(closed.target(), (1, 1));
    /// assert_eq!(Layout::parse(b"###\n#G#\n##"), Err(LayoutError::Shape));
    /// assert_eq!(Layout::parse(b"###\n#GX\n###"), Err(LayoutError::UnknownCell(b'X')));
    /// assert_eq!(Layout::parse(b"###\n#GG\n###"), Err(LayoutError::SeveralTargets));
    /// # Ok::<(), LayoutError>(())
    /// ```
    pub const fn parse(text: &'a [u8]) -> Result<Self, LayoutError> {
        let (mut rows, mut cols, mut col) = (0usize, 0usize, 0usize);
        let mut target = None;
        let mut rest = text;
        while let [b, tail @ ..] = rest {
            rest = tail;
            match *b {
                b'\n' => {
                    if rows > 0 && col != cols {
                        return Err(LayoutError::Shape);
                    }
                    cols = col;
                    rows += 1;
                    col = 0;
                    // A final newline ends the last row.
                    if rest.is_empty() {
                        break;
                    }
                    continue;
                }
                b'#' | b'O' => {}
                b'G' => {
                    if target.is_some() {
                        return Err(LayoutError::SeveralTargets);
                    }
                    target = Some((rows, col));
                }
                other => return Err(LayoutError::UnknownCell(other)),
            }
            col += 1;
            if rest.is_empty() {
                // The last row, without a final newline.
                if rows > 0 && col != cols {
                    return Err(LayoutError::Shape);
                }
                cols = col;
                rows += 1;
            }
        }
        if rows < 3 || cols < 3 {
            return Err(LayoutError::Shape);
        }
        match target {
            Some(target) => Ok(Layout {
                text,
                rows,
                cols,
                target,
            }),
            None => Err(LayoutError::NoTarget),
        }
    }

    /// Number of rows (the extent along x).
    ///
    /// ```
    /// assert_eq!(laq_maze::U_MAZE.rows(), 5);
    /// ```
    pub const fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (the extent along y).
    ///
    /// ```
    /// assert_eq!(laq_maze::MEDIUM_MAZE.cols(), 8);
    /// ```
    pub const fn cols(&self) -> usize {
        self.cols
    }

    /// The target cell (row, column): the `G`.
    ///
    /// ```
    /// assert_eq!(laq_maze::MEDIUM_MAZE.target(), (6, 6));
    /// ```
    pub const fn target(&self) -> (usize, usize) {
        self.target
    }

    /// The target point: the centre of the target cell.
    ///
    /// ```
    /// assert_eq!(laq_maze::MEDIUM_MAZE.target_point(), [6.5, 6.5]);
    /// ```
    pub fn target_point(&self) -> [f32; 2] {
        [self.target.0 as f32 + 0.5, self.target.1 as f32 + 0.5]
    }

    /// Whether cell (r, c) is a wall; cells outside the grid are.
    ///
    /// ```
    /// use laq_maze::U_MAZE;
    ///
    /// assert!(U_MAZE.is_wall(2, 1) && !U_MAZE.is_wall(2, 3));
    /// assert!(U_MAZE.is_wall(1, 5) && U_MAZE.is_wall(7, 1));
    /// ```
    pub fn is_wall(&self, r: usize, c: usize) -> bool {
        if r >= self.rows || c >= self.cols {
            return true;
        }
        // r < rows and c < cols: the index is inside the text.
        self.text
            .get(r * (self.cols + 1) + c)
            .is_none_or(|&b| b == b'#')
    }

    /// Whether the cell holding the point (x, y) is a wall (negative coordinates are
    /// outside the grid).
    ///
    /// ```
    /// use laq_maze::U_MAZE;
    ///
    /// assert!(U_MAZE.wall_at(2.5, 1.5) && !U_MAZE.wall_at(2.5, 3.5));
    /// assert!(U_MAZE.wall_at(-0.1, 1.5));
    /// ```
    pub fn wall_at(&self, x: f32, y: f32) -> bool {
        if x < 0.0 || y < 0.0 {
            return true;
        }
        self.is_wall(libm::floorf(x) as usize, libm::floorf(y) as usize)
    }

    /// Whether the body ([`RADIUS`]) at (x, y) overlaps a wall: whether a corner of its
    /// bounding square is in a wall cell.
    ///
    /// ```
    /// use laq_maze::U_MAZE;
    ///
    /// assert!(!U_MAZE.blocked(1.5, 1.5));
    /// assert!(U_MAZE.blocked(1.95, 1.5)); // (2, 1) is a wall
    /// ```
    pub fn blocked(&self, x: f32, y: f32) -> bool {
        [
            (-RADIUS, -RADIUS),
            (-RADIUS, RADIUS),
            (RADIUS, -RADIUS),
            (RADIUS, RADIUS),
        ]
        .iter()
        .any(|(dx, dy)| self.wall_at(x + dx, y + dy))
    }

    /// Whether the point is within [`TARGET_RADIUS`] of the target point.
    ///
    /// ```
    /// use laq_maze::U_MAZE;
    ///
    /// assert!(U_MAZE.in_target([1.8, 1.8]) && !U_MAZE.in_target([1.5, 2.5]));
    /// ```
    pub fn in_target(&self, p: [f32; 2]) -> bool {
        distance(p, self.target_point()) <= TARGET_RADIUS
    }

    /// Whether the segment p -> q keeps a body of half-width `inflate` out of every
    /// wall cell and inside the grid.
    ///
    /// The walls a square body of that half-width cannot enter are the wall cells grown
    /// by `inflate` in each axis; the segment is clear if it does not cross the
    /// interior of any grown cell (touching an edge is allowed). `p == q` tests a
    /// position.
    ///
    /// ```
    /// use laq_maze::{RADIUS, U_MAZE};
    ///
    /// // Along the top corridor: clear; across the middle wall: not.
    /// assert!(U_MAZE.segment_clear([1.5, 1.5], [1.5, 3.5], RADIUS));
    /// assert!(!U_MAZE.segment_clear([1.5, 1.5], [3.5, 1.5], RADIUS));
    /// // Cutting the inner corner of the bend.
    /// assert!(!U_MAZE.segment_clear([1.5, 2.5], [2.5, 3.5], RADIUS));
    /// ```
    pub fn segment_clear(&self, p: [f32; 2], q: [f32; 2], inflate: f32) -> bool {
        let inside = |v: f32, n: usize| v >= inflate && v <= n as f32 - inflate;
        if !(inside(p[0], self.rows)
            && inside(q[0], self.rows)
            && inside(p[1], self.cols)
            && inside(q[1], self.cols))
        {
            return false;
        }
        for r in 0..self.rows {
            for c in 0..self.cols {
                if self.is_wall(r, c) {
                    let lo = [r as f32 - inflate, c as f32 - inflate];
                    let hi = [r as f32 + 1.0 + inflate, c as f32 + 1.0 + inflate];
                    if segment_crosses_box(p, q, lo, hi) {
                        return false;
                    }
                }
            }
        }
        true
    }
}

/// Whether the segment p -> q passes through the open box (lo, hi) (Liang-Barsky
/// clipping): a positive length of it lies strictly inside.
fn segment_crosses_box(p: [f32; 2], q: [f32; 2], lo: [f32; 2], hi: [f32; 2]) -> bool {
    let (mut t0, mut t1) = (0.0f32, 1.0f32);
    for (((&pa, &qa), &la), &ha) in p.iter().zip(&q).zip(&lo).zip(&hi) {
        let d = qa - pa;
        if d == 0.0 {
            if pa <= la || pa >= ha {
                return false;
            }
        } else {
            let (ta, tb) = ((la - pa) / d, (ha - pa) / d);
            t0 = t0.max(ta.min(tb));
            t1 = t1.min(ta.max(tb));
            if t0 >= t1 {
                return false;
            }
        }
    }
    // Only touching (a single point or an edge) is not a crossing.
    t1 - t0 > 1e-7
}

/// The Euclidean distance of two points (`libm::sqrtf`, correctly rounded).
///
/// ```
/// assert_eq!(laq_maze::distance([1.0, 1.0], [4.0, 5.0]), 5.0);
/// ```
pub fn distance(a: [f32; 2], b: [f32; 2]) -> f32 {
    let (dx, dy) = (a[0] - b[0], a[1] - b[1]);
    libm::sqrtf(dx * dx + dy * dy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_layouts() {
        let open = |l: &Layout| {
            (0..l.rows())
                .flat_map(|r| (0..l.cols()).map(move |c| (r, c)))
                .filter(|&(r, c)| !l.is_wall(r, c))
                .count()
        };
        assert_eq!(open(&U_MAZE), 7);
        assert!(open(&MEDIUM_MAZE) > 20);
        assert!(!MEDIUM_MAZE.is_wall(6, 6) && MEDIUM_MAZE.is_wall(6, 4));
    }

    #[test]
    fn parse_checks_the_shape() {
        assert_eq!(Layout::parse(b""), Err(LayoutError::Shape));
        assert_eq!(Layout::parse(b"###\n#G#"), Err(LayoutError::Shape));
        assert_eq!(Layout::parse(b"##\n#G\n##"), Err(LayoutError::Shape));
        assert_eq!(Layout::parse(b"###\n#G##\n###"), Err(LayoutError::Shape));
        assert_eq!(Layout::parse(b"###\n\n#G#\n###"), Err(LayoutError::Shape));
        assert_eq!(Layout::parse(b"###\n#G#\n###\n\n"), Err(LayoutError::Shape));
        let l = Layout::parse(b"####\n#OG#\n####").unwrap();
        assert_eq!((l.rows(), l.cols(), l.target()), (3, 4, (1, 2)));
        assert!(!l.is_wall(1, 1) && l.is_wall(1, 3) && l.is_wall(0, 1));
    }

    #[test]
    fn walls_stop_the_body() {
        assert!(U_MAZE.blocked(1.5, 1.05));
        assert!(U_MAZE.blocked(f32::NAN, 1.5));
        assert!(!U_MAZE.blocked(1.1, 1.1));
        assert!(!U_MAZE.segment_clear([1.05, 1.5], [1.05, 2.5], RADIUS));
        assert!(U_MAZE.segment_clear([1.15, 1.5], [1.15, 2.5], RADIUS));
        // Outside the grid.
        assert!(!U_MAZE.segment_clear([1.5, 1.5], [1.5, 9.0], 0.0));
    }
}
