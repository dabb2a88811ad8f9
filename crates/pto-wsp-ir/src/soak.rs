//! The soak switch: one environment variable that scales every property test's case count.
//!
//! Why: the differential and property tests run a few hundred random cases per CI run, sized for
//! CI's time; finding a rare interleaving or a rare program needs many more, on demand, without
//! editing each test. Every property test of the workspace sizes itself with [`cases`].
//!
//! Promises: with `PTO_WSP_SOAK` unset (or empty), [`cases`]`(n)` is `n`; with
//! `PTO_WSP_SOAK=F` (a positive number, fractions allowed), it is `n × F` rounded up, at least 1.
//! A value that is not a positive number panics naming the variable, so a mistyped soak never
//! runs silently at the default size.

/// The environment variable read by [`cases`].
pub const SOAK_VAR: &str = "PTO_WSP_SOAK";

/// `base` property-test cases scaled by `PTO_WSP_SOAK` (module docs).
pub fn cases(base: u32) -> u32 {
    match std::env::var(SOAK_VAR) {
        Ok(v) if !v.trim().is_empty() => scaled(base, v.trim()),
        _ => base,
    }
}

fn scaled(base: u32, factor: &str) -> u32 {
    match factor.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 => {
            (f64::from(base) * f).ceil().clamp(1.0, f64::from(u32::MAX)) as u32
        }
        _ => panic!(
            "{SOAK_VAR}={factor}: not a positive number (the factor scaling every property test's case count)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::scaled;

    #[test]
    fn a_factor_scales_and_rounds_up() {
        assert_eq!(scaled(48, "1"), 48);
        assert_eq!(scaled(48, "2083.4"), 100_004);
        assert_eq!(scaled(3, "0.1"), 1);
        assert_eq!(scaled(u32::MAX, "10"), u32::MAX);
    }

    #[test]
    #[should_panic(expected = "PTO_WSP_SOAK=x: not a positive number")]
    fn a_bad_factor_is_refused_not_ignored() {
        scaled(48, "x");
    }
}
