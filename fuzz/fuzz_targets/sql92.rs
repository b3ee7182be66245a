//! The SQL92 selector compiler and evaluator: any text either compiles or is refused (never a
//! panic or a stack overflow), and a compiled selector evaluates on any properties.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petrel_filter::Sql92;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The first line, if any, holds properties for the evaluation: `name=value;name=value`.
    let (props, expression) = text.split_once('\n').unwrap_or(("a=1;b=x;TAGS=A", text));
    let Ok(sql) = Sql92::compile(expression) else {
        return;
    };
    let pairs: Vec<(&str, &str)> = props.split(';').filter_map(|p| p.split_once('=')).collect();
    let lookup = |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let first = sql.matches(&lookup);
    assert_eq!(first, sql.matches(&lookup), "evaluation is deterministic");
});
