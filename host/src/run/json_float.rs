//! Numbers in summary.json that may not be finite.
//!
//! JSON has no NaN or infinity, and serde_json writes them as `null`, which reads back as no
//! number at all. A diagnostic that cannot be computed (an R-hat of chains that never moved)
//! is still a result, so these fields write a finite number as a number and the others as the
//! strings `"NaN"`, `"inf"` and `"-inf"`, which Python's `float()` and most JSON readers'
//! users accept; reading takes numbers, those strings, and `null` (as NaN, for summaries
//! written before).

use serde::de::{self, Deserializer};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

/// One number: finite as a number, else a string.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Number {
    Finite(f64),
    Text(String),
    Null(()),
}

fn to_number(v: f64) -> Number {
    if v.is_finite() {
        Number::Finite(v)
    } else if v.is_nan() {
        Number::Text("NaN".into())
    } else if v > 0.0 {
        Number::Text("inf".into())
    } else {
        Number::Text("-inf".into())
    }
}

fn from_number<E: de::Error>(n: Number) -> Result<f64, E> {
    match n {
        Number::Finite(v) => Ok(v),
        Number::Null(()) => Ok(f64::NAN),
        Number::Text(t) => match t.as_str() {
            "NaN" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            other => Err(E::custom(format!(
                "{other:?} is not a number (nor \"NaN\", \"inf\", \"-inf\")"
            ))),
        },
    }
}

/// `#[serde(with = "json_float")]` on an `f64`.
pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    to_number(*v).serialize(s)
}

/// See [`serialize`].
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    from_number(Number::deserialize(d)?)
}

/// `#[serde(with = "json_float::vec")]` on a `Vec<f64>`.
pub mod vec {
    use super::*;

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for &x in v {
            seq.serialize_element(&to_number(x))?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        Vec::<Number>::deserialize(d)?
            .into_iter()
            .map(from_number)
            .collect()
    }
}

/// `#[serde(with = "json_float::option")]` on an `Option<f64>` (absent or `null`: None).
pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        v.map(to_number).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        match Option::<Number>::deserialize(d)? {
            None | Some(Number::Null(())) => Ok(None),
            Some(n) => from_number(n).map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug)]
    struct Fields {
        #[serde(with = "super")]
        one: f64,
        #[serde(with = "super::vec")]
        many: Vec<f64>,
        #[serde(with = "super::option", default)]
        maybe: Option<f64>,
    }

    /// Every kind of value round-trips through text, and an old `null` reads as NaN.
    #[test]
    fn non_finite_values_round_trip() {
        let f = Fields {
            one: f64::NAN,
            many: vec![1.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN],
            maybe: Some(f64::INFINITY),
        };
        let text = serde_json::to_string(&f).unwrap();
        assert_eq!(
            text,
            r#"{"one":"NaN","many":[1.5,"inf","-inf","NaN"],"maybe":"inf"}"#
        );
        let back: Fields = serde_json::from_str(&text).unwrap();
        assert!(back.one.is_nan() && back.many[3].is_nan());
        assert_eq!(&back.many[..3], &[1.5, f64::INFINITY, f64::NEG_INFINITY]);
        assert_eq!(back.maybe, Some(f64::INFINITY));
        let old: Fields = serde_json::from_str(r#"{"one":null,"many":[null, 2]}"#).unwrap();
        assert!(old.one.is_nan() && old.many[0].is_nan() && old.maybe.is_none());
        assert!(serde_json::from_str::<Fields>(r#"{"one":"x","many":[]}"#).is_err());
    }
}
