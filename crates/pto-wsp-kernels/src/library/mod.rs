//! The kernel library: every built-in kernel written once in tile instructions, for every
//! element type it accepts, read by every back end that cannot run the Rust built-ins (the
//! PTO-ISA C++ emitter, the Ascend back end) and by `check`, which types a module's kernels
//! against it.
//!
//! Why: the Rust built-ins (`crate::builtins`) are the CPU simulation's fast path; a device
//! runs tile instructions. A module kernel named by a built-in (by its own name or through
//! `//@ alias K=BUILTIN`) must carry a body to the emitters: [`instantiate`] makes it from the
//! built-in's definition here, at the module kernel's region types.
//!
//! The definitions live in `library/*.wsp` beside this crate's sources, embedded at build time.
//! Each is a kernel in the kernel language whose element types, name and some instructions are
//! template variables, under a header of `//@` lines:
//!
//! ```text
//! //@ def add sub mul div max min        the built-ins it defines
//! //@ subst OP = TADD TSUB TMUL TDIV TMAX TMIN   per built-in, the text of `$OP`
//! //@ where A B Y float                 the element types it accepts (clauses below)
//! //@ default scale = 1.0               the value of an optional scalar a task leaves out
//! kernel $NAME(in a: $A[?, ?], in b: $B[?, ?], out y: $Y[?, ?]) @vector { ... }
//! ```
//!
//! A region parameter's type variable (`$A`) is bound to the module kernel's element type of
//! that region. `where` clauses: `VARS float` (`f32`, `f16`, `bf16`), `VARS int` (`i32`,
//! `i64`), `VARS index` (`i32`, `u32`, `i64`, `u64`, `u8`), `VARS any`, `VARS in T...`,
//! `A == B`, `A != B`; every type variable must be constrained by some clause. In the text,
//! `$I_MAX` is the largest value of integer type variable `I`. The lines between
//! `//@if regions >= N` and `//@end` are kept only for instances of at least `N` regions (the
//! trailing regions named by `//@ optional` are the ones an instance may leave out); those
//! between `//@if NAME...` and `//@end` only for the built-ins named. `//@ regions any` makes a
//! definition (with no parameters) take any regions (`empty`). The first definition of a
//! built-in whose region count and clauses fit is the one instantiated; none fitting is a
//! [`LibraryError`] naming each definition's clauses (so a mixed `f32 × bf16` product is
//! refused at the module's kernel declaration, never inside a C++ compiler).
//!
//! Instantiation substitutes the variables, parses and validates the kernel
//! (`pto_wsp_ir::validate_kernel`), turns the optional scalars the module kernel does not
//! declare into locals holding their defaults, and drops conversions between equal types (a
//! `TLOAD` into a staging tile converted by `TCVT` into a tile of the same type loads straight
//! into it; a `TCVT` into a staging tile stored by `TSTORE` stores the source), then staging
//! tiles no instruction uses.
//!
//! Promise: every name of `crate::builtins::NAMES` has a definition for `f32` (test); an
//! instance is a valid kernel whose parameters are the module kernel's (names from the
//! library, element types, shapes and accesses from the module); the library's own text is
//! checked by the tests, so a broken definition fails a test, not a user.

mod peephole;

use pto_wsp_ir::{Access, DType, KernelDecl, ParamKind};
use std::sync::OnceLock;

/// The library's files: (name, text).
pub const FILES: &[(&str, &str)] = &[
    (
        "elementwise.wsp",
        include_str!("../../library/elementwise.wsp"),
    ),
    ("rows.wsp", include_str!("../../library/rows.wsp")),
    ("matmul.wsp", include_str!("../../library/matmul.wsp")),
    ("attention.wsp", include_str!("../../library/attention.wsp")),
    ("index.wsp", include_str!("../../library/index.wsp")),
];

/// A constraint on the element types of a definition.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Clause {
    /// Each variable is one of these types.
    OneOf(Vec<String>, Vec<DType>),
    /// The two variables are the same type (`true`) or different (`false`).
    Same(String, String, bool),
}

