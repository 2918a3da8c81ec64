//! The first-person raycaster that renders what the agent sees.

use super::*;

/// A deterministic first-person raycaster: walls one metre high with procedural textures
/// chosen per wall face, a checkered floor tinted per cell, a panelled ceiling, goal pillars
/// and floor discs, and distance fog. Output is RGB, channels first.
#[derive(Clone, Debug, PartialEq)]
pub struct Renderer {
    pub width: usize,
    pub height: usize,
    /// tan(fov / 2): half the width of the image plane at unit distance.
    pub(super) half_width: f32,
}

/// Colours of wall textures; far enough from the goals' red and blue to keep the goals
/// unmistakable.
const PALETTE: [[f32; 3]; 8] = [
    [0.80, 0.62, 0.30],
    [0.55, 0.62, 0.30],
    [0.30, 0.62, 0.60],
    [0.58, 0.42, 0.68],
    [0.78, 0.70, 0.58],
    [0.35, 0.66, 0.40],
    [0.46, 0.52, 0.64],
    [0.85, 0.52, 0.62],
];
const FLOOR_TINTS: [[f32; 3]; 4] = [
    [1.0, 1.0, 1.0],
    [1.0, 0.92, 0.82],
    [0.86, 0.95, 1.0],
    [0.92, 1.0, 0.88],
];
const PILLAR: [[f32; 3]; 2] = [[0.92, 0.12, 0.10], [0.10, 0.30, 0.95]];
const GOAL_FLOOR: [[f32; 3]; 2] = [[0.95, 0.35, 0.30], [0.30, 0.45, 0.98]];

fn hash3(a: i64, b: i64, c: i64) -> u32 {
    let mut h = (a as u32).wrapping_mul(0x9E37_79B1)
        ^ (b as u32).wrapping_mul(0x85EB_CA77)
        ^ (c as u32).wrapping_mul(0xC2B2_AE3D);
    h ^= h >> 15;
    h = h.wrapping_mul(0x2C1B_3C6D);
    h ^= h >> 12;
    h = h.wrapping_mul(0x297A_2D39);
    h ^ (h >> 15)
}

fn scale(c: [f32; 3], k: f32) -> [f32; 3] {
    c.map(|v| v * k)
}

fn wall_texture(tex: u32, u: f32, v: f32) -> [f32; 3] {
    let base = PALETTE[(tex >> 2) as usize % PALETTE.len()];
    let alt = PALETTE[(tex >> 5) as usize % PALETTE.len()];
    match tex & 3 {
        0 => {
            // Bricks: four courses, every other one shifted by a quarter.
            let course = (v * 4.0).floor() as i64;
            let shift = if course & 1 == 1 { 0.25 } else { 0.0 };
            let (bu, bv) = ((u * 2.0 + shift).fract(), (v * 4.0).fract());
            if bu < 0.05 || bv < 0.1 {
                scale(base, 0.45)
            } else {
                base
            }
        }
        1 => {
            let k = 3 + (tex >> 8) % 3;
            if ((u * k as f32 * 2.0) as i64) & 1 == 0 {
                base
            } else {
                scale(base, 0.6)
            }
        }
        2 => {
            if (0.35..0.6).contains(&v) {
                alt
            } else {
                base
            }
        }
        _ => {
            if !(0.08..=0.92).contains(&u) || !(0.08..=0.92).contains(&v) {
                scale(base, 0.5)
            } else if (u - 0.5).abs() + (v - 0.5).abs() < 0.25 {
                alt
            } else {
                base
            }
        }
    }
}

struct Hit {
    pub(super) t: f32,
    pub(super) u: f32,
    pub(super) tex: u32,
    /// Faces along x are darker, which makes corners readable.
    pub(super) dark: bool,
}

