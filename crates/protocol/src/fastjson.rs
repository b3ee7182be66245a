//! The JSON dialect of RocketMQ's Java side (fastjson): reading it and writing its quirks.
//!
//! Owns: a lenient parser that accepts what fastjson writes (unquoted integer map keys, objects
//! as map keys) and a compact writer that can reproduce those quirks. Must never: recurse without
//! bound, index past the input, or let an object key hold another object key (each level would
//! escape the one inside again, doubling it); depth is capped at [`MAX_DEPTH`].

use serde_json::{Map, Number, Value};

use crate::command::push_json_string;
use crate::error::BodyError;

/// Deepest nesting accepted; RocketMQ bodies nest a handful of levels.
pub const MAX_DEPTH: usize = 64;

/// Parses standard JSON, or fastjson's output: an object key may be a bare number (`{0:"a"}`)
/// or an object (`{{"topic":"T",...}:{...}}`). Non-string keys become strings: a number as its
/// text, an object as its compact JSON, so `MessageQueue` keys can be parsed back from the key.
pub fn parse_lenient(input: &[u8]) -> Result<Value, BodyError> {
    // Standard JSON is the common case; only fall back when it fails.
    if let Ok(v) = serde_json::from_slice(input) {
        return Ok(v);
    }
    let mut p = Parser {
        s: input,
        pos: 0,
        in_key: false,
    };
    let v = p.value(0)?;
    p.ws();
    if p.pos != input.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(v)
}

/// Parses a body into `T` through [`parse_lenient`].
pub fn from_slice_lenient<T: serde::de::DeserializeOwned>(input: &[u8]) -> Result<T, BodyError> {
    if let Ok(v) = serde_json::from_slice(input) {
        return Ok(v);
    }
    serde_json::from_value(parse_lenient(input)?).map_err(|e| BodyError::Shape(e.to_string()))
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    /// Inside an object used as a key (fastjson's `Map<MessageQueue, _>`): its serialized text
    /// becomes the key, so a second level would be escaped again, doubling at each level.
    in_key: bool,
}