/// One definition: a kernel template and what it defines.
#[derive(Clone, Debug)]
pub struct Definition {
    /// The built-ins it defines.
    pub builtins: Vec<String>,
    /// Per-built-in text of each substitution variable.
    substs: Vec<(String, Vec<String>)>,
    clauses: Vec<Clause>,
    /// The `where` lines as written, for messages.
    pub constraints: Vec<String>,
    /// Defaults of optional scalar parameters: (name, value as body text).
    defaults: Vec<(String, String)>,
    /// The kernel text (with `$` variables).
    text: String,
    /// Where it is written: file and line of its `//@ def`.
    pub file: &'static str,
    /// Line of the `//@ def` (1-based).
    pub line: usize,
    /// Region parameters in order: (name, type variable).
    regions: Vec<(String, String)>,
    /// How many trailing regions may be left out (`//@ optional`).
    optional: usize,
    /// Takes any regions, of any types (`//@ regions any`: `empty`).
    any_regions: bool,
}

/// Why a kernel has no library instance.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("kernel `{kernel}` (built-in `{builtin}`): {message}")]
pub struct LibraryError {
    /// The module's kernel.
    pub kernel: String,
    /// The built-in it names.
    pub builtin: String,
    /// Why.
    pub message: String,
}

/// The parsed library (parsed once; a malformed file is a panic caught by the tests).
pub fn definitions() -> &'static [Definition] {
    static DEFS: OnceLock<Vec<Definition>> = OnceLock::new();
    DEFS.get_or_init(|| {
        let mut defs = Vec::new();
        for (file, text) in FILES {
            defs.extend(parse_file(file, text).unwrap_or_else(|e| panic!("kernel library {e}")));
        }
        defs
    })
}

/// The definitions of built-in `name`, in order.
pub fn definitions_of(name: &str) -> impl Iterator<Item = &'static Definition> {
    definitions()
        .iter()
        .filter(move |d| d.builtins.iter().any(|b| b == name))
}

/// Whether built-in `name` has a definition in the library.
pub fn defines(name: &str) -> bool {
    definitions_of(name).next().is_some()
}

fn parse_file(file: &'static str, text: &str) -> Result<Vec<Definition>, String> {
    let mut defs: Vec<Definition> = Vec::new();
    let mut cur: Option<Definition> = None;
    let mut in_header = false;
    for (n, line) in text.lines().enumerate() {
        let at = |m: String| format!("{file}:{}: {m}", n + 1);
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("//@") {
            let rest = rest.trim();
            let (word, args) = rest.split_once(' ').unwrap_or((rest, ""));
            if !in_header && (word == "if" || word == "end") {
                if let Some(d) = cur.as_mut() {
                    d.text.push_str(t);
                    d.text.push('\n');
                }
                continue;
            }
            if word == "def" {
                if let Some(d) = cur.take() {
                    defs.push(finish(d).map_err(at)?);
                }
                cur = Some(Definition {
                    builtins: args.split_whitespace().map(String::from).collect(),
                    substs: Vec::new(),
                    clauses: Vec::new(),
                    constraints: Vec::new(),
                    defaults: Vec::new(),
                    text: String::new(),
                    file,
                    line: n + 1,
                    regions: Vec::new(),
                    optional: 0,
                    any_regions: false,
                });
                in_header = true;
                continue;
            }
            let Some(d) = cur.as_mut().filter(|_| in_header) else {
                return Err(at(format!("`//@ {word}` outside a definition's header")));
            };
            match word {
                "subst" => {
                    let (var, vals) = args
                        .split_once('=')
                        .ok_or_else(|| at("`subst VAR = VALUES`".into()))?;
                    let vals: Vec<String> = vals.split_whitespace().map(String::from).collect();
                    if vals.len() != d.builtins.len() {
                        return Err(at(format!(
                            "`subst {}` has {} values for {} built-ins",
                            var.trim(),
                            vals.len(),
                            d.builtins.len()
                        )));
                    }
                    d.substs.push((var.trim().to_string(), vals));
                }
                "where" => {
                    d.clauses.push(parse_clause(args).map_err(at)?);
                    d.constraints.push(args.trim().to_string());
                }
                "optional" => d.optional = args.split_whitespace().count(),
                "regions" if args.trim() == "any" => d.any_regions = true,
                "default" => {
                    let (name, val) = args
                        .split_once('=')
                        .ok_or_else(|| at("`default NAME = VALUE`".into()))?;
                    d.defaults
                        .push((name.trim().to_string(), val.trim().to_string()));
                }
                other => return Err(at(format!("unknown directive `//@ {other}`"))),
            }
            continue;
        }
        if let Some(d) = cur.as_mut()
            && (!t.starts_with("//") || !in_header)
        {
            in_header = false;
            d.text.push_str(line);
            d.text.push('\n');
        }
    }
    if let Some(d) = cur.take() {
        defs.push(finish(d).map_err(|m| format!("{file}: {m}"))?);
    }
    Ok(defs)
}

