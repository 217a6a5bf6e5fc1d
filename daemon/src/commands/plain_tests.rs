use super::*;

const R: &str = "${GEMINID_ARGS}";

fn commands(line: &str) -> Vec<(String, String)> {
    let p = lex(line, R).unwrap_or_else(|e| panic!("{line:?} is plain: {e}"));
    p.commands.into_iter().map(|c| (c.text, c.named)).collect()
}

fn why(line: &str) -> String {
    match lex(line, R) {
        Ok(p) => panic!("{line:?} is not plain, yet lexed as {p:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn plain_lines_split_into_commands() {
    let c = |a: &[(&str, &str)]| -> Vec<(String, String)> {
        a.iter().map(|(x, y)| ((*x).to_owned(), (*y).to_owned())).collect()
    };
    assert_eq!(commands("echo A"), c(&[("echo A", "echo A")]));
    assert_eq!(
        commands("echo A && touch x || b | c; d\ne"),
        c(&[
            ("echo A", "echo A"),
            ("touch x", "touch x"),
            ("b", "b"),
            ("c", "c"),
            ("d", "d"),
            ("e", "e")
        ])
    );
    assert_eq!(
        commands("echo 'a && b; $(c) `d` # e' \"f; g\""),
        c(&[("echo 'a && b; $(c) `d` # e' \"f; g\"", "echo 'a && b; $(c) `d` # e' \"f; g\"")])
    );
    // The first word unquoted: what bash runs, as a prefix must match it.
    assert_eq!(
        commands("echo\"\"/../evil.sh x"),
        c(&[("echo\"\"/../evil.sh x", "echo/../evil.sh x")])
    );
    assert_eq!(commands("'ech'o hi"), c(&[("'ech'o hi", "echo hi")]));
    // geminid's own reference to the arguments, as expand writes it in each quoting.
    assert_eq!(
        commands("echo \"${GEMINID_ARGS}\" ''\"${GEMINID_ARGS}\"'' \"a ${GEMINID_ARGS}\"").len(),
        1
    );
    assert_eq!(commands("echo a;"), c(&[("echo a", "echo a")]));
    assert_eq!(commands("echo a &&\n echo b").len(), 2);
    assert_eq!(commands("ls *.rs ~/x a=b é"), c(&[("ls *.rs ~/x a=b é", "ls *.rs ~/x a=b é")]));
    for redirected in
        ["echo A > x", "echo A >> x 2>&1", "echo A &> x", "echo A >| x", "cat < x", "echo 2>&-"]
    {
        let p = lex(redirected, R).unwrap_or_else(|e| panic!("{redirected}: {e}"));
        assert!(p.redirection, "{redirected}");
        assert_eq!(p.commands.len(), 1, "{redirected}");
    }
    assert!(!lex("echo A", R).is_ok_and(|p| p.redirection));
}

#[test]
fn anything_bash_could_read_as_code_is_not_plain() {
    for (line, what) in [
        ("echo $(touch x)", "command substitution"),
        ("echo $(( $(touch x) ))", "arithmetic `$((`"),
        ("echo $[ a[$(touch x)] ]", "arithmetic `$[`"),
        ("echo ${a[x]}", "parameter expansion"),
        ("echo ${GEMINID_ARGS@P}", "parameter expansion"),
        ("echo \"${GEMINID_ARGS@P}\"", "parameter expansion"),
        ("echo $HOME", "variable"),
        ("echo \"$HOME\"", "variable"),
        ("echo $'\\n'", "`$'…'`"),
        ("echo `touch x`", "backtick"),
        ("echo \"`touch x`\"", "backtick"),
        ("echo \\ #; touch x", "backslash"),
        ("echo a\\\n#; touch x", "backslash"),
        ("echo \"a\\\"\"", "backslash"),
        ("echo a #; touch x", "comment"),
        ("echo <<E\n$(touch x)\nE", "here-document"),
        ("echo <<< x", "here-document"),
        ("echo >(touch x)", "process substitution"),
        ("diff <(ls) x", "process substitution"),
        ("(touch x)", "parenthesis"),
        ("echo A; {touch,x}", "brace"),
        ("echo A & touch x", "background"),
        ("echo A |& touch x", "`|&`"),
        ("case x in x) touch y;; esac", "parenthesis"),
        ("PS4=x bash", "assignment"),
        ("A='$(x)' cmd", "assignment"),
        ("echo A\r; touch x", "carriage return"),
        ("echo A\0; touch x", "NUL"),
        ("echo 'A\u{7}'", "control character"),
        ("echo 'open", "unclosed quote"),
        ("echo \"open", "unclosed quote"),
        ("echo a &&", "ends with an operator"),
        ("echo a; ; b", "no command before it"),
        ("&& b", "no command before it"),
        ("echo a >", "no target"),
        ("> x", "no command"),
        ("echo\"${GEMINID_ARGS}\"", "arguments in a command's name"),
        ("let \"${GEMINID_ARGS}\"", "evaluates the arguments"),
        ("echo a && [[ \"${GEMINID_ARGS}\" -eq 1 ]]", "evaluates the arguments"),
        ("declare -i x=\"${GEMINID_ARGS}\"", "evaluates the arguments"),
    ] {
        let got = why(line);
        assert!(got.contains(what), "{line:?}: {got}");
    }
    assert_eq!(why("echo `x`"), "a backtick substitution at character 6");
}
