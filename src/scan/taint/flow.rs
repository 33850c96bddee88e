//! The intraprocedural taint analysis: one pass over a file's statements in source order,
//! keeping which variables hold request data. Flow-insensitive inside a statement and
//! blind to branches (a variable assigned in one branch is tainted after the `if`), which
//! errs towards reporting: an upload that pipes request data into `eval` is rare enough
//! in legitimate code that a false positive costs less than a missed shell.

use std::collections::HashMap;

use super::lexer::{Interp, Kind, Token};

/// Sink classes a sanitiser can clear.
pub const CODE: u8 = 1;
pub const COMMAND: u8 = 2;
pub const INCLUDE: u8 = 4;

/// Tainted variables kept at most per file (further assignments are ignored).
pub const MAX_TAINTED_VARS: usize = 4096;
/// Flows reported at most per file.
pub const MAX_FLOWS: usize = 16;
/// Token visits allowed per file; the analysis stops (and says so) past it.
pub const WORK_BUDGET: u64 = 20_000_000;

/// Request data reaching a sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// What the data came from (`$_GET`, `php://input`...).
    pub source: String,
    pub source_line: u32,
    /// The sink (`eval`, `system`, `include`, `backticks`, `variable function`...).
    pub sink: String,
    pub sink_line: u32,
}

/// Taint of a value: where it came from and the sink classes sanitisers cleared it for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Taint {
    source: String,
    line: u32,
    cleared: u8,
}

impl Taint {
    /// The taint of a value made of two tainted parts: the earliest source, cleared only
    /// where both are.
    fn join(self, other: Taint) -> Taint {
        let cleared = self.cleared & other.cleared;
        let mut first = if other.line < self.line { other } else { self };
        first.cleared = cleared;
        first
    }
}

fn join(a: Option<Taint>, b: Option<Taint>) -> Option<Taint> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.join(b)),
        (a, b) => a.or(b),
    }
}

/// The result of analysing one file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Analysis {
    pub flows: Vec<Flow>,
    /// The work budget ran out before the end of the file.
    pub budget_exhausted: bool,
}

/// Functions whose result carries no request-controlled string: their arguments never
/// taint what they return.
const CLEANING: [&str; 27] = [
    "intval",
    "floatval",
    "boolval",
    "is_numeric",
    "isset",
    "empty",
    "count",
    "strlen",
    "md5",
    "sha1",
    "crc32",
    "hash",
    "abs",
    "in_array",
    "array_key_exists",
    "is_string",
    "is_array",
    "is_int",
    "ctype_digit",
    "ctype_alnum",
    "ctype_alpha",
    "preg_match",
    "preg_quote",
    "strcmp",
    "hash_equals",
    "password_verify",
    "is_file",
];
const COMMAND_SINKS: [&str; 7] = [
    "system",
    "exec",
    "passthru",
    "shell_exec",
    "popen",
    "proc_open",
    "pcntl_exec",
];
const CODE_SINKS: [&str; 3] = ["eval", "assert", "create_function"];
const INCLUDE_SINKS: [&str; 4] = ["include", "include_once", "require", "require_once"];
const REQUEST_ARRAYS: [&str; 4] = ["_GET", "_POST", "_REQUEST", "_COOKIE"];

/// The source a variable reference is, if any: the request arrays, and `$_SERVER` under an
/// `HTTP_*` key (request headers; the rest of `$_SERVER` is the server's).
fn source_of(name: &str, key: Option<&str>) -> Option<String> {
    if REQUEST_ARRAYS.contains(&name) {
        return Some(format!("${name}"));
    }
    if name == "_SERVER" && key.is_some_and(|k| k.starts_with("HTTP_")) {
        return Some(format!("$_SERVER['{}']", key.unwrap_or_default()));
    }
    None
}

struct Analyzer<'a> {
    toks: &'a [Token],
    /// For each `(`, `[` or `{`, the index of its closing token (or the end).
    close: Vec<usize>,
    tainted: HashMap<String, Taint>,
    out: Analysis,
    work: u64,
}

