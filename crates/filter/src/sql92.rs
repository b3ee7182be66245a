//! SQL92 message selectors (`MessageSelector.bySql(...)`): RocketMQ's grammar, compiled once and
//! evaluated against each stored message's properties on the broker.
//!
//! The grammar is RocketMQ's JMS-style selector: `OR`, `AND`, `NOT`; `=`, `<>`, `>`, `>=`, `<`,
//! `<=`; `[NOT] BETWEEN a AND b`; `[NOT] IN ('a', ...)`; `IS [NOT] NULL`; `[NOT] CONTAINS` /
//! `STARTSWITH` / `ENDSWITH 'text'`; string, integer and floating literals, `TRUE`, `FALSE`,
//! `NULL`; unary `+` and `-`; `--` and `/* */` comments; keywords in any case. A name is a message
//! property (`TAGS` is the tag); its value is always text.
//!
//! The rules follow RocketMQ's evaluator because a consumer moving from RocketMQ must get the
//! same messages: three-valued logic (a missing property makes a comparison unknown, and an
//! unknown selector does not match), text converted to the other side's number type for
//! comparisons (a failed conversion makes the whole selector fail for that message, which then
//! does not match), two texts compared by `<` as numbers, `NOT` binding tighter than comparisons,
//! and the same refusals at compile time (`a > 'x'`, `a = NULL`, `1` as a condition,
//! `BETWEEN 5 AND 1`, a floating literal that is not positive).

use std::cmp::Ordering;
use std::fmt;

/// The longest selector accepted, in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 8192;
/// The deepest expression tree accepted (nesting, and chains of `AND` / `OR` / comparisons):
/// evaluating and dropping a tree recurse this deep at most.
pub const MAX_TREE_HEIGHT: usize = 256;
/// The most prefix operators and parentheses open at once: the parser recurses through its
/// precedence levels for each, so this bounds its stack.
pub const MAX_NESTING: usize = 64;

/// A compiled selector.
#[derive(Debug)]
pub struct Sql92 {
    root: Expr,
}

/// Why a selector does not compile (CHECK_CLIENT_CONFIG and pulls answer
/// SUBSCRIPTION_PARSE_FAILED with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError(pub String);

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Sql92 {
    /// Compiles `text`.
    ///
    /// # Errors
    /// A lexical or grammar error, a refused construct, or a bound.
    pub fn compile(text: &str) -> Result<Sql92, CompileError> {
        if text.len() > MAX_EXPRESSION_BYTES {
            return Err(CompileError(format!(
                "the SQL92 expression is {} bytes; at most {MAX_EXPRESSION_BYTES}",
                text.len()
            )));
        }
        let tokens = lex(text)?;
        let mut p = Parser { tokens, at: 0, depth: 0 };
        let (root, height) = p.or_expr()?;
        if let Some(t) = p.tokens.get(p.at) {
            return Err(CompileError(format!("unexpected {} at position {}", t.kind, t.pos)));
        }
        let root = as_condition(root)?;
        assert!(height <= MAX_TREE_HEIGHT, "the parser bounds the tree's height");
        Ok(Sql92 { root })
    }

    /// Whether a message with these properties is selected: only a definite TRUE is.
    /// `lookup` gives a property's value by name.
    pub fn matches<'a>(&'a self, lookup: &dyn Fn(&str) -> Option<&'a str>) -> bool {
        matches!(eval(&self.root, lookup), Ok(Value::Bool(true)))
    }
}

// ---------------------------------------------------------------------------------------------
// Values and the tree

#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Null,
    Bool(bool),
    /// An integer literal that fits 32 bits (RocketMQ's `Integer`): text compared with it must
    /// parse as one.
    Int(i32),
    Long(i64),
    Double(f64),
    Text(&'a str),
}

/// A failed evaluation (a text that is not a number where one is needed): the message does not
/// match.
#[derive(Debug)]
struct EvalError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextOp {
    Contains,
    StartsWith,
    EndsWith,
}

#[derive(Debug)]
enum Constant {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Text(String),
}

