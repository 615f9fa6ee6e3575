//! The recorded series the checks' alerts are written over, and their
//! expansion back into self-contained PromQL.
//!
//! In the rules file (`bench rules`) every quantity a check compares is a
//! recording rule named `fencepost:<check>:<term>` (the Prometheus
//! `level:metric:operations` convention), and each alert is a short condition
//! over those names. A live query (`bench triggers --prometheus`) cannot
//! count on the rules being loaded, so it asks the same condition with every
//! recorded name replaced by its rule's expression in parentheses
//! ([`expand`]). Replacing a name by its parenthesised definition never
//! changes what an expression means, so the alert and the live query agree by
//! construction, as long as the rules are evaluated in one group with the
//! recording rules first (each alert then reads the series recorded at the
//! same evaluation time).

/// The prefix of every recorded name (`fencepost:`).
pub const PREFIX: &str = "fencepost:";

/// `fencepost:<check>:<term>`: the name of check `check`'s recorded `term`.
pub fn recorded(check: &str, term: &str) -> String {
    format!("{PREFIX}{check}:{term}")
}

/// `named` with every recorded name in `rules` (name, PromQL) replaced by
/// `(its PromQL)`, itself expanded (a rule may be written over earlier
/// ones). Text inside double-quoted strings is left alone; a name not in
/// `rules` is left as it is.
pub fn expand(named: &str, rules: &[(String, String)]) -> String {
    let mut out = String::with_capacity(named.len() * 4);
    let mut rest = named;
    let mut in_string = false;
    while let Some(c) = rest.chars().next() {
        if in_string {
            let n = if c == '\\' {
                c.len_utf8() + rest[1..].chars().next().map_or(0, char::len_utf8)
            } else {
                c.len_utf8()
            };
            if c == '"' {
                in_string = false;
            }
            out.push_str(&rest[..n]);
            rest = &rest[n..];
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        let starts_name = rest.starts_with(PREFIX)
            && !out
                .chars()
                .next_back()
                .is_some_and(|p| p.is_ascii_alphanumeric() || p == '_' || p == ':');
        if starts_name {
            let len = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_' || ch == ':'))
                .unwrap_or(rest.len());
            let name = &rest[..len];
            if let Some((_, expr)) = rules.iter().find(|(n, _)| n == name) {
                out.push('(');
                out.push_str(&expand(expr, rules));
                out.push(')');
                rest = &rest[len..];
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Vec<(String, String)> {
        vec![
            (recorded("t", "n"), "sum(increase(x_count[1h]))".to_owned()),
            (recorded("t", "limit"), "0.01 * fencepost:t:n".to_owned()),
        ]
    }

    #[test]
    fn names_become_their_parenthesised_rules_recursively() {
        assert_eq!(
            expand(
                "fencepost:t:n >= 1000 and on() fencepost:t:limit < 3",
                &rules()
            ),
            "(sum(increase(x_count[1h]))) >= 1000 and on() \
             (0.01 * (sum(increase(x_count[1h])))) < 3"
        );
    }

    #[test]
    fn unknown_names_longer_names_and_strings_are_left_alone() {
        let r = rules();
        assert_eq!(expand("fencepost:t:nn + 1", &r), "fencepost:t:nn + 1");
        assert_eq!(
            expand("x{job=\"fencepost:t:n\"}", &r),
            "x{job=\"fencepost:t:n\"}"
        );
        assert_eq!(expand("afencepost:t:n", &r), "afencepost:t:n");
    }
}
