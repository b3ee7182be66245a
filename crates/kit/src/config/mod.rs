//! One configuration mechanism for every Petrel process: a key table declared once per file
//! (`broker.conf`, `controller.conf`, `namesrv.conf`) by [`config_table!`](crate::config_table),
//! giving the struct, its defaults, the parser, the rendering of each value and the table
//! docs/configuration.md shows; and one reader of Java properties files that keeps each key's
//! line, so that an error names the file and the line.
//!
//! A key is one of three things: in the table (parsed and checked; a bad value is an error), one
//! of RocketMQ's own keys for that file that Petrel has no use for (logged and ignored: real
//! RocketMQ files carry them), or neither — a typo, an error naming the key and its line.
//!
//! Owns: the properties syntax (escapes, continuations, comments, ISO-8859-1, by the
//! `java-properties` crate), the key-line-error vocabulary. Must never: accept a value it cannot
//! use, clamp one silently, or show a secret's value in an error.

mod value;

use std::fmt;
use std::path::{Path, PathBuf};

pub use value::{ConfigValue, MetricsExporter, OutOfRange, REDACTED, Secret, at_least, at_least_if_set, within};

/// Where a key was given: a file and its line, or a command-line `--set`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A line of a configuration file.
    Line {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
    },
    /// A `--set KEY=VALUE` on the command line.
    CommandLine,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Line { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::CommandLine => f.write_str("--set"),
        }
    }
}

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value its key cannot use (the value of a secret is never shown).
    #[error("{}{key}: {value:?} is not valid: {expected}", at.as_ref().map(|o| format!("{o}: ")).unwrap_or_default())]
    BadValue {
        /// The key, as the file spells it.
        key: String,
        /// The value given, or `******` for a secret.
        value: String,
        /// What the key accepts, or why the value failed its check.
        expected: String,
        /// Where the value was given; `None` until [`apply`] adds it.
        at: Option<Origin>,
    },
    /// A key neither Petrel nor RocketMQ reads in this file: a typo, most likely.
    #[error("{at}: unknown key {key:?} (not a {file} key of Petrel's or of RocketMQ's; see docs/configuration.md)")]
    Unknown {
        /// The unknown key.
        key: String,
        /// The file's name (`broker.conf`), whose keys it is not among.
        file: &'static str,
        /// Where it was given.
        at: Origin,
    },
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The file is not Java properties syntax.
    #[error("{path}{}: {source}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The line the parser stopped at, when it knows.
        line: Option<usize>,
        /// What the parser found wrong.
        #[source]
        source: java_properties::PropertiesError,
    },
    /// Keys that are valid alone but not together; the text names them.
    #[error("{0}")]
    Inconsistent(String),
}

impl ConfigError {
    /// A bad value of `key` (with no origin yet: [`apply`] adds it).
    #[must_use]
    pub fn bad(key: &str, value: &str, expected: impl Into<String>) -> ConfigError {
        ConfigError::BadValue {
            key: key.to_owned(),
            value: value.to_owned(),
            expected: expected.into(),
            at: None,
        }
    }

    fn at(self, origin: &Origin) -> ConfigError {
        match self {
            ConfigError::BadValue {
                key,
                value,
                expected,
                at: None,
            } => ConfigError::BadValue {
                key,
                value,
                expected,
                at: Some(origin.clone()),
            },
            other => other,
        }
    }
}

/// One key of a table, for the documentation and GET_BROKER_CONFIG-like answers.
pub struct KeySpec<S: 'static> {
    /// The key as the file spells it (RocketMQ's camelCase name).
    pub key: &'static str,
    /// The documentation table the key is listed in.
    pub section: S,
    /// What the key means, one Markdown line for the table.
    pub doc: &'static str,
    /// The default, as the file would spell it.
    pub default: fn() -> String,
}

/// A configuration file's table, as [`config_table!`](crate::config_table) declares it.
pub trait Table {
    /// The file's name, for errors (`broker.conf`).
    const FILE: &'static str;
    /// Sets one key; `Ok(false)` for a key the table does not have.
    ///
    /// # Errors
    /// A value the key cannot use, naming the key.
    fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError>;
    /// Whether RocketMQ reads `key` in this file although Petrel does not (it is then ignored
    /// with a warning rather than refused).
    fn known_to_rocketmq(key: &str) -> bool;
}

/// One `key=value` of a file, with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key, unescaped.
    pub key: String,
    /// The value, unescaped, with continuation lines joined.
    pub value: String,
    /// The line the entry starts on, from 1.
    pub line: usize,
}

/// Reads a Java properties file (ISO-8859-1, as Java reads it), keeping each key's line.
///
/// # Errors
/// The file cannot be read, or a line is not properties syntax.
pub fn read_file(path: &Path) -> Result<Vec<Entry>, ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    read_bytes(&bytes, path)
}