fn parse_clause(args: &str) -> Result<Clause, String> {
    let words: Vec<&str> = args.split_whitespace().collect();
    if let [a, op, b] = words[..]
        && (op == "==" || op == "!=")
    {
        return Ok(Clause::Same(a.into(), b.into(), op == "=="));
    }
    let types = |names: &[&str]| -> Result<Vec<DType>, String> {
        names
            .iter()
            .map(|n| DType::parse_keyword(n).ok_or_else(|| format!("unknown type `{n}`")))
            .collect()
    };
    if let Some(p) = words.iter().position(|w| *w == "in") {
        return Ok(Clause::OneOf(
            words[..p].iter().map(|s| s.to_string()).collect(),
            types(&words[p + 1..])?,
        ));
    }
    let Some((&class, vars)) = words.split_last() else {
        return Err("empty `where`".into());
    };
    let set: &[DType] = match class {
        "float" => &[DType::F32, DType::F16, DType::Bf16],
        "int" => &[DType::I32, DType::I64],
        "index" => &[DType::I32, DType::U32, DType::I64, DType::U64, DType::U8],
        "any" => &[
            DType::F32,
            DType::F16,
            DType::Bf16,
            DType::I32,
            DType::U32,
            DType::I64,
            DType::U64,
            DType::U8,
        ],
        other => return Err(format!("unknown type class `{other}`")),
    };
    Ok(Clause::OneOf(
        vars.iter().map(|s| s.to_string()).collect(),
        set.to_vec(),
    ))
}

/// Reads the region parameters' type variables from the kernel's signature and checks every
/// variable is constrained.
fn finish(mut d: Definition) -> Result<Definition, String> {
    let plain: String = d
        .text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//@"))
        .map(|l| format!("{l}\n"))
        .collect();
    let sig_end = plain.find('{').ok_or("a definition without a body")?;
    let sig = &plain[..sig_end];
    let open = sig.find('(').ok_or("a definition without parameters")?;
    for p in split_params(&sig[open + 1..sig.rfind(')').ok_or("no `)`")?]) {
        let p = p.trim();
        let Some((access, rest)) = p.split_once(' ') else {
            continue;
        };
        // An access keyword, or a substitution variable standing for one (`$CA`).
        if !matches!(access, "in" | "out" | "inout") && !access.starts_with('$') {
            continue;
        }
        let (name, ty) = rest.split_once(':').ok_or("a region without a type")?;
        let var = ty
            .trim()
            .strip_prefix('$')
            .and_then(|v| v.split('[').next())
            .ok_or_else(|| format!("region `{}` has no type variable", name.trim()))?;
        d.regions.push((name.trim().to_string(), var.to_string()));
    }
    for (_, var) in &d.regions {
        let constrained = d.clauses.iter().any(|c| match c {
            Clause::OneOf(vars, _) => vars.contains(var),
            Clause::Same(..) => false,
        });
        if !constrained {
            return Err(format!(
                "definition of {}: type variable `{var}` has no `where` clause",
                d.builtins.join(", ")
            ));
        }
    }
    Ok(d)
}