/// Walks the grid along the ray (DDA) to the first wall. `t` is the distance along the view
/// direction, as the ray's component along it is 1.
fn cast(map: &Map, px: f32, py: f32, rdx: f32, rdy: f32) -> Hit {
    let (mut mx, mut my) = (px.floor() as i64, py.floor() as i64);
    let delta = |r: f32| {
        if r == 0.0 {
            f32::INFINITY
        } else {
            (1.0 / r).abs()
        }
    };
    let (ddx, ddy) = (delta(rdx), delta(rdy));
    let (sx, mut side_x) = if rdx == 0.0 {
        (0, f32::INFINITY)
    } else if rdx < 0.0 {
        (-1, (px - mx as f32) * ddx)
    } else {
        (1, (mx as f32 + 1.0 - px) * ddx)
    };
    let (sy, mut side_y) = if rdy == 0.0 {
        (0, f32::INFINITY)
    } else if rdy < 0.0 {
        (-1, (py - my as f32) * ddy)
    } else {
        (1, (my as f32 + 1.0 - py) * ddy)
    };
    let mut vertical = true;
    for _ in 0..2 * (map.rows + map.cols + 2) {
        if side_x < side_y {
            side_x += ddx;
            mx += sx;
            vertical = true;
        } else {
            side_y += ddy;
            my += sy;
            vertical = false;
        }
        if map.is_wall(my, mx) {
            break;
        }
    }
    let t = if vertical { side_x - ddx } else { side_y - ddy }.max(1e-3);
    let (hx, hy) = (px + t * rdx, py + t * rdy);
    let (u, face) = if vertical {
        let f = hy - hy.floor();
        if sx > 0 {
            (f, 0)
        } else {
            (1.0 - f, 1)
        }
    } else {
        let f = hx - hx.floor();
        if sy > 0 {
            (1.0 - f, 2)
        } else {
            (f, 3)
        }
    };
    Hit {
        t,
        u,
        tex: hash3(mx, my, face),
        dark: !vertical,
    }
}

fn fog(t: f32) -> f32 {
    1.0 / (1.0 + 0.1 * t)
}

fn floor_colour(map: &Map, x: f32, y: f32) -> [f32; 3] {
    for (i, g) in [Goal::Near, Goal::Far].into_iter().enumerate() {
        let (gx, gy) = map.goal_point(g);
        if (x - gx).powi(2) + (y - gy).powi(2) <= GOAL_RADIUS * GOAL_RADIUS {
            return GOAL_FLOOR[i];
        }
    }
    let tint = FLOOR_TINTS[hash3(x.floor() as i64, y.floor() as i64, 7) as usize % 4];
    let checker = ((x * 2.0).floor() as i64 + (y * 2.0).floor() as i64) & 1;
    scale(tint, if checker == 0 { 0.62 } else { 0.48 })
}

fn ceiling_colour(x: f32, y: f32) -> [f32; 3] {
    let (fx, fy) = (x - x.floor(), y - y.floor());
    if fx < 0.04 || fy < 0.04 {
        [0.55, 0.55, 0.52]
    } else {
        [0.85, 0.85, 0.80]
    }
}

struct PillarHit {
    pub(super) goal: usize,
    pub(super) t: f32,
    pub(super) top: f32,
    pub(super) bottom: f32,
    pub(super) shade: f32,
}

impl Renderer {
    /// A renderer with a 90 degree horizontal field of view.
    pub fn new(width: usize, height: usize) -> Result<Renderer> {
        Self::with_fov(width, height, 90.0)
    }

    pub fn with_fov(width: usize, height: usize, fov_deg: f64) -> Result<Renderer> {
        if !(1..=4096).contains(&width) || !(1..=4096).contains(&height) {
            bail!("frame size {width}x{height} out of range (1..=4096 pixels a side)");
        }
        if !(fov_deg > 0.0 && fov_deg < 180.0) {
            bail!("field of view {fov_deg} degrees out of range (0, 180)");
        }
        // tan(45 degrees) computed numerically is not exactly 1 everywhere; the default
        // stays exact so that frames are the same bits on every platform.
        let half_width = if fov_deg == 90.0 {
            1.0
        } else {
            (fov_deg.to_radians() / 2.0).tan() as f32
        };
        Ok(Renderer {
            width,
            height,
            half_width,
        })
    }