#[derive(Debug)]
enum Expr {
    Const(Constant),
    Property(String),
    Negate(Box<Expr>),
    Not(Box<Expr>),
    /// A property used as a condition: TRUE only for a boolean value, which a text never is.
    BoolCast(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Compare(CmpOp, Box<Expr>, Box<Expr>),
    IsNull(Box<Expr>),
    In {
        property: String,
        list: Vec<String>,
        negated: bool,
    },
    Text {
        op: TextOp,
        negated: bool,
        operand: Box<Expr>,
        search: String,
    },
}

impl Expr {
    /// Whether RocketMQ treats it as a condition (its `BooleanExpression`s).
    fn is_condition(&self) -> bool {
        !matches!(
            self,
            Expr::Property(_)
                | Expr::Negate(_)
                | Expr::Const(Constant::Int(_) | Constant::Long(_) | Constant::Double(_) | Constant::Text(_))
        )
    }
}

/// A condition where one is needed: a property is cast, a number or text is refused.
fn as_condition(e: Expr) -> Result<Expr, CompileError> {
    match e {
        Expr::Property(_) => Ok(Expr::BoolCast(Box::new(e))),
        e if e.is_condition() => Ok(e),
        e => Err(CompileError(format!("expression will not result in a boolean value: {e:?}"))),
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

fn eval<'a>(e: &'a Expr, lookup: &dyn Fn(&str) -> Option<&'a str>) -> Result<Value<'a>, EvalError> {
    Ok(match e {
        Expr::Const(c) => match c {
            Constant::Null => Value::Null,
            Constant::Bool(b) => Value::Bool(*b),
            Constant::Int(i) => Value::Int(*i),
            Constant::Long(l) => Value::Long(*l),
            Constant::Double(d) => Value::Double(*d),
            Constant::Text(s) => Value::Text(s),
        },
        Expr::Property(name) => lookup(name).map_or(Value::Null, Value::Text),
        Expr::Negate(x) => match eval(x, lookup)? {
            Value::Int(i) => Value::Int(i.wrapping_neg()),
            Value::Long(l) => Value::Long(l.wrapping_neg()),
            Value::Double(d) => Value::Double(-d),
            _ => Value::Null,
        },
        Expr::Not(x) => match truth(eval(x, lookup)?)? {
            Some(b) => Value::Bool(!b),
            None => Value::Null,
        },
        Expr::BoolCast(x) => match eval(x, lookup)? {
            Value::Null => Value::Null,
            Value::Bool(b) => Value::Bool(b),
            _ => Value::Bool(false),
        },
        Expr::And(l, r) => logic(l, r, false, lookup)?,
        Expr::Or(l, r) => logic(l, r, true, lookup)?,
        Expr::Compare(op, l, r) => compare_values(*op, eval(l, lookup)?, eval(r, lookup)?)?,
        Expr::IsNull(x) => Value::Bool(matches!(eval(x, lookup)?, Value::Null)),
        Expr::In { property, list, negated } => match lookup(property) {
            None => Value::Null,
            Some(v) => Value::Bool(list.iter().any(|x| x == v) ^ negated),
        },
        Expr::Text {
            op,
            negated,
            operand,
            search,
        } => match eval(operand, lookup)? {
            Value::Text(v) if !search.is_empty() => {
                let found = match op {
                    TextOp::Contains => v.contains(search.as_str()),
                    TextOp::StartsWith => v.starts_with(search.as_str()),
                    TextOp::EndsWith => v.ends_with(search.as_str()),
                };
                Value::Bool(found ^ negated)
            }
            _ => Value::Bool(false),
        },
    })
}

/// A condition's value: `None` for unknown.
fn truth(v: Value<'_>) -> Result<Option<bool>, EvalError> {
    match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(b)),
        _ => Err(EvalError),
    }
}

/// `AND` (`or == false`) and `OR`, three-valued; the right side is skipped once the left decides.
fn logic<'a>(l: &'a Expr, r: &'a Expr, or: bool, lookup: &dyn Fn(&str) -> Option<&'a str>) -> Result<Value<'a>, EvalError> {
    let lv = truth(eval(l, lookup)?)?;
    if lv == Some(or) {
        return Ok(Value::Bool(or));
    }
    let rv = truth(eval(r, lookup)?)?;
    if rv == Some(or) {
        return Ok(Value::Bool(or));
    }
    Ok(if lv.is_none() || rv.is_none() {
        Value::Null
    } else {
        Value::Bool(!or)
    })
}

