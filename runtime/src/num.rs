//! Tiny number parsers for metadata values.
//!
//! `core`'s float parser is exact but pulls in about 10 KB of tables; metadata only
//! holds a discount and a threshold, so a small parser is used instead. Decimals with at
//! most 7 significant digits and a decimal exponent within +-10 (e.g. `0.95`,
//! `-12.5`) are converted exactly (correctly rounded); longer ones are within a few ulp.
//! Host and target run the same code, so they always agree.

const POW10: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// Parses a decimal `usize` (digits only, at least one).
pub(crate) fn parse_usize(s: &[u8]) -> Option<usize> {
    if s.is_empty() {
        return None;
    }
    let mut v = 0usize;
    for &c in s {
        let d = c.checked_sub(b'0').filter(|d| *d < 10)?;
        v = v.checked_mul(10)?.checked_add(usize::from(d))?;
    }
    Some(v)
}

fn pow10(e: u32) -> f32 {
    POW10.get(e as usize).copied().unwrap_or(1e10)
}

/// Parses a decimal float: `[+-]digits[.digits][(e|E)[+-]digits]` (digits may be
/// empty on one side of the point). Returns `None` on syntax errors and for results
/// that are not finite.
pub(crate) fn parse_f32(s: &[u8]) -> Option<f32> {
    let (neg, mut rest) = match s.split_first() {
        Some((b'-', r)) => (true, r),
        Some((b'+', r)) => (false, r),
        _ => (false, s),
    };
    let mut mantissa = 0u32;
    let mut exp = 0i32;
    let mut any = false;
    let mut dot = false;
    while let Some((&c, r)) = rest.split_first() {
        match c {
            b'0'..=b'9' => {
                any = true;
                // Nine significant digits are more than an f32 holds.
                if mantissa < 100_000_000 {
                    mantissa = mantissa * 10 + u32::from(c - b'0');
                    if dot {
                        exp -= 1;
                    }
                } else if !dot {
                    exp += 1;
                }
            }
            b'.' if !dot => dot = true,
            b'e' | b'E' => break,
            _ => return None,
        }
        rest = r;
    }
    if !any {
        return None;
    }
    if let Some((_, r)) = rest.split_first() {
        let (eneg, mut digits) = match r.split_first() {
            Some((b'-', d)) => (true, d),
            Some((b'+', d)) => (false, d),
            _ => (false, r),
        };
        if digits.is_empty() {
            return None;
        }
        let mut e = 0i32;
        while let Some((&c, d)) = digits.split_first() {
            let v = c.checked_sub(b'0').filter(|v| *v < 10)?;
            e = (e * 10 + i32::from(v)).min(10_000);
            digits = d;
        }
        exp += if eneg { -e } else { e };
    }
    // Scale by powers of ten, at most 1e10 at a time (1e10 is exact in f32). With a
    // mantissa below 2^24 and |exp| <= 10 this is a single correctly rounded
    // operation on exact operands.
    let mut v = mantissa as f32;
    while exp > 0 && v.is_finite() {
        let step = exp.min(10);
        v *= pow10(step.unsigned_abs());
        exp -= step;
    }
    while exp < 0 && v != 0.0 {
        let step = exp.max(-10);
        v /= pow10(step.unsigned_abs());
        exp -= step;
    }
    let v = if neg { -v } else { v };
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats() {
        for (s, v) in [
            ("0.95", 0.95f32),
            ("1", 1.0),
            ("-12.5", -12.5),
            ("+3", 3.0),
            (".5", 0.5),
            ("5.", 5.0),
            ("1e-3", 1e-3),
            ("2.5E+2", 250.0),
            ("0", 0.0),
            ("-0.0", -0.0),
            ("0.1", 0.1),
            ("0.99", 0.99),
            ("-4.605170186", -4.605_170_2),
        ] {
            assert_eq!(parse_f32(s.as_bytes()), Some(v), "{s}");
        }
        let long = parse_f32(b"3.14159265358979323846264338327950288").unwrap();
        assert!((long - core::f32::consts::PI).abs() <= 2.0 * f32::EPSILON * 4.0);
        let tiny = parse_f32(b"1.5e-30").unwrap();
        assert!((tiny / 1.5e-30 - 1.0).abs() < 1e-6);
        for bad in [
            "", "-", ".", "e5", "1e", "1e+", "nan", "inf", "1.2.3", "1e99", "0x10", " 1",
        ] {
            assert_eq!(parse_f32(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn usizes() {
        assert_eq!(parse_usize(b"64"), Some(64));
        assert_eq!(parse_usize(b""), None);
        assert_eq!(parse_usize(b"+1"), None);
        assert_eq!(parse_usize(b"99999999999999999999999"), None);
    }
}