/// [`read_file`] on bytes already read; `origin` names them in errors.
///
/// # Errors
/// A line that is not properties syntax.
pub fn read_bytes(bytes: &[u8], origin: &Path) -> Result<Vec<Entry>, ConfigError> {
    let mut entries = Vec::new();
    for line in java_properties::PropertiesIter::new(bytes) {
        let line = line.map_err(|source| ConfigError::Syntax {
            path: origin.to_owned(),
            line: source.line_number(),
            source,
        })?;
        let number = line.line_number();
        if let java_properties::LineContent::KVPair(key, value) = line.consume_content() {
            entries.push(Entry { key, value, line: number });
        }
    }
    Ok(entries)
}

/// Applies `entries` read from `path`; returns the RocketMQ keys that were ignored.
///
/// # Errors
/// The first bad value or unknown key, with its file and line.
pub fn apply<T: Table>(table: &mut T, entries: &[Entry], path: &Path) -> Result<Vec<String>, ConfigError> {
    let mut ignored = Vec::new();
    for e in entries {
        let origin = Origin::Line {
            path: path.to_owned(),
            line: e.line,
        };
        if let Some(key) = apply_one(table, &e.key, &e.value, &origin)? {
            ignored.push(key);
        }
    }
    Ok(ignored)
}

/// Reads and applies a file; returns the RocketMQ keys that were ignored.
///
/// # Errors
/// As [`read_file`] and [`apply`].
pub fn apply_file<T: Table>(table: &mut T, path: &Path) -> Result<Vec<String>, ConfigError> {
    let entries = read_file(path)?;
    apply(table, &entries, path)
}

/// Applies a command line's `KEY=VALUE`; returns the key if it was a RocketMQ key ignored.
///
/// # Errors
/// No `=`, a bad value or an unknown key.
pub fn apply_set<T: Table>(table: &mut T, key_value: &str) -> Result<Option<String>, ConfigError> {
    let Some((key, value)) = key_value.split_once('=') else {
        return Err(ConfigError::bad(key_value, "", "KEY=VALUE"));
    };
    apply_one(table, key.trim(), value, &Origin::CommandLine)
}

fn apply_one<T: Table>(table: &mut T, key: &str, value: &str, origin: &Origin) -> Result<Option<String>, ConfigError> {
    if table.set(key, value).map_err(|e| e.at(origin))? {
        return Ok(None);
    }
    if T::known_to_rocketmq(key) {
        return Ok(Some(key.to_owned()));
    }
    Err(ConfigError::Unknown {
        key: key.to_owned(),
        file: T::FILE,
        at: origin.clone(),
    })
}

/// The Markdown table of one section's keys, as docs/configuration.md shows it.
#[must_use]
pub fn markdown_table<S: PartialEq>(keys: &[KeySpec<S>], section: &S) -> String {
    let mut out = String::from("| Key | Default | Meaning |\n|---|---|---|\n");
    for k in keys.iter().filter(|k| k.section == *section) {
        let default = (k.default)();
        let default = if default.is_empty() {
            "*(none)*".to_owned()
        } else {
            format!("`{default}`")
        };
        out.push_str(&format!("| `{}` | {default} | {} |\n", k.key, k.doc));
    }
    out
}

/// A documentation page without the markers a key table goes between.
#[derive(Debug, thiserror::Error)]
#[error("no <!-- keys:{0} --> … <!-- /keys --> block")]
pub struct MissingMarker(pub String);

/// Replaces each `<!-- keys:NAME -->`…`<!-- /keys -->` block of `doc` with its table.
///
/// # Errors
/// A block that is missing or not closed.
pub fn fill_doc_tables(doc: &str, tables: &[(&str, String)]) -> Result<String, MissingMarker> {
    let mut filled = doc.to_owned();
    for (name, table) in tables {
        let open = format!("<!-- keys:{name} -->\n");
        let close = "<!-- /keys -->";
        let missing = || MissingMarker((*name).to_owned());
        let start = filled.find(&open).ok_or_else(missing)? + open.len();
        let end = start + filled[start..].find(close).ok_or_else(missing)?;
        filled.replace_range(start..end, table);
    }
    Ok(filled)
}