fn compare_values<'a>(op: CmpOp, lv: Value<'a>, rv: Value<'a>) -> Result<Value<'a>, EvalError> {
    if op == CmpOp::Eq {
        return Ok(match (lv, rv) {
            (Value::Null, Value::Null) => Value::Bool(true),
            (Value::Null, _) => Value::Null,
            (_, Value::Null) => Value::Bool(false),
            (l, r) => Value::Bool(same(l, r) || order(l, r)? == Ordering::Equal),
        });
    }
    if matches!(lv, Value::Null) || matches!(rv, Value::Null) {
        return Ok(Value::Null);
    }
    let ord = match (lv, rv) {
        // Two texts are compared as numbers; RocketMQ refuses to order text.
        (Value::Text(l), Value::Text(r)) => java_double(l)?.total_cmp(&java_double(r)?),
        (l, r) => order(l, r)?,
    };
    Ok(Value::Bool(match op {
        CmpOp::Gt => ord == Ordering::Greater,
        CmpOp::Ge => ord != Ordering::Less,
        CmpOp::Lt => ord == Ordering::Less,
        CmpOp::Le => ord != Ordering::Greater,
        CmpOp::Eq => unreachable!("handled above"),
    }))
}

/// Equal values of one type (Java's `equals`: a double's bits, so NaN equals NaN).
fn same(l: Value<'_>, r: Value<'_>) -> bool {
    match (l, r) {
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Int(a), Value::Int(b)) => a == b,
        (Value::Long(a), Value::Long(b)) => a == b,
        (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
        (Value::Text(a), Value::Text(b)) => a == b,
        _ => false,
    }
}

/// The order of two values, converting as RocketMQ does: the narrower number widens, a text
/// becomes the other side's number type (or a boolean), and mismatched kinds order "less".
fn order(l: Value<'_>, r: Value<'_>) -> Result<Ordering, EvalError> {
    Ok(match (l, r) {
        (Value::Bool(a), Value::Bool(b)) => a.cmp(&b),
        (Value::Int(a), Value::Int(b)) => a.cmp(&b),
        (Value::Long(a), Value::Long(b)) => a.cmp(&b),
        (Value::Double(a), Value::Double(b)) => a.total_cmp(&b),
        (Value::Text(a), Value::Text(b)) => a.cmp(b),
        (Value::Int(a), Value::Long(b)) => i64::from(a).cmp(&b),
        (Value::Long(a), Value::Int(b)) => a.cmp(&i64::from(b)),
        (Value::Int(a), Value::Double(b)) => f64::from(a).total_cmp(&b),
        (Value::Double(a), Value::Int(b)) => a.total_cmp(&f64::from(b)),
        #[expect(clippy::cast_precision_loss, reason = "Java widens long to double the same way")]
        (Value::Long(a), Value::Double(b)) => (a as f64).total_cmp(&b),
        #[expect(clippy::cast_precision_loss, reason = "Java widens long to double the same way")]
        (Value::Double(a), Value::Long(b)) => a.total_cmp(&(b as f64)),
        (Value::Int(a), Value::Text(b)) => a.cmp(&b.parse::<i32>().map_err(|_| EvalError)?),
        (Value::Long(a), Value::Text(b)) => a.cmp(&b.parse::<i64>().map_err(|_| EvalError)?),
        (Value::Double(a), Value::Text(b)) => a.total_cmp(&java_double(b)?),
        (Value::Text(a), Value::Int(b)) => a.parse::<i32>().map_err(|_| EvalError)?.cmp(&b),
        (Value::Text(a), Value::Long(b)) => a.parse::<i64>().map_err(|_| EvalError)?.cmp(&b),
        (Value::Text(a), Value::Double(b)) => java_double(a)?.total_cmp(&b),
        (Value::Text(a), Value::Bool(b)) => a.eq_ignore_ascii_case("true").cmp(&b),
        // RocketMQ fails here (a cast of the boolean to text).
        (Value::Bool(_), Value::Text(_)) => return Err(EvalError),
        _ => Ordering::Less,
    })
}

/// Java's `Double.valueOf` for the texts a property holds: surrounding blanks and a trailing
/// `d`/`f` allowed, `NaN` and `Infinity` spelled as Java spells them.
fn java_double(s: &str) -> Result<f64, EvalError> {
    let s = s.trim_matches(|c: char| c <= ' ');
    match s.strip_prefix(['+', '-']).unwrap_or(s) {
        "NaN" => return Ok(f64::NAN),
        "Infinity" if s.starts_with('-') => return Ok(f64::NEG_INFINITY),
        "Infinity" => return Ok(f64::INFINITY),
        _ => {}
    }
    let body = s.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(s);
    let digits = body.strip_prefix(['+', '-']).unwrap_or(body);
    // Rust would also take "inf" and "nan" in any case, which Java refuses.
    let plain = digits
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if digits.is_empty() || !plain {
        return Err(EvalError);
    }
    body.parse().map_err(|_| EvalError)
}

