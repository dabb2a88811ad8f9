//! Tiers as values (the PDE specification's kernel tiers): a table of kernel variants chosen by a
//! run-time value, the first whose bound the value does not exceed, the last one the default. A
//! tier is only a name, a bound and a workspace size here; the kernels are bound to tiers when a
//! launch is made ([`crate::dispatch::Launch`]), so one table serves any set of kernels.

use crate::error::{PdeError, Result};

/// One tier: `tier(value <= max, name, workspace)` or, for the default, `max = None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tier {
    /// Its name (errors and launches name tiers by it).
    pub name: String,
    /// The largest value it takes; `None` for the default (last) tier.
    pub max: Option<u32>,
    /// Workspace elements one allocation of this tier takes (0: none).
    pub workspace: u32,
}

impl Tier {
    /// A tier for values up to `max`.
    pub fn upto(name: &str, max: u32, workspace: u32) -> Tier {
        Tier {
            name: name.to_string(),
            max: Some(max),
            workspace,
        }
    }

    /// The default tier (takes every value above the others).
    pub fn default_tier(name: &str, workspace: u32) -> Tier {
        Tier {
            name: name.to_string(),
            max: None,
            workspace,
        }
    }
}

/// A checked tier table: bounds strictly increasing, exactly one default, last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tiers {
    name: String,
    tiers: Vec<Tier>,
}

impl Tiers {
    /// Checks and builds the table `name`.
    pub fn new(name: &str, tiers: Vec<Tier>) -> Result<Tiers> {
        let err = |problem: String| PdeError::Tiers {
            tiers: name.to_string(),
            problem,
        };
        let Some(last) = tiers.last() else {
            return Err(err("the table has no tier".into()));
        };
        if last.max.is_some() {
            return Err(err(format!(
                "the last tier `{}` must be the default (no bound)",
                last.name
            )));
        }
        if tiers.len() > u32::MAX as usize {
            return Err(err("too many tiers".into()));
        }
        let mut prev: Option<u32> = None;
        for (i, t) in tiers.iter().enumerate() {
            if tiers[..i].iter().any(|o| o.name == t.name) {
                return Err(err(format!("tier `{}` is declared twice", t.name)));
            }
            match (t.max, i + 1 == tiers.len()) {
                (None, false) => {
                    return Err(err(format!(
                        "tier `{}` is a default but not the last tier",
                        t.name
                    )));
                }
                (Some(m), _) => {
                    if prev.is_some_and(|p| m <= p) {
                        return Err(err(format!(
                            "tier `{}` bound {m} does not exceed the previous tier's",
                            t.name
                        )));
                    }
                    prev = Some(m);
                }
                (None, true) => {}
            }
        }
        Ok(Tiers {
            name: name.to_string(),
            tiers,
        })
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tiers, in order (index = tier number).
    pub fn tiers(&self) -> &[Tier] {
        &self.tiers
    }

    /// Number of tiers.
    pub fn len(&self) -> usize {
        self.tiers.len()
    }

    /// Always false: a table has at least its default tier.
    pub fn is_empty(&self) -> bool {
        self.tiers.is_empty()
    }

    /// Tier `index`, if any.
    pub fn get(&self, index: u32) -> Option<&Tier> {
        self.tiers.get(index as usize)
    }
}

/// `select_tier(TIERS, value)`: the index of the first tier whose bound is at least `value`,
/// else of the default tier.
pub fn select_tier(tiers: &Tiers, value: u32) -> u32 {
    let bounded = tiers.tiers.len() - 1;
    tiers.tiers[..bounded]
        .iter()
        .position(|t| t.max.is_some_and(|m| value <= m))
        .unwrap_or(bounded) as u32
}
