use serde_json::json;

use super::*;

#[test]
fn hmac_sha256_gives_rfc_4231s_answers() {
    // RFC 4231 test cases 1, 2 and 6 (a key longer than the block).
    let cases: [(&[u8], &[u8], &str); 3] = [
        (
            &[0x0b; 20],
            b"Hi There",
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
        ),
        (
            b"Jefe",
            b"what do ya want for nothing?",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
        ),
        (
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
        ),
    ];
    for (key, data, want) in cases {
        assert_eq!(hex(&hmac_sha256(key, data)), want);
    }
}

#[test]
fn stable_stringify_writes_what_json_stable_stringify_writes() {
    for (v, want) in [
        (json!({"b": 1, "a": [3, {"d": null, "c": "x"}]}), r#"{"a":[3,{"c":"x","d":null}],"b":1}"#),
        (json!({"é": "ü", "Z": true, "a": 1.5}), r#"{"Z":true,"a":1.5,"é":"ü"}"#),
        (json!("quote\"and\\n"), r#""quote\"and\\n""#),
        (json!([]), "[]"),
        (json!({}), "{}"),
    ] {
        assert_eq!(stable_stringify(&v), want);
    }
}

/// Figures computed with Python's `hmac` and `json.dumps(sort_keys=True)` for the key
/// `"ab" * 32`, as Node computes them with the key as text.
#[test]
fn records_and_the_store_signature_match_gemini_clis_computation() {
    let dir = tempfile::tempdir().unwrap();
    let store = ReferenceStore::new(dir.path(), Secret::new("ab".repeat(32)));
    let meta =
        json!({"type": "git", "source": "https://github.com/a/b", "ref": "v1", "autoUpdate": true});
    let r = store.record_for(&meta);
    assert_eq!(r.hash, "d8efa0d5bba9dcee0084116e50d63b3f90d3f858f2507bbe56bbc4e5bfcecc68");
    assert_eq!(r.signature, "464a4a8e49e9a6fe947057f90a0bd530cd3faa63eb11e438bef83534b8e61301");
    store.record("ext-b", &meta).unwrap();
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(STORE_FILE)).unwrap())
            .unwrap();
    assert_eq!(
        file["signature"],
        "4da4a4cb0a9305886c8ad4fc3b1749f5a5b6aca2a4c51aebb53528553826e48c"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(STORE_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn verification_finds_missing_changed_and_tampered_records() {
    let dir = tempfile::tempdir().unwrap();
    let store = ReferenceStore::new(dir.path(), Secret::new("k".repeat(64)));
    let meta = json!({"type": "local", "source": "/src/ext"});
    assert_eq!(store.verify("ext", Some(&meta)), Status::Missing, "no store yet");
    store.record("ext", &meta).unwrap();
    assert_eq!(store.verify("ext", Some(&meta)), Status::Verified);
    assert_eq!(store.verify("ext", None), Status::Missing, "no metadata");
    assert_eq!(store.verify("other", Some(&meta)), Status::Missing);
    let moved = json!({"type": "local", "source": "/elsewhere"});
    assert_eq!(store.verify("ext", Some(&moved)), Status::Invalid, "metadata changed");
    // Another key (another machine's, or a reset keyring): nothing verifies, and nothing is
    // overwritten.
    let other = ReferenceStore::new(dir.path(), Secret::new("z".repeat(64)));
    assert_eq!(other.verify("ext", Some(&meta)), Status::Invalid);
    let e = other.record("new", &meta).unwrap_err();
    assert!(
        e.to_string().contains("cannot be verified. Please delete")
            && e.to_string().contains(STORE_FILE),
        "{e}"
    );
    // A record whose signature was cut short (Gemini CLI's "signature length mismatches").
    let good = std::fs::read_to_string(dir.path().join(STORE_FILE)).unwrap();
    let sig = store.record_for(&meta).signature;
    std::fs::write(dir.path().join(STORE_FILE), good.replace(&sig, &sig[..40])).unwrap();
    assert_eq!(store.verify("ext", Some(&meta)), Status::Invalid, "a truncated signature");
    std::fs::write(dir.path().join(STORE_FILE), &good).unwrap();
    assert_eq!(store.verify("ext", Some(&meta)), Status::Verified);
    // The file edited by hand: its signature no longer matches.
    let path = dir.path().join(STORE_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let r = store.record_for(&moved);
    std::fs::write(&path, text.replace(&store.record_for(&meta).hash, &r.hash)).unwrap();
    assert_eq!(store.verify("ext", Some(&moved)), Status::Invalid, "a record swapped in by hand");
    std::fs::write(&path, "{ not json").unwrap();
    assert!(matches!(store.load(), Err(StoreError::Parse(_))));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ not json", "left as it is");
    // Reset by deleting it, as the message says; then forget works on a fresh store.
    std::fs::remove_file(&path).unwrap();
    store.record("ext", &meta).unwrap();
    store.forget("ext").unwrap();
    assert_eq!(store.verify("ext", Some(&meta)), Status::Missing);
}