    /// Bytes in one frame: 3 * height * width.
    pub fn frame_len(&self) -> usize {
        3 * self.width * self.height
    }

    /// The view from a pose, `[3, height, width]` u8.
    pub fn render(&self, map: &Map, pose: Pose) -> Vec<u8> {
        let mut out = Vec::new();
        self.render_into(map, pose, &mut out);
        out
    }

    /// `render` into a reused buffer (resized to `frame_len`).
    pub fn render_into(&self, map: &Map, pose: Pose, out: &mut Vec<u8>) {
        let (w, h) = (self.width, self.height);
        out.clear();
        out.resize(self.frame_len(), 0);
        let (px, py) = (pose.x(), pose.y());
        let (dx, dy) = DIRS[pose.h()];
        let (rx, ry) = DIRS[(pose.h() + 3) % HEADINGS];
        let focal = w as f32 / 2.0 / self.half_width;
        let horizon = h as f32 / 2.0;
        let goals = [map.goal_point(Goal::Near), map.goal_point(Goal::Far)];
        let plane = w * h;
        for i in 0..w {
            let cx = ((2 * i + 1) as f32 / w as f32 - 1.0) * self.half_width;
            let (rdx, rdy) = (dx + rx * cx, dy + ry * cx);
            let hit = cast(map, px, py, rdx, rdy);
            let wall_top = horizon - focal * (WALL_HEIGHT - EYE) / hit.t;
            let wall_bottom = horizon + focal * EYE / hit.t;
            let wall_shade = fog(hit.t) * if hit.dark { 0.8 } else { 1.0 };
            let a = rdx * rdx + rdy * rdy;
            let mut pillar: Option<PillarHit> = None;
            for (k, &(gx, gy)) in goals.iter().enumerate() {
                let (ox, oy) = (px - gx, py - gy);
                let b = rdx * ox + rdy * oy;
                let c = ox * ox + oy * oy - PILLAR_RADIUS * PILLAR_RADIUS;
                let disc = b * b - a * c;
                if c <= 0.0 || disc < 0.0 {
                    continue;
                }
                let t = (-b - disc.sqrt()) / a;
                if t <= 0.0 || t >= hit.t || pillar.as_ref().is_some_and(|p| p.t <= t) {
                    continue;
                }
                let (nx, ny) = (
                    (ox + t * rdx) / PILLAR_RADIUS,
                    (oy + t * rdy) / PILLAR_RADIUS,
                );
                let lambert = (-(nx * rdx + ny * rdy) / a.sqrt()).max(0.0);
                pillar = Some(PillarHit {
                    goal: k,
                    t,
                    top: horizon - focal * (PILLAR_HEIGHT - EYE) / t,
                    bottom: horizon + focal * EYE / t,
                    shade: fog(t) * (0.45 + 0.55 * lambert),
                });
            }
            for j in 0..h {
                let yc = j as f32 + 0.5;
                let colour = match &pillar {
                    Some(p) if yc >= p.top && yc < p.bottom => {
                        let v = (yc - p.top) / (p.bottom - p.top);
                        let base = if (0.1..0.2).contains(&v) {
                            [0.95, 0.95, 0.95]
                        } else {
                            PILLAR[p.goal]
                        };
                        scale(base, p.shade)
                    }
                    _ if yc >= wall_top && yc < wall_bottom => {
                        let v = (yc - wall_top) / (wall_bottom - wall_top);
                        scale(wall_texture(hit.tex, hit.u, v), wall_shade)
                    }
                    _ if yc > horizon => {
                        let t = focal * EYE / (yc - horizon);
                        scale(floor_colour(map, px + t * rdx, py + t * rdy), fog(t))
                    }
                    _ => {
                        let t = focal * (WALL_HEIGHT - EYE) / (horizon - yc).max(1e-3);
                        scale(ceiling_colour(px + t * rdx, py + t * rdy), fog(t))
                    }
                };
                for (ch, v) in colour.iter().enumerate() {
                    out[ch * plane + j * w + i] = (v * 255.0).round().clamp(0.0, 255.0) as u8;
                }
            }
        }
    }
}