// ---------------------------------------------------------------------------------------------
// Lexing

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
    Contains,
    StartsWith,
    EndsWith,
    Decimal(String),
    Floating(String),
    Text(String),
    Name(String),
    Punct(&'static str),
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Decimal(s) | Kind::Floating(s) => write!(f, "number {s}"),
            Kind::Text(s) => write!(f, "string '{s}'"),
            Kind::Name(s) => write!(f, "name {s}"),
            Kind::Punct(p) => write!(f, "'{p}'"),
            k => write!(f, "{}", format!("{k:?}").to_uppercase()),
        }
    }
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    pos: usize,
}

const PUNCTS: [&str; 10] = ["<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+"];

fn keyword(word: &str) -> Option<Kind> {
    Some(match word.to_ascii_uppercase().as_str() {
        "NOT" => Kind::Not,
        "AND" => Kind::And,
        "OR" => Kind::Or,
        "BETWEEN" => Kind::Between,
        "IN" => Kind::In,
        "TRUE" => Kind::True,
        "FALSE" => Kind::False,
        "NULL" => Kind::Null,
        "IS" => Kind::Is,
        "CONTAINS" => Kind::Contains,
        "STARTSWITH" => Kind::StartsWith,
        "ENDSWITH" => Kind::EndsWith,
        _ => return None,
    })
}

fn lex(text: &str) -> Result<Vec<Token>, CompileError> {
    let b = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0c) {
            i += 1;
        } else if b[i..].starts_with(b"--") {
            // A line comment must end with a line break, as in RocketMQ's grammar.
            let end = b[i..].iter().position(|&x| x == b'\n' || x == b'\r');
            i += end.ok_or_else(|| CompileError(format!("unterminated comment at position {i}")))? + 1;
        } else if b[i..].starts_with(b"/*") {
            let end = text[i + 2..].find("*/");
            i += end.ok_or_else(|| CompileError(format!("unterminated comment at position {i}")))? + 4;
        } else if c == b'\'' {
            let (s, next) = lex_text(text, i)?;
            tokens.push(Token {
                kind: Kind::Text(s),
                pos: start,
            });
            i = next;
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let (kind, next) = lex_number(b, i);
            tokens.push(Token { kind, pos: start });
            i = next;
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$') {
                i += 1;
            }
            let word = &text[start..i];
            let kind = keyword(word).unwrap_or_else(|| Kind::Name(word.to_owned()));
            tokens.push(Token { kind, pos: start });
        } else if c == b'-' {
            tokens.push(Token {
                kind: Kind::Punct("-"),
                pos: start,
            });
            i += 1;
        } else if let Some(p) = PUNCTS.iter().find(|p| b[i..].starts_with(p.as_bytes())) {
            tokens.push(Token {
                kind: Kind::Punct(p),
                pos: start,
            });
            i += p.len();
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(CompileError(format!("unexpected character {ch:?} at position {i}")));
        }
    }
    Ok(tokens)
}

/// A quoted string from `b[start]` (a quote); `''` is a quote inside it.
fn lex_text(text: &str, start: usize) -> Result<(String, usize), CompileError> {
    let mut out = String::new();
    let mut rest = &text[start + 1..];
    let mut at = start + 1;
    loop {
        let q = rest
            .find('\'')
            .ok_or_else(|| CompileError(format!("unterminated string at position {start}")))?;
        out.push_str(&rest[..q]);
        if rest[q + 1..].starts_with('\'') {
            out.push('\'');
            rest = &rest[q + 2..];
            at += q + 2;
        } else {
            return Ok((out, at + q + 1));
        }
    }
}