impl Parser<'_> {
    fn err(&self, reason: &'static str) -> BodyError {
        BodyError::Syntax { offset: self.pos, reason }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.s.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.pos).copied()
    }

    fn expect(&mut self, b: u8, reason: &'static str) -> Result<(), BodyError> {
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(reason))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, BodyError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("unexpected character")),
            None => Err(self.err("unexpected end of input")),
        }
    }

    fn literal(&mut self, word: &'static str, v: Value) -> Result<Value, BodyError> {
        if self.s[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn number_text(&mut self) -> &str {
        let start = self.pos;
        while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') = self.s.get(self.pos) {
            self.pos += 1;
        }
        std::str::from_utf8(&self.s[start..self.pos]).expect("ASCII digits")
    }

    fn number(&mut self) -> Result<Value, BodyError> {
        let text = self.number_text().to_owned();
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        if let Ok(u) = text.parse::<u64>() {
            return Ok(Value::Number(u.into()));
        }
        text.parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| self.err("invalid number"))
    }

    fn string(&mut self) -> Result<String, BodyError> {
        self.expect(b'"', "expected a string")?;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.s.get(self.pos) else {
                return Err(self.err("unterminated string"));
            };
            self.pos += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else {
                        return Err(self.err("unterminated escape"));
                    };
                    self.pos += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(self.err("invalid escape")),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                other => out.push(other),
            }
        }
        String::from_utf8(out).map_err(|_| self.err("string is not UTF-8"))
    }

    fn hex4(&mut self) -> Result<u32, BodyError> {
        let digits = self.s.get(self.pos..self.pos + 4).ok_or_else(|| self.err("short \\u escape"))?;
        let text = std::str::from_utf8(digits).map_err(|_| self.err("bad \\u escape"))?;
        let v = u32::from_str_radix(text, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.pos += 4;
        Ok(v)
    }

    fn unicode_escape(&mut self) -> Result<char, BodyError> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) && self.s[self.pos..].starts_with(b"\\u") {
            self.pos += 2;
            let lo = self.hex4()?;
            if (0xDC00..0xE000).contains(&lo) {
                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                return char::from_u32(c).ok_or_else(|| self.err("bad surrogate pair"));
            }
            return Err(self.err("bad surrogate pair"));
        }
        Ok(char::from_u32(hi).unwrap_or('\u{FFFD}'))
    }

    fn key(&mut self, depth: usize) -> Result<String, BodyError> {
        match self.peek() {
            Some(b'"') => self.string(),
            Some(b'{') if self.in_key => Err(self.err("an object key inside an object key")),
            Some(b'{') => {
                self.in_key = true;
                let v = self.object(depth + 1);
                self.in_key = false;
                Ok(serde_json::to_string(&v?).expect("a Value always serializes"))
            }
            Some(b'-' | b'0'..=b'9') => Ok(self.number_text().to_owned()),
            _ => Err(self.err("expected an object key")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, BodyError> {
        // Reached from `key` as well as from `value`: an object used as a key (`{{{{…`) nests
        // without passing through `value`'s check.
        if depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        self.expect(b'{', "expected '{'")?;
        let mut map = Map::new();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(map));
        }
        loop {
            let k = self.key(depth)?;
            self.expect(b':', "expected ':'")?;
            let v = self.value(depth + 1)?;
            map.insert(k, v);
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, BodyError> {
        self.expect(b'[', "expected '['")?;
        let mut items = Vec::new();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }
}

/// Writes `v` compactly. Keys of objects found under a key for which `unquote_keys_under`
/// returns true are written bare when they are integers — fastjson's form for `Map<Long, _>`
/// (e.g. `brokerAddrs`), which both official clients read.
pub fn write_compact(v: &Value, unquote_keys_under: &dyn Fn(&str) -> bool) -> String {
    let mut out = String::new();
    write_value(&mut out, v, false, unquote_keys_under);
    out
}

fn write_value(out: &mut String, v: &Value, bare_int_keys: bool, rule: &dyn Fn(&str) -> bool) {
    match v {
        Value::Object(map) => {
            out.push('{');
            for (i, (k, child)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if bare_int_keys && k.parse::<i64>().is_ok() {
                    out.push_str(k);
                } else {
                    push_json_string(out, k);
                }
                out.push(':');
                write_value(out, child, rule(k), rule);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, false, rule);
            }
            out.push(']');
        }
        Value::String(s) => push_json_string(out, s),
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fastjson_quirks_parse() {
        let v = parse_lenient(br#"{"brokerAddrs":{0:"127.0.0.1:10911",1:"b"}}"#).unwrap();
        assert_eq!(v["brokerAddrs"]["0"], "127.0.0.1:10911");
        let v =
            parse_lenient(br#"{"offsetTable":{{"brokerName":"a","queueId":0,"topic":"T"}:{"maxOffset":10}},"topicPutTps":0.0}"#).unwrap();
        let (k, val) = v["offsetTable"].as_object().unwrap().iter().next().unwrap();
        assert_eq!(k, r#"{"brokerName":"a","queueId":0,"topic":"T"}"#);
        assert_eq!(val["maxOffset"], 10);
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for bad in [
            &b"{"[..],
            b"{0",
            b"{\"a\":}",
            b"[1,",
            b"\"\\u12",
            b"{{}:1",
            b"nul",
            b"\"\\ud800\\u0041\"",
        ] {
            assert!(parse_lenient(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        let deep = "[".repeat(MAX_DEPTH + 10);
        assert!(parse_lenient(deep.as_bytes()).is_err());
        // Objects as keys nested without passing through a value: once a stack overflow (found by
        // scripts/fuzz.sh).
        assert!(parse_lenient("{".repeat(100_000).as_bytes()).is_err());
        let deep_values = format!("{}1{}", "{1:".repeat(MAX_DEPTH + 2), "}".repeat(MAX_DEPTH + 2));
        let e = parse_lenient(deep_values.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("nesting too deep"), "{e}");
        // One level of object keys is what RocketMQ writes; a key inside a key would be escaped
        // again at every level (a body of a few hundred bytes growing to gigabytes).
        assert!(parse_lenient(br#"{{"a":{"b":[1]}}:3}"#).is_ok());
        for nested in [&br#"{{{1:2}:3}:4}"#[..], br#"{{"a":{{"b":1}:2}}:3}"#, br#"{{"a":[{{}:1}]}:3}"#] {
            let e = parse_lenient(nested).unwrap_err();
            assert!(e.to_string().contains("inside an object key"), "{e}");
        }
    }

    #[test]
    fn writer_unquotes_only_where_asked() {
        let v = parse_lenient(br#"{"brokerAddrs":{"0":"x"},"topics":{"1":"y"}}"#).unwrap();
        assert_eq!(
            write_compact(&v, &|k| k == "brokerAddrs"),
            r#"{"brokerAddrs":{0:"x"},"topics":{"1":"y"}}"#
        );
        assert_eq!(write_compact(&v, &|_| false), r#"{"brokerAddrs":{"0":"x"},"topics":{"1":"y"}}"#);
    }
}
