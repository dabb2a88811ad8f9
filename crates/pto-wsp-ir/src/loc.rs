//! Source locations carried by the IR.
//!
//! Why: errors must point at the text a user wrote (`file:line:column`), but two modules that say
//! the same thing must compare equal whether they came from a file, from the builder, or from
//! printing and re-parsing. So a [`Loc`] is *metadata*: it never takes part in equality or hashing.
//! Promise: `Loc` values compare equal to each other, always; [`Ident`] compares by name only.

use std::fmt;
use std::hash::{Hash, Hasher};

/// A byte range `[start, end)` in the source text a node was parsed from, or [`Loc::NONE`] for
/// nodes made by the builder.
#[derive(Clone, Copy, Default)]
pub struct Loc {
    /// Byte offset of the first character.
    pub start: u32,
    /// Byte offset one past the last character.
    pub end: u32,
}

impl Loc {
    /// The location of nodes that were not parsed from text.
    pub const NONE: Loc = Loc {
        start: u32::MAX,
        end: u32::MAX,
    };

    /// A location covering `start..end`.
    pub fn new(start: usize, end: usize) -> Loc {
        Loc {
            start: start as u32,
            end: end as u32,
        }
    }

    /// Whether this location points into source text.
    pub fn is_known(self) -> bool {
        self.start != u32::MAX
    }

    /// The smallest location covering both `self` and `other` (unknown sides are ignored).
    pub fn join(self, other: Loc) -> Loc {
        match (self.is_known(), other.is_known()) {
            (true, true) => Loc {
                start: self.start.min(other.start),
                end: self.end.max(other.end),
            },
            (true, false) => self,
            (false, _) => other,
        }
    }
}

impl PartialEq for Loc {
    fn eq(&self, _other: &Loc) -> bool {
        true
    }
}
impl Eq for Loc {}
impl Hash for Loc {
    fn hash<H: Hasher>(&self, _state: &mut H) {}
}

impl fmt::Debug for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_known() {
            write!(f, "@{}..{}", self.start, self.end)
        } else {
            f.write_str("@?")
        }
    }
}

/// A name as written by the user, with where it was written.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Ident {
    /// The name itself.
    pub name: String,
    /// Where it was written ([`Loc::NONE`] from the builder).
    pub loc: Loc,
}

impl Ident {
    /// An identifier with no source location.
    pub fn new(name: impl Into<String>) -> Ident {
        Ident {
            name: name.into(),
            loc: Loc::NONE,
        }
    }

    /// An identifier parsed at `loc`.
    pub fn at(name: impl Into<String>, loc: Loc) -> Ident {
        Ident {
            name: name.into(),
            loc,
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.name)
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl From<&str> for Ident {
    fn from(s: &str) -> Ident {
        Ident::new(s)
    }
}

impl From<String> for Ident {
    fn from(s: String) -> Ident {
        Ident::new(s)
    }
}