/// The longest number at `i`: digits with an optional fraction and exponent (floating), or
/// digits with an optional `L` (decimal).
fn lex_number(b: &[u8], start: usize) -> (Kind, usize) {
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let int_end = digits(start);
    let mut end = int_end;
    let mut floating = false;
    if b.get(end) == Some(&b'.') {
        floating = true;
        end = digits(end + 1);
    }
    if matches!(b.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(end + 1), Some(b'+' | b'-')));
        let exp_end = digits(end + 1 + sign);
        if exp_end > end + 1 + sign {
            floating = true;
            end = exp_end;
        }
    }
    let text = String::from_utf8_lossy(&b[start..end]).into_owned();
    if floating {
        return (Kind::Floating(text), end);
    }
    // RocketMQ's decimal is `0` or a digit string not starting with 0, with an optional L.
    if b[start] == b'0' {
        return (Kind::Decimal("0".into()), start + 1);
    }
    if matches!(b.get(end), Some(b'l' | b'L')) {
        end += 1;
    }
    (Kind::Decimal(text), end)
}

// ---------------------------------------------------------------------------------------------
// Parsing (recursive descent, RocketMQ's precedence: OR < AND < equality < comparison < unary)

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    /// Prefix operators and parentheses open around the current token.
    depth: usize,
}

type Parsed = Result<(Expr, usize), CompileError>;

fn grow(height: usize) -> Result<usize, CompileError> {
    let h = height + 1;
    if h > MAX_TREE_HEIGHT {
        return Err(CompileError(format!(
            "the SQL92 expression nests deeper than {MAX_TREE_HEIGHT} levels"
        )));
    }
    Ok(h)
}

impl Parser {
    fn peek(&self) -> Option<&Kind> {
        self.tokens.get(self.at).map(|t| &t.kind)
    }

    fn peek2(&self) -> Option<&Kind> {
        self.tokens.get(self.at + 1).map(|t| &t.kind)
    }

