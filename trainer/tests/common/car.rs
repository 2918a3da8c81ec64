//! gymnasium's MountainCar as `scripts/mountaincar.py` logs it, for the library's tests
//! (through `#[path]`) and the command-line tests alike: the rows alone, since the two
//! name the crate's types differently.

/// The rows of `rows` transitions of a car pushed the way it moves, one push in three
/// random, half the episodes from where gymnasium starts them and half from anywhere;
/// rewarded and terminal at the flag, cut after 500 steps. `uniform(lo, hi)` draws every
/// random number. Returns the states, the next states (two values each: position and
/// velocity), the rewards, the terminals and the timeouts.
#[allow(clippy::type_complexity)]
pub fn mountain_car_rows(
    rows: usize,
    mut uniform: impl FnMut(f32, f32) -> f32,
) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<bool>, Vec<bool>) {
    let (mut o, mut nx, mut r, mut t, mut cut) = (vec![], vec![], vec![], vec![], vec![]);
    while r.len() < rows {
        let (mut p, mut v) = match uniform(0.0, 1.0) < 0.5 {
            true => (uniform(-0.6, -0.4), 0.0),
            false => (uniform(-1.2, 0.5), uniform(-0.07, 0.07)),
        };
        for step in 0..500 {
            let mut push: f32 = if v > 0.0 { 1.0 } else { -1.0 };
            if uniform(0.0, 1.0) < 0.3 {
                push = uniform(-1.0, 2.0).floor().clamp(-1.0, 1.0);
            }
            let v2 = (v + push * 0.001 - (3.0 * p).cos() * 0.0025).clamp(-0.07, 0.07);
            let p2 = (p + v2).clamp(-1.2, 0.6);
            let v2 = if p2 == -1.2 && v2 < 0.0 { 0.0 } else { v2 };
            let hit = p2 >= 0.5;
            o.extend([p, v]);
            nx.extend([p2, v2]);
            r.push(f32::from(u8::from(hit)));
            t.push(hit);
            cut.push(!hit && (step == 499 || r.len() == rows));
            (p, v) = (p2, v2);
            if hit || r.len() == rows {
                break;
            }
        }
    }
    (o, nx, r, t, cut)
}
