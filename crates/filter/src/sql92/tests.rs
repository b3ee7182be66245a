use super::*;

/// Whether `sql` selects a message with `props` (name=value pairs).
fn sel(sql: &str, props: &[(&str, &str)]) -> bool {
    let s = Sql92::compile(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let owned: Vec<(String, String)> = props.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let lookup = |name: &str| owned.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    s.matches(&lookup)
}

fn refused(sql: &str) -> String {
    match Sql92::compile(sql) {
        Ok(s) => panic!("{sql} compiled: {s:?}"),
        Err(e) => e.0,
    }
}

#[test]
fn comparisons_convert_text_to_the_other_sides_number() {
    let a7 = [("a", "7")];
    assert!(sel("a > 5", &a7));
    assert!(sel("a >= 7 AND a <= 7", &a7));
    assert!(!sel("a < 7", &a7));
    assert!(sel("a = 7", &a7));
    assert!(sel("a <> 8", &a7));
    assert!(sel("a > 6.5", &a7));
    assert!(sel("5 < a", &a7));
    assert!(sel("a > -3", &a7));
    // Text that is not a number of the constant's type fails the whole selector.
    assert!(!sel("a > 5", &[("a", "seven")]));
    assert!(!sel("NOT (a > 5)", &[("a", "seven")]));
    assert!(!sel("a = 5", &[("a", "5.0")]));
    assert!(sel("a = 5.0", &[("a", "5")]));
    assert!(!sel("a = 5", &[("a", "3000000000")]), "an int literal parses the text as 32 bits");
    assert!(sel("a = 3000000000", &[("a", "3000000000")]));
    // Two properties are compared as numbers by < and as text by =.
    assert!(sel("a < b", &[("a", "10"), ("b", "9.5e1")]));
    assert!(!sel("a = b", &[("a", "10"), ("b", "10.0")]));
    assert!(sel("a = b", &[("a", "x"), ("b", "x")]));
    assert!(!sel("a < b", &[("a", "x"), ("b", "y")]));
}

#[test]
fn missing_properties_make_comparisons_unknown_and_unknown_does_not_match() {
    assert!(!sel("a > 5", &[]));
    assert!(!sel("NOT (a > 5)", &[]));
    assert!(!sel("a <> 5", &[]));
    assert!(sel("a > 5 OR b = 'x'", &[("b", "x")]));
    assert!(!sel("a > 5 AND b = 'x'", &[("b", "x")]));
    assert!(sel("a IS NULL", &[]));
    assert!(!sel("a IS NULL", &[("a", "")]));
    assert!(sel("a IS NOT NULL AND b IS NULL", &[("a", "1")]));
    assert!(!sel("a IN ('x')", &[]));
    assert!(!sel("a NOT IN ('x')", &[]));
    assert!(!sel("a NOT CONTAINS 'x'", &[]), "RocketMQ answers FALSE, not unknown");
}

#[test]
fn strings_in_between_and_text_operators() {
    let tag = [("TAGS", "TagA"), ("region", "eu-west")];
    assert!(sel("TAGS IN ('TagA', 'TagB')", &tag));
    assert!(sel("TAGS NOT IN ('TagC')", &tag));
    assert!(sel("TAGS = 'TagA'", &tag));
    assert!(sel(
        "region STARTSWITH 'eu-' AND region ENDSWITH 'west' AND region CONTAINS '-w'",
        &tag
    ));
    assert!(sel(
        "region NOT STARTSWITH 'us' AND region NOT ENDSWITH 'east' AND region NOT CONTAINS 'x'",
        &tag
    ));
    assert!(!sel("region CONTAINS ''", &tag), "an empty search never matches");
    assert!(sel("a BETWEEN 1 AND 10", &[("a", "10")]));
    assert!(!sel("a BETWEEN 1 AND 10", &[("a", "11")]));
    assert!(sel("a NOT BETWEEN 1 AND 10", &[("a", "0")]));
    assert!(sel("a BETWEEN -2.5 AND 2.0", &[("a", "-1.5")]));
    // An integer bound reads the text as an integer, so a fraction fails there, as in RocketMQ.
    assert!(!sel("a BETWEEN -2.5 AND 2", &[("a", "-1.5")]));
    assert!(sel("s = 'it''s'", &[("s", "it's")]));
    assert!(sel("'abc' CONTAINS 'b'", &[]));
}

#[test]
fn logic_is_three_valued_and_keywords_ignore_case() {
    assert!(sel("TRUE", &[]));
    assert!(!sel("FALSE OR NULL", &[]));
    assert!(!sel("NOT NULL", &[]));
    assert!(sel("NOT FALSE and true", &[]));
    assert!(sel("a = 1 or (b = 2 AND c is null)", &[("b", "2")]));
    assert!(sel("x > 1 -- a comment\n AND /* another */ x < 3", &[("x", "2")]));
    assert!(sel("$x_1 = 'v'", &[("$x_1", "v")]));
    // A property as a condition: text is never TRUE.
    assert!(!sel("flag", &[("flag", "true")]));
    assert!(sel("NOT flag", &[("flag", "true")]));
    // Text compared with a boolean is parsed as one.
    assert!(sel("flag = TRUE", &[("flag", "True")]));
    assert!(sel("flag = FALSE", &[("flag", "yes")]));
    // NOT binds tighter than a comparison, as in RocketMQ: (NOT a) = 1 is never TRUE.
    assert!(!sel("NOT a = 1", &[("a", "2")]));
}

#[test]
fn refused_as_rocketmq_refuses() {
    for sql in [
        "a > 'x'",
        "a = NULL",
        "NULL = a",
        "TRUE = 1",
        "1",
        "'x'",
        "a BETWEEN 5 AND 1",
        "a BETWEEN 'a' AND 'b'",
        "a > 0.0",
        "a > 1e400",
        "(a = 1) > 2",
        "'x' IN ('x')",
        "a IN ()",
        "a IN (1)",
        "a = ",
        "a = 1 AND",
        "a == 1",
        "a != 1",
        "a = 'x",
        "a = 1 -- no line break",
        "a = 1 /* open",
        "a = 007",
        "a = 9223372036854775808",
        "a # 1",
        "",
        "(a = 1",
        "a = 1)",
    ] {
        refused(sql);
    }
}

#[test]
fn literals_are_typed_as_rocketmq_types_them() {
    assert!(sel("a = 5L", &[("a", "5")]));
    assert!(sel("a = 9223372036854775807", &[("a", "9223372036854775807")]));
    assert!(sel("a = -9223372036854775807", &[("a", "-9223372036854775807")]));
    assert!(sel("a > .5 AND a < 5. AND a > 5E-1", &[("a", "1")]));
    assert!(sel("a = +3", &[("a", "3")]));
    assert!(sel("a = - - 3", &[("a", "3")]));
}

#[test]
fn bounds_on_size_and_nesting() {
    let long = format!("a = '{}'", "x".repeat(MAX_EXPRESSION_BYTES));
    assert!(refused(&long).contains("bytes"));
    let deep = format!("{}a = 1{}", "(".repeat(MAX_NESTING + 1), ")".repeat(MAX_NESTING + 1));
    assert!(refused(&deep).contains("parentheses"));
    let ok = format!("{}a = 1{}", "(".repeat(MAX_NESTING - 1), ")".repeat(MAX_NESTING - 1));
    assert!(sel(&ok, &[("a", "1")]));
    let nots = format!("{}TRUE", "NOT ".repeat(MAX_NESTING + 1));
    refused(&nots);
    let chain = vec!["a = 1"; MAX_TREE_HEIGHT + 1].join(" OR ");
    assert!(refused(&chain).contains("deeper"));
    let fits = vec!["a = 1"; MAX_TREE_HEIGHT / 4].join(" OR ");
    assert!(sel(&fits, &[("a", "1")]));
}

#[test]
fn java_double_parsing() {
    assert_eq!(java_double(" 1.5 ").ok(), Some(1.5));
    assert_eq!(java_double("2d").ok(), Some(2.0));
    assert_eq!(java_double("-Infinity").ok(), Some(f64::NEG_INFINITY));
    assert!(java_double("NaN").is_ok_and(f64::is_nan));
    assert!(java_double("inf").is_err());
    assert!(java_double("nan").is_err());
    assert!(java_double("").is_err());
    assert!(java_double("1,5").is_err());
}