/// Splits a parameter list at its top-level commas.
fn split_params(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// The element type and access of each region parameter of `k`, in order.
fn regions_of(k: &KernelDecl) -> Vec<(DType, Access, &[Option<u64>])> {
    k.params
        .iter()
        .filter_map(|p| match &p.kind {
            ParamKind::Tile {
                access,
                dtype,
                shape,
            } => Some((*dtype, *access, shape.as_slice())),
            ParamKind::Scalar(_) => None,
        })
        .collect()
}

impl Definition {
    /// The binding of its type variables to `types`, if its region count and clauses fit.
    fn bind(&self, types: &[DType]) -> Option<Vec<(String, DType)>> {
        if self.any_regions {
            return Some(Vec::new());
        }
        let all = self.regions.len();
        if types.len() > all || types.len() + self.optional < all {
            return None;
        }
        let mut env: Vec<(String, DType)> = Vec::new();
        for ((_, var), &t) in self.regions.iter().zip(types) {
            match env.iter().find(|(v, _)| v == var) {
                Some((_, bound)) if *bound != t => return None,
                Some(_) => {}
                None => env.push((var.clone(), t)),
            }
        }
        let get = |v: &str| env.iter().find(|(n, _)| n == v).map(|(_, t)| *t);
        // A variable of a region left out is unconstrained.
        let holds = self.clauses.iter().all(|c| match c {
            Clause::OneOf(vars, set) => {
                vars.iter().all(|v| get(v).is_none_or(|t| set.contains(&t)))
            }
            Clause::Same(a, b, eq) => get(a).zip(get(b)).is_some_and(|(x, y)| (x == y) == *eq),
        });
        holds.then_some(env)
    }

    /// A one-line summary for messages: `file:line (A, B, Y: A B Y float)`.
    pub fn describe(&self) -> String {
        let vars: Vec<&str> = self.regions.iter().map(|(_, v)| v.as_str()).collect();
        format!(
            "({}) where {} ({}:{})",
            vars.join(", "),
            self.constraints.join("; "),
            self.file,
            self.line
        )
    }

    /// The definition's text for `regions` regions (its `//@if regions >= N` ... `//@end`
    /// lines kept or dropped) with every variable replaced.
    fn text_for(
        &self,
        builtin: &str,
        name: &str,
        env: &[(String, DType)],
        regions: usize,
    ) -> String {
        let idx = self.builtins.iter().position(|b| b == builtin).unwrap_or(0);
        let mut kept = String::with_capacity(self.text.len());
        let mut on = true;
        for line in self.text.lines() {
            let t = line.trim_start();
            if let Some(n) = t.strip_prefix("//@if regions >=") {
                on = n.trim().parse::<usize>().is_ok_and(|n| regions >= n);
                continue;
            }
            if let Some(names) = t.strip_prefix("//@if ") {
                on = names.split_whitespace().any(|n| n == builtin);
                continue;
            }
            if t.starts_with("//@end") {
                on = true;
                continue;
            }
            if on {
                kept.push_str(line);
                kept.push('\n');
            }
        }
        let mut out = String::with_capacity(kept.len());
        let mut rest = kept.as_str();
        while let Some(p) = rest.find('$') {
            out.push_str(&rest[..p]);
            let tail = &rest[p + 1..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            let var = &tail[..end];
            if var == "NAME" {
                out.push_str(name);
            } else if let Some((_, t)) = var
                .strip_suffix("_MAX")
                .and_then(|v| env.iter().find(|(n, _)| n == v))
            {
                // The largest value of an integer type, as an i64 literal.
                let max: i64 = match t {
                    DType::U8 => u8::MAX.into(),
                    DType::I32 => i32::MAX.into(),
                    DType::U32 => u32::MAX.into(),
                    _ => i64::MAX,
                };
                out.push_str(&max.to_string());
            } else if let Some((_, t)) = env.iter().find(|(v, _)| v == var) {
                out.push_str(t.keyword());
            } else if let Some((_, vals)) = self.substs.iter().find(|(v, _)| v == var) {
                out.push_str(&vals[idx]);
            } else {
                out.push('$');
                out.push_str(var);
            }
            rest = &tail[end..];
        }
        out.push_str(rest);
        out
    }
}

/// The library's definition of `builtin`, instantiated for the module kernel `user` (its
/// name, its regions' element types, shapes and accesses, its scalar parameters: a prefix of
/// the built-in's).
pub fn instantiate(builtin: &str, user: &KernelDecl) -> Result<KernelDecl, LibraryError> {
    let fail = |message: String| LibraryError {
        kernel: user.name.name.clone(),
        builtin: builtin.to_string(),
        message,
    };
    let regions = regions_of(user);
    let types: Vec<DType> = regions.iter().map(|r| r.0).collect();
    let mut tried = Vec::new();
    for def in definitions_of(builtin) {
        tried.push(def.describe());
        let Some(env) = def.bind(&types) else {
            continue;
        };
        let text = def.text_for(builtin, &user.name.name, &env, types.len());
        let (text, renamed) = with_user_names(&text, user);
        let module = pto_wsp_ir::parse(&text).map_err(|e| {
            fail(format!(
                "the kernel library's definition at {}:{} does not parse: {e}",
                def.file, def.line
            ))
        })?;
        let mut k = module
            .kernels
            .into_iter()
            .next()
            .ok_or_else(|| fail("the definition declares no kernel".into()))?;
        if def.any_regions {
            // A body that touches no region: the module kernel's parameters as declared.
            let body = k.body.take();
            k.params = user.params.clone();
            k.body = body;
        } else {
            adopt_regions(&mut k, &regions).map_err(&fail)?;
        }
        scalar_defaults(&mut k, user, def, &renamed).map_err(&fail)?;
        if let Some(body) = k.body.as_mut() {
            peephole::simplify(body);
        }
        pto_wsp_ir::validate_kernel(&k).map_err(|errs| {
            let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            fail(format!(
                "the kernel library's definition at {}:{} is not valid at these types: {}",
                def.file,
                def.line,
                msgs.join("; ")
            ))
        })?;
        return Ok(k);
    }
    if tried.is_empty() {
        return Err(fail("the kernel library has no definition of it".into()));
    }
    let names: Vec<String> = types.iter().map(|t| t.keyword().to_string()).collect();
    Err(fail(format!(
        "no tile-instruction definition for its {} region(s) of element types ({}); the \
         kernel library defines it for {}",
        types.len(),
        names.join(", "),
        tried.join(", or ")
    )))
}

/// The definition's text with its parameters named as the module kernel names them (the
/// instance stands in for the module's kernel: tiers compare parameter names, and a parameter
/// must not shadow a module slot), position by position; names inside string literals are
/// renamed only between `{` and `}` (a check message's values). Unchanged if a new name is
/// already a word of the definition (it would clash with a local).
fn with_user_names(text: &str, user: &KernelDecl) -> (String, Vec<(String, String)>) {
    let unchanged = || (text.to_string(), Vec::new());
    let Ok(module) = pto_wsp_ir::parse(text) else {
        return unchanged();
    };
    let Some(k) = module.kernels.first() else {
        return unchanged();
    };
    let words: std::collections::HashSet<&str> = text
        .split(|c: char| !is_word(c))
        .filter(|w| !w.is_empty())
        .collect();
    let mut map = Vec::new();
    for (lib, mine) in k.params.iter().zip(&user.params) {
        let (from, to) = (lib.name.name.as_str(), mine.name.name.as_str());
        if from == to {
            continue;
        }
        if words.contains(to) {
            return unchanged();
        }
        map.push((from.to_string(), to.to_string()));
    }
    if map.is_empty() {
        return unchanged();
    }
    (rename_words(text, &map), map)
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `text` with each whole word `from` of `map` replaced by its `to`, except in `//` comments and
/// inside string literals outside `{` … `}`.
fn rename_words(text: &str, map: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_str, mut in_brace, mut in_comment) = (false, false, false);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String, rename: bool| {
        match map.iter().find(|(f, _)| *f == *word) {
            Some((_, to)) if rename => out.push_str(to),
            _ => out.push_str(word),
        }
        word.clear();
    };
    let mut prev = '\0';
    for c in text.chars() {
        if is_word(c) {
            word.push(c);
            prev = c;
            continue;
        }
        let rename = !in_comment && (!in_str || in_brace);
        flush(&mut word, &mut out, rename);
        match c {
            '\n' => in_comment = false,
            '/' if prev == '/' && !in_str => in_comment = true,
            '"' if !in_comment => in_str = !in_str,
            '{' if in_str => in_brace = true,
            '}' if in_str => in_brace = false,
            _ => {}
        }
        out.push(c);
        prev = c;
    }
    let rename = !in_comment && (!in_str || in_brace);
    flush(&mut word, &mut out, rename);
    out
}

/// Gives the instance the module kernel's region shapes and accesses, checking each access
/// against what the definition does with the region.
fn adopt_regions(
    k: &mut KernelDecl,
    regions: &[(DType, Access, &[Option<u64>])],
) -> Result<(), String> {
    let mut i = 0;
    for p in &mut k.params {
        if let ParamKind::Tile { access, shape, .. } = &mut p.kind {
            let (_, user, user_shape) = regions[i];
            let need = *access;
            let ok = match need {
                Access::In => user.reads(),
                Access::Out => user.writes(),
                Access::InOut => user == Access::InOut,
            };
            if !ok {
                let why = match need {
                    Access::In => "the kernel reads it",
                    Access::Out => "the kernel writes it",
                    Access::InOut => "the kernel reads and updates it: declare it `inout`",
                };
                return Err(format!(
                    "region {i} (`{}`) is declared `{user}`, but {why}",
                    p.name
                ));
            }
            *access = user;
            *shape = user_shape.to_vec();
            i += 1;
        }
    }
    Ok(())
}

/// Turns the scalar parameters past the module kernel's into locals holding their defaults.
/// `renamed`: the definition's parameters named otherwise in this instance (defaults name them).
fn scalar_defaults(
    k: &mut KernelDecl,
    user: &KernelDecl,
    def: &Definition,
    renamed: &[(String, String)],
) -> Result<(), String> {
    let given = user.scalar_types().len();
    let mut seen = 0;
    let mut locals = String::new();
    let mut keep = Vec::new();
    for p in std::mem::take(&mut k.params) {
        let ParamKind::Scalar(t) = p.kind else {
            keep.push(p);
            continue;
        };
        seen += 1;
        if seen <= given {
            keep.push(p);
            continue;
        }
        let Some((_, value)) = def.defaults.iter().find(|(n, _)| *n == p.name.name) else {
            return Err(format!(
                "scalar parameter `{}` is required (the module kernel declares {given})",
                p.name
            ));
        };
        let ty = if t.is_float() { "f32" } else { "i64" };
        let value = rename_words(value, renamed);
        locals.push_str(&format!("let {}: {ty} = {value};\n", p.name));
    }
    k.params = keep;
    if locals.is_empty() {
        return Ok(());
    }
    // The locals as statements of a one-kernel body, parsed.
    let text = format!("kernel k() {{\n{locals}}}\n");
    let parsed = pto_wsp_ir::parse(&text).map_err(|e| format!("a default does not parse: {e}"))?;
    let mut stmts = parsed.kernels[0].body.clone().unwrap_or_default();
    if let Some(body) = k.body.as_mut() {
        stmts.append(body);
        *body = stmts;
    }
    Ok(())
}