/// Declares a configuration table: the struct, its defaults, [`KeySpec`]s in documentation
/// order, and `set_from_table` / `get`. Each key: `"fileKey" => field: Type = default, check f;
/// "doc"` (the check is optional and returns `Result<(), impl Display>`).
#[macro_export]
macro_rules! config_table {
    (
        $(#[$meta:meta])*
        pub struct $name:ident, sections $section_ty:ident, keys $keys:ident {
            $( $section:ident { $( $key:literal => $field:ident : $ty:ty = $default:expr $(, check $check:expr)? ; $doc:literal )* } )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        pub struct $name {
            $($( #[doc = $doc] pub $field: $ty, )*)*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $($( $field: $default, )*)* }
            }
        }

        /// Every key, in documentation order.
        pub const $keys: &[$crate::config::KeySpec<$section_ty>] = &[
            $($( $crate::config::KeySpec {
                key: $key,
                section: $section_ty::$section,
                doc: $doc,
                default: || { let v: $ty = $default; $crate::config::ConfigValue::render(&v) },
            }, )*)*
        ];

        impl $name {
            /// Sets one key of the table; `Ok(false)` for a key it does not have.
            ///
            /// # Errors
            /// A value that does not parse or fails its key's check, naming the key.
            pub fn set_from_table(&mut self, key: &str, raw: &str) -> Result<bool, $crate::config::ConfigError> {
                match key {
                    $($( $key => {
                        // A secret is taken as written (a properties file keeps trailing spaces, and a
                        // secret of spaces is refused, not taken for unset); its text never reaches
                        // an error message (which is logged).
                        let secret = <$ty as $crate::config::ConfigValue>::SECRET;
                        let raw = if secret { raw } else { raw.trim() };
                        let shown = if secret { $crate::config::REDACTED } else { raw };
                        let v: $ty = $crate::config::ConfigValue::parse(raw)
                            .ok_or_else(|| $crate::config::ConfigError::bad(key, shown, <$ty as $crate::config::ConfigValue>::EXPECTED))?;
                        $( ($check)(&v).map_err(|why| $crate::config::ConfigError::bad(key, shown, why.to_string()))?; )?
                        self.$field = v;
                    } )*)*
                    _ => return Ok(false),
                }
                Ok(true)
            }

            /// The value of `key` as the file would spell it (a secret as `******`).
            #[must_use]
            pub fn get(&self, key: &str) -> Option<String> {
                match key {
                    $($( $key => Some($crate::config::ConfigValue::render(&self.$field)), )*)*
                    _ => None,
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Part {
        Only,
    }

    crate::config_table! {
        /// A table for the tests.
        pub struct Demo, sections Part, keys DEMO_KEYS {
            Only {
                "port" => port: u16 = 9876, check at_least(1u16);
                    "A port."
                "password" => password: Option<Secret> = None;
                    "A secret."
            }
        }
    }

    impl Table for Demo {
        const FILE: &'static str = "demo.conf";
        fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
            self.set_from_table(key, value)
        }
        fn known_to_rocketmq(key: &str) -> bool {
            key == "rocketmqOnly"
        }
    }

    fn apply_text(text: &str) -> (Demo, Result<Vec<String>, ConfigError>) {
        let mut d = Demo::default();
        let path = Path::new("demo.conf");
        let result = read_bytes(text.as_bytes(), path).and_then(|entries| apply(&mut d, &entries, path));
        (d, result)
    }

    #[test]
    fn a_typo_is_an_error_naming_its_line_and_a_rocketmq_key_is_ignored() {
        let (d, ignored) = apply_text("# comment\nport = 10\nrocketmqOnly=1\n");
        assert_eq!(ignored.expect("valid"), ["rocketmqOnly"]);
        assert_eq!(d.port, 10);
        let (_, e) = apply_text("port=10\n\nprot=11\n");
        let e = e.expect_err("a typo");
        assert!(
            matches!(&e, ConfigError::Unknown { key, at: Origin::Line { line: 3, .. }, .. } if key == "prot"),
            "{e}"
        );
        assert!(e.to_string().starts_with("demo.conf:3: unknown key \"prot\""), "{e}");
    }

    #[test]
    fn a_bad_value_names_key_line_and_hides_a_secret() {
        let (_, e) = apply_text("port=0\n");
        let text = e.expect_err("below the edge").to_string();
        assert_eq!(text, "demo.conf:1: port: \"0\" is not valid: must be at least 1");
        let (_, e) = apply_text("port=1\\\n 2x\n");
        assert!(
            e.expect_err("a continued bad value")
                .to_string()
                .starts_with("demo.conf:1: port: \"12x\"")
        );
        let mut d = Demo::default();
        assert!(apply_set(&mut d, "password=hunter2 ").expect("a secret").is_none());
        assert_eq!(d.password.as_ref().map(Secret::expose), Some("hunter2 "), "a secret as written");
        assert_eq!(d.get("password").as_deref(), Some(REDACTED));
        let e = apply_set(&mut d, "port=-1").expect_err("negative").to_string();
        assert!(e.starts_with("--set: port"), "{e}");
        assert!(apply_set(&mut d, "nope").is_err(), "no =");
    }

    #[test]
    fn the_doc_table_comes_from_the_keys() {
        let table = markdown_table(DEMO_KEYS, &Part::Only);
        assert_eq!(
            table,
            "| Key | Default | Meaning |\n|---|---|---|\n| `port` | `9876` | A port. |\n| `password` | *(none)* | A secret. |\n"
        );
        let doc = "a\n<!-- keys:demo -->\nold\n<!-- /keys -->\nb";
        let filled = fill_doc_tables(doc, &[("demo", "new\n".to_owned())]).expect("markers");
        assert_eq!(filled, "a\n<!-- keys:demo -->\nnew\n<!-- /keys -->\nb");
        assert!(fill_doc_tables(doc, &[("other", String::new())]).is_err());
    }
}