    fn eat(&mut self, k: &Kind) -> bool {
        if self.peek() == Some(k) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn unexpected(&self, wanted: &str) -> CompileError {
        match self.tokens.get(self.at) {
            Some(t) => CompileError(format!("expected {wanted}, found {} at position {}", t.kind, t.pos)),
            None => CompileError(format!("expected {wanted}, found the end of the expression")),
        }
    }

    fn expect(&mut self, k: &Kind, wanted: &str) -> Result<(), CompileError> {
        if self.eat(k) { Ok(()) } else { Err(self.unexpected(wanted)) }
    }

    fn or_expr(&mut self) -> Parsed {
        let (mut left, mut h) = self.and_expr()?;
        while self.eat(&Kind::Or) {
            let (right, rh) = self.and_expr()?;
            h = grow(h.max(rh))?;
            left = Expr::Or(Box::new(as_condition(left)?), Box::new(as_condition(right)?));
        }
        Ok((left, h))
    }

    fn and_expr(&mut self) -> Parsed {
        let (mut left, mut h) = self.equality()?;
        while self.eat(&Kind::And) {
            let (right, rh) = self.equality()?;
            h = grow(h.max(rh))?;
            left = Expr::And(Box::new(as_condition(left)?), Box::new(as_condition(right)?));
        }
        Ok((left, h))
    }

    fn equality(&mut self) -> Parsed {
        let (mut left, mut h) = self.comparison()?;
        loop {
            let negated_eq = if self.eat(&Kind::Punct("=")) {
                false
            } else if self.eat(&Kind::Punct("<>")) {
                true
            } else if self.eat(&Kind::Is) {
                let not = self.eat(&Kind::Not);
                self.expect(&Kind::Null, "NULL")?;
                h = grow(h + usize::from(not))?;
                let is_null = Expr::IsNull(Box::new(left));
                left = if not { Expr::Not(Box::new(is_null)) } else { is_null };
                continue;
            } else {
                return Ok((left, h));
            };
            let (right, rh) = self.comparison()?;
            h = grow(h.max(rh) + usize::from(negated_eq))?;
            check_equal_operands(&left, &right)?;
            let eq = Expr::Compare(CmpOp::Eq, Box::new(left), Box::new(right));
            left = if negated_eq { Expr::Not(Box::new(eq)) } else { eq };
        }
    }

    fn comparison(&mut self) -> Parsed {
        let (mut left, mut h) = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Kind::Punct(">")) => Some(CmpOp::Gt),
                Some(Kind::Punct(">=")) => Some(CmpOp::Ge),
                Some(Kind::Punct("<")) => Some(CmpOp::Lt),
                Some(Kind::Punct("<=")) => Some(CmpOp::Le),
                _ => None,
            };
            if let Some(op) = op {
                self.at += 1;
                let (right, rh) = self.unary()?;
                h = grow(h.max(rh))?;
                left = ordered(op, left, right)?;
                continue;
            }
            let negated = self.peek() == Some(&Kind::Not)
                && matches!(
                    self.peek2(),
                    Some(Kind::Contains | Kind::StartsWith | Kind::EndsWith | Kind::Between | Kind::In)
                );
            if negated {
                self.at += 1;
            }
            let (next, nh) = match self.peek().cloned() {
                Some(Kind::Contains) => self.text_op(TextOp::Contains, negated, left)?,
                Some(Kind::StartsWith) => self.text_op(TextOp::StartsWith, negated, left)?,
                Some(Kind::EndsWith) => self.text_op(TextOp::EndsWith, negated, left)?,
                Some(Kind::Between) => self.between(negated, left, h)?,
                Some(Kind::In) => self.in_list(negated, left)?,
                _ => return Ok((left, h)),
            };
            left = next;
            h = grow(h.max(nh))?;
        }
    }

    fn text_op(&mut self, op: TextOp, negated: bool, left: Expr) -> Parsed {
        self.at += 1;
        let search = self.string_literal()?;
        Ok((
            Expr::Text {
                op,
                negated,
                operand: Box::new(left),
                search,
            },
            1,
        ))
    }

    fn between(&mut self, negated: bool, value: Expr, h: usize) -> Parsed {
        self.at += 1;
        let (low, lh) = self.unary()?;
        self.expect(&Kind::And, "AND")?;
        let (high, hh) = self.unary()?;
        if let (Expr::Const(lo), Expr::Const(hi)) = (&low, &high) {
            check_between_bounds(lo, hi)?;
        }
        // `value` is evaluated twice: the tree holds it twice, as RocketMQ's does.
        let twice = clone_operand(&value)?;
        let height = grow(h.max(lh).max(hh) + 1)?;
        let e = if negated {
            Expr::Or(
                Box::new(ordered(CmpOp::Lt, value, low)?),
                Box::new(ordered(CmpOp::Gt, twice, high)?),
            )
        } else {
            Expr::And(
                Box::new(ordered(CmpOp::Ge, value, low)?),
                Box::new(ordered(CmpOp::Le, twice, high)?),
            )
        };
        Ok((e, height))
    }

    fn in_list(&mut self, negated: bool, left: Expr) -> Parsed {
        self.at += 1;
        let Expr::Property(property) = left else {
            return Err(CompileError(format!("expected a property for IN, got {left:?}")));
        };
        self.expect(&Kind::Punct("("), "'('")?;
        let mut list = vec![self.string_literal()?];
        while self.eat(&Kind::Punct(",")) {
            list.push(self.string_literal()?);
        }
        self.expect(&Kind::Punct(")"), "')'")?;
        Ok((Expr::In { property, list, negated }, 1))
    }

    fn string_literal(&mut self) -> Result<String, CompileError> {
        match self.peek().cloned() {
            Some(Kind::Text(s)) => {
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.unexpected("a string literal")),
        }
    }

    /// Runs `f` one nesting level deeper (a prefix operator or parentheses): this bounds the
    /// parser's recursion.
    fn deeper(&mut self, f: impl FnOnce(&mut Parser) -> Parsed) -> Parsed {
        if self.depth >= MAX_NESTING {
            return Err(CompileError(format!(
                "the SQL92 expression opens more than {MAX_NESTING} parentheses or prefix operators at once"
            )));
        }
        self.depth += 1;
        let parsed = f(self);
        self.depth -= 1;
        parsed
    }

    fn unary(&mut self) -> Parsed {
        if self.eat(&Kind::Punct("+")) {
            return self.deeper(Parser::unary);
        }
        if self.eat(&Kind::Punct("-")) {
            let (e, h) = self.deeper(Parser::unary)?;
            return Ok((Expr::Negate(Box::new(e)), grow(h)?));
        }
        if self.eat(&Kind::Not) {
            let (e, h) = self.deeper(Parser::unary)?;
            return Ok((Expr::Not(Box::new(as_condition(e)?)), grow(h + 1)?));
        }
        self.primary()
    }

    fn primary(&mut self) -> Parsed {
        let Some(kind) = self.peek().cloned() else {
            return Err(self.unexpected("a value"));
        };
        let c = match kind {
            Kind::Text(s) => Constant::Text(s),
            Kind::Decimal(d) => decimal(&d)?,
            Kind::Floating(f) => floating(&f)?,
            Kind::True => Constant::Bool(true),
            Kind::False => Constant::Bool(false),
            Kind::Null => Constant::Null,
            Kind::Name(n) => {
                self.at += 1;
                return Ok((Expr::Property(n), 1));
            }
            Kind::Punct("(") => {
                self.at += 1;
                let inner = self.deeper(Parser::or_expr)?;
                self.expect(&Kind::Punct(")"), "')'")?;
                return Ok(inner);
            }
            _ => return Err(self.unexpected("a value")),
        };
        self.at += 1;
        Ok((Expr::Const(c), 1))
    }
}