/// Analyses a token stream.
pub fn analyze(toks: &[Token]) -> Analysis {
    let mut a = Analyzer {
        toks,
        close: matching(toks),
        tainted: HashMap::new(),
        out: Analysis::default(),
        work: 0,
    };
    a.run();
    a.out
}

fn is_op(t: Option<&Token>, op: &str) -> bool {
    matches!(t, Some(Token { kind: Kind::Op(o), .. }) if *o == op)
}

fn is_open(k: &Kind) -> bool {
    matches!(k, Kind::Op("(" | "[" | "{"))
}

fn is_close(k: &Kind) -> bool {
    matches!(k, Kind::Op(")" | "]" | "}"))
}

/// The closing index of every opening bracket, by a stack (unbalanced ones close at the end).
fn matching(toks: &[Token]) -> Vec<usize> {
    let mut close = vec![toks.len(); toks.len()];
    let mut stack = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if is_open(&t.kind) {
            stack.push(i);
        } else if is_close(&t.kind) {
            if let Some(o) = stack.pop() {
                close[o] = i;
            }
        }
    }
    close
}

impl Analyzer<'_> {
    fn spend(&mut self, n: usize) -> bool {
        self.work = self.work.saturating_add(n as u64);
        if self.work > WORK_BUDGET {
            self.out.budget_exhausted = true;
            return false;
        }
        true
    }

    fn run(&mut self) {
        let mut start = 0;
        let mut depth = 0usize;
        for i in 0..self.toks.len() {
            let k = &self.toks[i].kind;
            let ends = match k {
                Kind::Op(";") | Kind::CloseTag => depth == 0,
                Kind::Op("{") | Kind::Op("}") if depth == 0 => true,
                Kind::Op("(") | Kind::Op("[") => {
                    depth += 1;
                    false
                }
                Kind::Op(")") | Kind::Op("]") => {
                    depth = depth.saturating_sub(1);
                    false
                }
                _ => false,
            };
            if ends {
                if !self.statement(start, i) {
                    return;
                }
                start = i + 1;
            }
        }
        self.statement(start, self.toks.len());
    }

    /// One statement `toks[s..e]`: its sinks (with the taint before it), then its
    /// assignments and guards. False when the analysis must stop.
    fn statement(&mut self, s: usize, e: usize) -> bool {
        if s >= e {
            return true;
        }
        if !self.spend(e - s) {
            return false;
        }
        self.sinks(s, e);
        self.assignments(s, e);
        self.guards(s, e);
        self.out.flows.len() < MAX_FLOWS && !self.out.budget_exhausted
    }

    fn ident(&self, i: usize) -> Option<&str> {
        match self.toks.get(i).map(|t| &t.kind) {
            Some(Kind::Ident(n)) => Some(n),
            _ => None,
        }
    }

    /// A call of a function (not a method, not a declaration) named at `i`: `name (`.
    fn is_call(&self, i: usize) -> bool {
        if !is_op(self.toks.get(i + 1), "(") {
            return false;
        }
        let before = i.checked_sub(1).map(|b| &self.toks[b].kind);
        !matches!(before, Some(Kind::Op("->" | "?->" | "::")))
            && !matches!(before, Some(Kind::Ident(w)) if w == "function" || w == "fn" || w == "new")
    }

    /// End of the statement's expression that starts at `from` inside `toks[..e]`:
    /// the first `,` or closing bracket at its own depth.
    fn expr_end(&self, from: usize, e: usize) -> usize {
        let mut i = from;
        while i < e {
            let k = &self.toks[i].kind;
            if is_open(k) {
                i = self.close[i].saturating_add(1);
                continue;
            }
            if is_close(k) || matches!(k, Kind::Op(",")) {
                return i;
            }
            i += 1;
        }
        e.min(self.toks.len())
    }

    fn report(&mut self, t: Taint, sink: &str, line: u32) {
        if self.out.flows.len() >= MAX_FLOWS {
            return;
        }
        let flow = Flow {
            source: t.source,
            source_line: t.line,
            sink: sink.to_string(),
            sink_line: line,
        };
        if !self.out.flows.contains(&flow) {
            self.out.flows.push(flow);
        }
    }

    fn sink_if(&mut self, taint: Option<Taint>, class: u8, sink: &str, line: u32) {
        if let Some(t) = taint {
            if t.cleared & class == 0 {
                self.report(t, sink, line);
            }
        }
    }

    fn sinks(&mut self, s: usize, e: usize) {
        let mut i = s;
        while i < e {
            let line = self.toks[i].line;
            match &self.toks[i].kind {
                Kind::Backtick { vars } => {
                    let t = self.interp_taint(vars, line);
                    self.sink_if(t, COMMAND, "backticks", line);
                }
                Kind::Ident(name) => {
                    let name = name.clone();
                    let n = name.as_str();
                    if INCLUDE_SINKS.contains(&n) {
                        let end = self.expr_end(i + 1, e);
                        let t = self.taint(i + 1, end);
                        self.sink_if(t, INCLUDE, n, line);
                    } else if self.is_call(i) {
                        let open = i + 1;
                        let close = self.close[open].min(e);
                        if CODE_SINKS.contains(&n) {
                            let t = self.taint(open + 1, close);
                            self.sink_if(t, CODE, n, line);
                        } else if COMMAND_SINKS.contains(&n) {
                            let t = self.taint(open + 1, close);
                            self.sink_if(t, COMMAND, n, line);
                        } else if n == "preg_replace" && self.eval_modifier(open + 1) {
                            let first_end = self.expr_end(open + 1, close);
                            let t = self.taint(first_end, close);
                            self.sink_if(t, CODE, "preg_replace /e", line);
                        }
                    }
                }
                Kind::Var(_) => {
                    // `$f(...)` and `$_GET['f'](...)`: a variable function whose name is tainted.
                    let mut j = i + 1;
                    while is_op(self.toks.get(j), "[") || is_op(self.toks.get(j), "{") {
                        j = self.close[j].saturating_add(1);
                    }
                    let method =
                        i > 0 && matches!(self.toks[i - 1].kind, Kind::Op("->" | "?->" | "::"));
                    if j < e && !method && is_op(self.toks.get(j), "(") {
                        let t = self.taint(i, j);
                        self.sink_if(t, CODE, "variable function", line);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// The first argument of `preg_replace` at `i` is a literal pattern with the `e` modifier.
    fn eval_modifier(&self, i: usize) -> bool {
        let Some(Kind::Str { body, .. }) = self.toks.get(i).map(|t| &t.kind) else {
            return false;
        };
        let Some(delim) = body.trim_start().chars().next() else {
            return false;
        };
        let closing = match delim {
            '(' => ')',
            '{' => '}',
            '[' => ']',
            '<' => '>',
            c => c,
        };
        body.rfind(closing)
            .is_some_and(|at| at > 0 && body[at + closing.len_utf8()..].contains('e'))
    }

    /// Assignments `$v = expr`, `$v[...] = expr`, `$v .= expr` anywhere in the statement,
    /// and `foreach (expr as $k => $v)`.
    fn assignments(&mut self, s: usize, e: usize) {
        let mut i = s;
        while i < e {
            if let Kind::Var(name) = &self.toks[i].kind {
                let name = name.clone();
                let mut j = i + 1;
                let mut element = false;
                while is_op(self.toks.get(j), "[") {
                    element = true;
                    j = self.close[j].saturating_add(1);
                }
                let op = match self.toks.get(j).map(|t| &t.kind) {
                    Some(Kind::Op(op @ ("=" | ".=" | "??="))) => *op,
                    _ => {
                        i += 1;
                        continue;
                    }
                };
                let end = self.expr_end(j + 1, e);
                let t = self.taint(j + 1, end);
                match t {
                    Some(t) => self.set(name, t, op != "=" || element),
                    // A plain overwrite with a clean value cleans the variable.
                    None if op == "=" && !element => {
                        self.tainted.remove(&name);
                    }
                    None => {}
                }
            }
            if self.ident(i) == Some("foreach") && is_op(self.toks.get(i + 1), "(") {
                let close = self.close[i + 1].min(e);
                if let Some(as_at) = (i + 2..close).find(|&k| self.ident(k) == Some("as")) {
                    if let Some(t) = self.taint(i + 2, as_at) {
                        for k in as_at + 1..close {
                            if let Kind::Var(v) = &self.toks[k].kind {
                                let v = v.clone();
                                self.set(v, t.clone(), false);
                            }
                        }
                    }
                }
            }
            i += 1;
        }
    }

    fn set(&mut self, name: String, t: Taint, merge: bool) {
        if self.tainted.len() >= MAX_TAINTED_VARS && !self.tainted.contains_key(&name) {
            return;
        }
        let t = match (merge, self.tainted.remove(&name)) {
            (true, Some(old)) => old.join(t),
            _ => t,
        };
        self.tainted.insert(name, t);
    }

    /// `in_array($v, $allowed...)` anywhere (as an `if` condition or a guard that exits)
    /// checks `$v` against an allowlist: it is clean from here on.
    fn guards(&mut self, s: usize, e: usize) {
        for i in s..e {
            if self.ident(i) == Some("in_array") && is_op(self.toks.get(i + 1), "(") {
                if let Some(Kind::Var(v)) = self.toks.get(i + 2).map(|t| &t.kind) {
                    if is_op(self.toks.get(i + 3), ",") {
                        let v = v.clone();
                        self.tainted.remove(&v);
                    }
                }
            }
        }
    }

    fn interp_taint(&self, vars: &[Interp], line: u32) -> Option<Taint> {
        let mut out = None;
        for v in vars {
            let t = match source_of(&v.name, v.key.as_deref()) {
                Some(source) => Some(Taint {
                    source,
                    line,
                    cleared: 0,
                }),
                None => self.tainted.get(&v.name).cloned(),
            };
            out = join(out, t);
        }
        out
    }

    /// The taint of the expression `toks[s..e]`.
    fn taint(&mut self, s: usize, e: usize) -> Option<Taint> {
        let e = e.min(self.toks.len());
        if s >= e || !self.spend(e - s) {
            return None;
        }
        let mut out = None;
        let mut i = s;
        while i < e {
            let line = self.toks[i].line;
            match &self.toks[i].kind {
                Kind::ScalarCast => {
                    i = self.skip_operand(i + 1, e);
                    continue;
                }
                Kind::Ident(n) if self.is_call(i) => {
                    let close = self.close[i + 1].min(e);
                    let cleared = match n.as_str() {
                        n if CLEANING.contains(&n) || n.starts_with("ctype_") => {
                            i = close + 1;
                            continue;
                        }
                        "escapeshellarg" | "escapeshellcmd" => COMMAND,
                        "basename" => INCLUDE,
                        _ => 0,
                    };
                    if cleared != 0 {
                        let t = self.taint(i + 2, close).map(|mut t| {
                            t.cleared |= cleared;
                            t
                        });
                        out = join(out, t);
                        i = close + 1;
                        continue;
                    }
                }
                Kind::Var(name) => {
                    let key = match (self.toks.get(i + 1), self.toks.get(i + 2)) {
                        (
                            Some(Token {
                                kind: Kind::Op("["),
                                ..
                            }),
                            Some(Token {
                                kind: Kind::Str { body, .. },
                                ..
                            }),
                        ) => Some(body.as_str()),
                        _ => None,
                    };
                    let t = match source_of(name, key) {
                        Some(source) => Some(Taint {
                            source,
                            line,
                            cleared: 0,
                        }),
                        None => self.tainted.get(name).cloned(),
                    };
                    out = join(out, t);
                }
                Kind::Str { body, vars } => {
                    if body.trim().eq_ignore_ascii_case("php://input") {
                        out = join(
                            out,
                            Some(Taint {
                                source: "php://input".into(),
                                line,
                                cleared: 0,
                            }),
                        );
                    }
                    let t = self.interp_taint(vars, line);
                    out = join(out, t);
                }
                _ => {}
            }
            i += 1;
        }
        out
    }

    /// Past the operand of a cast at `i`: a variable with its subscripts and properties,
    /// a bracketed group, a call, or one token.
    fn skip_operand(&self, i: usize, e: usize) -> usize {
        let mut j = i;
        match self.toks.get(j).map(|t| &t.kind) {
            Some(k) if is_open(k) => return self.close[j].saturating_add(1),
            Some(Kind::Ident(_)) if is_op(self.toks.get(j + 1), "(") => {
                return self.close[j + 1].saturating_add(1)
            }
            Some(_) => j += 1,
            None => return e,
        }
        loop {
            match self.toks.get(j).map(|t| &t.kind) {
                Some(Kind::Op("[" | "{")) if j < e => j = self.close[j].saturating_add(1),
                Some(Kind::Op("->" | "?->" | "::")) if j + 1 < e => j += 2,
                _ => return j,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lexer::tokenize;
    use super::*;

    fn flows(src: &str) -> Vec<(String, u32, String, u32)> {
        analyze(&tokenize(src.as_bytes()).tokens)
            .flows
            .into_iter()
            .map(|f| (f.source, f.source_line, f.sink, f.sink_line))
            .collect()
    }

    fn one(src: &str) -> (String, u32, String, u32) {
        let f = flows(src);
        assert_eq!(f.len(), 1, "{src}: {f:?}");
        f.into_iter().next().unwrap_or_default()
    }

    #[test]
    fn assignments_concatenation_and_decoders_carry_taint() {
        assert_eq!(
            one("<?php\n$a = $_POST['x'];\n$b = 'x' . base64_decode(str_rot13($a));\n$c = $b;\neval($c);"),
            ("$_POST".into(), 2, "eval".into(), 5)
        );
        assert_eq!(
            one("<?php $c = \"ls {$_GET['d']}\";\n`$c`;"),
            ("$_GET".into(), 1, "backticks".into(), 2)
        );
        assert_eq!(
            one("<?php\n$f = $_REQUEST['f'];\n$f($_REQUEST['a']);"),
            ("$_REQUEST".into(), 2, "variable function".into(), 3)
        );
        assert_eq!(
            one("<?php $d = file_get_contents('php://input');\nsystem(gzinflate($d));"),
            ("php://input".into(), 1, "system".into(), 2)
        );
        assert_eq!(
            one("<?php include $_SERVER['HTTP_X_INC'] . '.php';"),
            ("$_SERVER['HTTP_X_INC']".into(), 1, "include".into(), 1)
        );
        assert_eq!(
            one("<?php preg_replace('/.*/e', $_COOKIE['c'], 'x');"),
            ("$_COOKIE".into(), 1, "preg_replace /e".into(), 1)
        );
        assert_eq!(
            one("<?php foreach ($_POST as $k => $v) { assert($v); }"),
            ("$_POST".into(), 1, "assert".into(), 1)
        );
    }

    #[test]
    fn sanitisers_and_guards_break_the_flow() {
        assert!(flows("<?php $p = (int) $_GET['p']; include \"page$p.php\";").is_empty());
        assert!(flows("<?php system('ping ' . escapeshellarg($_GET['h']));").is_empty());
        // escapeshellarg clears commands only.
        assert_eq!(flows("<?php eval(escapeshellarg($_GET['h']));").len(), 1);
        assert!(flows("<?php include 'pages/' . basename($_GET['p']) . '.php';").is_empty());
        assert!(flows(
            "<?php $p = $_GET['p']; if (in_array($p, ['a', 'b'], true)) { include $p; }"
        )
        .is_empty());
        assert!(flows("<?php $p = $_GET['p']; $p = 'home'; include $p;").is_empty());
        assert!(flows("<?php $db->exec($_GET['q']); $o::system($_GET['q']);").is_empty());
        assert!(flows("<?php echo htmlspecialchars($_GET['q']); $s = $_SERVER['REMOTE_ADDR']; system(\"log $s\");").is_empty());
        assert!(flows("<?php preg_replace('/a/i', $_GET['r'], 'x');").is_empty());
    }

    #[test]
    fn the_budget_stops_the_analysis() {
        let src = format!(
            "<?php eval({}$_GET[1]{});",
            "(".repeat(50_000),
            ")".repeat(50_000)
        );
        let toks = tokenize(src.as_bytes()).tokens;
        let a = analyze(&toks);
        assert!(a.flows.len() <= 1);
        let many = format!("<?php {}", "$a = $a . $a . $a . $a;".repeat(40_000));
        let a = analyze(&tokenize(many.as_bytes()).tokens);
        assert!(a.flows.is_empty());
    }
}
