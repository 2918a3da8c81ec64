//! Numbers in JSON that may be NaN. JSON has no NaN: `serde_json` writes one as `null`,
//! and reading that `null` back as a number fails. A check that could not be computed,
//! or a loss that diverged, is NaN; these read `null` back as NaN, so the run directory
//! that holds it still reads (`laq inspect`).

use serde::{Deserialize, Deserializer, Serializer};

/// `#[serde(with = "crate::util::json::nan_f64")]`: an `f64` that is `null` where NaN.
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Check {
///     #[serde(with = "laq::util::json::nan_f64")]
///     value: f64,
/// }
/// let text = serde_json::to_string(&Check { value: f64::NAN }).unwrap();
/// assert_eq!(text, r#"{"value":null}"#);
/// let back: Check = serde_json::from_str(&text).unwrap();
/// assert!(back.value.is_nan());
/// ```
pub mod nan_f64 {
    use super::*;

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(*x)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

/// `#[serde(with = "crate::util::json::nan_f32s")]`: a `Vec<f32>` whose NaN are `null`.
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Curve {
///     #[serde(with = "laq::util::json::nan_f32s")]
///     loss: Vec<f32>,
/// }
/// let text = serde_json::to_string(&Curve { loss: vec![0.5, f32::NAN] }).unwrap();
/// assert_eq!(text, r#"{"loss":[0.5,null]}"#);
/// let back: Curve = serde_json::from_str(&text).unwrap();
/// assert!(back.loss[0] == 0.5 && back.loss[1].is_nan());
/// ```
pub mod nan_f32s {
    use super::*;
    use serde::Serialize;

    pub fn serialize<S: Serializer>(x: &[f32], s: S) -> Result<S::Ok, S::Error> {
        x.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
        let v = Vec::<Option<f32>>::deserialize(d)?;
        Ok(v.into_iter().map(|x| x.unwrap_or(f32::NAN)).collect())
    }
}