fn decimal(text: &str) -> Result<Constant, CompileError> {
    let digits = text.strip_suffix(['l', 'L']).unwrap_or(text);
    let v: i64 = digits
        .parse()
        .map_err(|_| CompileError(format!("{text} is not a 64-bit integer")))?;
    Ok(i32::try_from(v).map_or(Constant::Long(v), Constant::Int))
}

fn floating(text: &str) -> Result<Constant, CompileError> {
    let v: f64 = text.parse().map_err(|_| CompileError(format!("{text} is not a number")))?;
    if v.is_infinite() {
        return Err(CompileError(format!("{text} is greater than {}", f64::MAX)));
    }
    // RocketMQ refuses any floating literal below Double.MIN_VALUE, the smallest positive double,
    // so 0.0 is refused too; negative values come from unary minus.
    if v < f64::from_bits(1) {
        return Err(CompileError(format!("{text} is less than {:e}", f64::from_bits(1))));
    }
    Ok(Constant::Double(v))
}

/// `<`, `<=`, `>`, `>=`: a constant operand must be a number, and a condition is refused.
fn ordered(op: CmpOp, left: Expr, right: Expr) -> Result<Expr, CompileError> {
    for e in [&left, &right] {
        let refused = match e {
            Expr::Const(c) => !matches!(c, Constant::Int(_) | Constant::Long(_) | Constant::Double(_)),
            other => other.is_condition(),
        };
        if refused {
            return Err(CompileError(format!("value {e:?} cannot be compared")));
        }
    }
    Ok(Expr::Compare(op, Box::new(left), Box::new(right)))
}

/// `=` and `<>`: `NULL` is refused (IS NULL is the way), and so is a boolean constant on the left
/// of a constant of another kind.
fn check_equal_operands(left: &Expr, right: &Expr) -> Result<(), CompileError> {
    for e in [left, right] {
        if matches!(e, Expr::Const(Constant::Null)) {
            return Err(CompileError("NULL cannot be compared; use IS NULL".into()));
        }
    }
    if let (Expr::Const(Constant::Bool(_)), Expr::Const(c)) = (left, right)
        && !matches!(c, Constant::Bool(_))
    {
        return Err(CompileError(format!("{left:?} cannot be compared with {right:?}")));
    }
    Ok(())
}

fn check_between_bounds(low: &Constant, high: &Constant) -> Result<(), CompileError> {
    let as_value = |c: &Constant| match c {
        Constant::Int(i) => Some(Value::Int(*i)),
        Constant::Long(l) => Some(Value::Long(*l)),
        Constant::Double(d) => Some(Value::Double(*d)),
        _ => None,
    };
    let (Some(lo), Some(hi)) = (as_value(low), as_value(high)) else {
        return Err(CompileError("illegal values of BETWEEN: both bounds must be numbers".into()));
    };
    if order(hi, lo).map_err(|_| CompileError("illegal values of BETWEEN".into()))? == Ordering::Less {
        return Err(CompileError(format!(
            "illegal values of BETWEEN: the low bound {low:?} is above the high bound {high:?}"
        )));
    }
    Ok(())
}

/// A copy of BETWEEN's tested value (a property or a constant; anything else is refused, which
/// RocketMQ's grammar allows but nobody writes).
fn clone_operand(e: &Expr) -> Result<Expr, CompileError> {
    Ok(match e {
        Expr::Property(p) => Expr::Property(p.clone()),
        Expr::Const(Constant::Int(i)) => Expr::Const(Constant::Int(*i)),
        Expr::Const(Constant::Long(l)) => Expr::Const(Constant::Long(*l)),
        Expr::Const(Constant::Double(d)) => Expr::Const(Constant::Double(*d)),
        Expr::Negate(x) => Expr::Negate(Box::new(clone_operand(x)?)),
        other => return Err(CompileError(format!("BETWEEN needs a property or a number, got {other:?}"))),
    })
}

#[cfg(test)]
mod tests;
