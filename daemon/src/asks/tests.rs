use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;

use super::*;

const C1: ConnId = ConnId(1);
const C2: ConnId = ConnId(2);

fn confirm<'a>(
    asks: &'a Asks,
    session: &'a str,
    deadline: Duration,
) -> impl Future<Output = Result<Value, AskError>> + 'a {
    asks.ask(session, Some("call-1"), AskKind::Confirmation, "run it?".into(), json!({}), deadline)
}

async fn next_asked(l: &mut Listening<'_>) -> Ask {
    loop {
        let n = l.notices.recv().await.unwrap();
        if let AskNotice::Asked { ask } = &*n {
            return ask.clone();
        }
    }
}

#[tokio::test]
async fn an_ask_nobody_can_answer_fails_at_once_naming_the_kind() {
    let asks = Asks::default();
    // A listener on another session, and one for another kind, do not count.
    let _other = asks.listen("t", C1, &[AskKind::Confirmation]);
    let _kind = asks.listen("s", C1, &[AskKind::Elicitation]);
    let e = confirm(&asks, "s", Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(e, AskError::NoAnswerer("confirmation"));
    assert!(e.to_string().contains("asks/listen"), "{e}");
    assert!(asks.pending("s").is_empty());
}

/// A listener for some calls' asks answers those only: another call's ask has no answerer
/// (and fails at once), though the session counts as one a client answers.
#[tokio::test]
async fn a_listener_for_some_calls_answers_only_their_asks() {
    let asks = Asks::default();
    let mut mine =
        asks.listen_to("s", C1, &[AskKind::Confirmation], super::Scope::Calls("gw9-".into()));
    assert!(asks.answers("s", AskKind::Confirmation));
    let e = confirm(&asks, "s", Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(e, AskError::NoAnswerer("confirmation"), "call-1 is not one of gw9-'s");
    let asked = asks.ask(
        "s",
        Some("gw9-1"),
        AskKind::Confirmation,
        "ok?".into(),
        json!({}),
        Duration::from_secs(5),
    );
    let answer = async {
        let ask = next_asked(&mut mine).await;
        assert_eq!(ask.call_id.as_deref(), Some("gw9-1"));
        asks.respond("s", &ask.id, json!({"outcome": "once"})).unwrap();
    };
    let (got, ()) = tokio::join!(asked, answer);
    assert_eq!(got.unwrap(), json!({"outcome": "once"}));
}

#[tokio::test]
async fn the_first_answer_wins_and_every_listener_is_told() {
    let asks = Arc::new(Asks::default());
    let mut a = asks.listen("s", C1, &[AskKind::Confirmation]);
    let mut b = asks.listen("s", C2, &[AskKind::Confirmation, AskKind::Sampling]);
    let asker = {
        let asks = asks.clone();
        tokio::spawn(async move { confirm(&asks, "s", Duration::from_secs(5)).await })
    };
    let ask = next_asked(&mut a).await;
    assert_eq!(next_asked(&mut b).await, ask);
    assert_eq!((ask.call_id.as_deref(), ask.kind), (Some("call-1"), AskKind::Confirmation));
    assert_eq!(asks.pending("s"), std::slice::from_ref(&ask));
    assert!(asks.respond("s", &ask.id, json!({"outcome": "once"})).unwrap());
    assert!(!asks.respond("s", &ask.id, json!({"outcome": "deny"})).unwrap(), "too late");
    assert_eq!(asker.await.unwrap().unwrap(), json!({"outcome": "once"}));
    let sent: HashSet<String> = [ask.id.clone()].into();
    let settled = loop {
        let n = b.notices.recv().await.unwrap();
        if b.wants(&n, &sent) && matches!(*n, AskNotice::Settled { .. }) {
            break n;
        }
    };
    assert_eq!(*settled, AskNotice::Settled { id: ask.id, how: Settled::Answered });
    assert!(asks.pending("s").is_empty());
}

#[tokio::test]
async fn an_answer_of_the_wrong_shape_is_refused_and_the_ask_stays_pending() {
    let asks = Arc::new(Asks::default());
    let mut l = asks.listen("s", C1, &[AskKind::Confirmation]);
    let asker = {
        let asks = asks.clone();
        tokio::spawn(async move { confirm(&asks, "s", Duration::from_secs(5)).await })
    };
    let ask = next_asked(&mut l).await;
    let e = asks.respond("s", &ask.id, json!({"outcome": "yes please"})).unwrap_err();
    assert!(e.to_string().contains("\"once\""), "the error names the shape: {e}");
    assert_eq!(asks.pending("s").len(), 1, "still pending");
    assert!(!asks.respond("t", &ask.id, json!({"outcome": "once"})).unwrap(), "not its session");
    assert!(asks.respond("s", &ask.id, json!({"outcome": "always"})).unwrap());
    assert_eq!(Confirmed::parse(&asker.await.unwrap().unwrap()).unwrap(), Confirmed::Always);
}

#[tokio::test]
async fn an_ask_whose_asker_stops_waiting_is_cancelled_and_a_late_one_times_out() {
    let asks = Arc::new(Asks::default());
    let mut l = asks.listen("s", C1, &[AskKind::Confirmation]);
    let asker = {
        let asks = asks.clone();
        tokio::spawn(async move { confirm(&asks, "s", Duration::from_secs(60)).await })
    };
    let ask = next_asked(&mut l).await;
    asker.abort();
    let _ = asker.await;
    assert!(asks.pending("s").is_empty());
    let n = l.notices.recv().await.unwrap();
    assert_eq!(*n, AskNotice::Settled { id: ask.id.clone(), how: Settled::Cancelled });
    assert!(!asks.respond("s", &ask.id, json!({"outcome": "once"})).unwrap());

    let e = confirm(&asks, "s", Duration::from_millis(20)).await.unwrap_err();
    assert_eq!(e, AskError::TimedOut(Duration::from_millis(20)));
    let _asked = l.notices.recv().await.unwrap();
    let n = l.notices.recv().await.unwrap();
    assert!(matches!(&*n, AskNotice::Settled { how: Settled::TimedOut, .. }), "{n:?}");
    // An answer after the deadline is too late, and said so.
    let AskNotice::Settled { id, .. } = &*n else { unreachable!() };
    assert!(!asks.respond("s", id, json!({"outcome": "once"})).unwrap());
}

#[tokio::test]
async fn a_client_that_listens_again_gets_the_pending_asks_first() {
    let asks = Arc::new(Asks::default());
    let first = asks.listen("s", C1, &[AskKind::Confirmation]);
    let asker = {
        let asks = asks.clone();
        tokio::spawn(async move { confirm(&asks, "s", Duration::from_secs(5)).await })
    };
    while asks.pending("s").is_empty() {
        tokio::task::yield_now().await;
    }
    drop(first);
    // Reconnected: a new connection listens, and is sent the pending ask at once.
    let again = asks.listen("s", C2, &[AskKind::Confirmation]);
    assert_eq!(again.pending.len(), 1);
    let other_kind = asks.listen("s", C1, &[AskKind::OpenUrl]);
    assert!(other_kind.pending.is_empty(), "only the kinds it listens for");
    asks.respond("s", &again.pending[0].id, json!({"outcome": "deny"})).unwrap();
    assert_eq!(Confirmed::parse(&asker.await.unwrap().unwrap()).unwrap(), Confirmed::Deny);
}

#[test]
fn answers_are_checked_for_their_kind() {
    let ok = [
        (AskKind::Elicitation, json!({"action": "accept", "content": {"a": 1}})),
        (AskKind::Elicitation, json!({"action": "cancel"})),
        (
            AskKind::Sampling,
            json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}),
        ),
        (AskKind::OpenUrl, json!({"opened": false})),
        (AskKind::Confirmation, json!({"outcome": "session"})),
    ];
    for (kind, answer) in ok {
        assert_eq!(check(kind, &answer), Ok(()), "{kind:?} {answer}");
    }
    let bad = [
        (AskKind::Elicitation, json!({"action": "maybe"})),
        (AskKind::Sampling, json!({"text": "hi"})),
        (AskKind::OpenUrl, json!({"opened": "yes"})),
        (AskKind::Confirmation, json!("once")),
    ];
    for (kind, answer) in bad {
        assert!(check(kind, &answer).is_err(), "{kind:?} {answer}");
    }
}

/// A gateway client's stream answers its own calls' asks and those raised outside any
/// gateway client's call, never another gateway client's; it does not make the session
/// interactive for everyone.
#[tokio::test]
async fn a_gateway_clients_listener_answers_its_own_and_unowned_asks_only() {
    let asks = Asks::default();
    let _gw = asks.listen_to("s", C1, &[AskKind::Confirmation], Scope::Gateway("gw3-".into()));
    assert!(asks.answers("s", AskKind::Confirmation));
    assert!(!asks.answers_all("s", AskKind::Confirmation), "a gateway client is not everyone's");
    for (call, takes) in [
        (Some("gw3-1"), true),
        (Some("gw3-12"), true),
        (Some("gw4-1"), false),
        (Some("gw31-1"), false),
        (Some("call-1"), true),
        (None, true),
    ] {
        assert_eq!(asks.answers_call("s", AskKind::Confirmation, call), takes, "{call:?}");
    }
    let e = asks
        .ask(
            "s",
            Some("gw4-1"),
            AskKind::Confirmation,
            "?".into(),
            json!({}),
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
    assert_eq!(e, AskError::NoAnswerer("confirmation"));
    let _person = asks.listen("s", C2, &[AskKind::Confirmation]);
    assert!(asks.answers_all("s", AskKind::Confirmation));
    assert!(asks.answers_call("s", AskKind::Confirmation, Some("gw4-1")));
}

/// When the last stream that could answer a pending ask goes, the ask ends at once (its
/// asker is told why) instead of waiting out its deadline; an ask someone else can still
/// answer stays.
#[tokio::test]
async fn an_ask_whose_last_answerer_goes_ends_at_once() {
    let asks = Asks::default();
    let mine = asks.listen_to("s", C1, &[AskKind::Confirmation], Scope::Gateway("gw5-".into()));
    let _person = asks.listen("t", C2, &[AskKind::Confirmation]);
    let orphan = asks.ask(
        "s",
        Some("gw5-1"),
        AskKind::Confirmation,
        "?".into(),
        json!({}),
        Duration::from_secs(3600),
    );
    let drop_it = async {
        while asks.pending("s").is_empty() {
            tokio::task::yield_now().await;
        }
        drop(mine);
    };
    let (got, ()) =
        tokio::time::timeout(Duration::from_secs(30), async { futures::join!(orphan, drop_it) })
            .await
            .expect("the ask ended when its answerer went");
    let e = got.unwrap_err();
    assert_eq!(e, AskError::AnswererGone("confirmation"));
    assert!(e.to_string().contains("went away"), "{e}");
    assert!(asks.pending("s").is_empty());
    // Another session's ask, which a person's stream answers, stays when a stream goes.
    let stays = asks.ask(
        "t",
        Some("gw9-1"),
        AskKind::Confirmation,
        "?".into(),
        json!({}),
        Duration::from_secs(3600),
    );
    let other = asks.listen("t", C1, &[AskKind::Elicitation]);
    let check = async {
        while asks.pending("t").is_empty() {
            tokio::task::yield_now().await;
        }
        drop(other);
        assert_eq!(asks.pending("t").len(), 1, "the person's listener still answers it");
        let id = asks.pending("t")[0].id.clone();
        asks.respond("t", &id, json!({"outcome": "deny"})).unwrap();
    };
    let (r, ()) = futures::join!(stays, check);
    assert_eq!(r.unwrap(), json!({"outcome": "deny"}));
}

/// A person's stream that goes (attach closed) may come back, and is sent its pending asks
/// first; one that does not come back ends them then, not at their deadline, even for a
/// caller that could not be asked itself.
#[tokio::test]
async fn an_ask_ends_when_the_person_who_could_answer_it_does_not_come_back() {
    let asks = Asks { come_back: Duration::from_millis(50), ..Asks::default() };
    let person = asks.listen("s", C1, &[AskKind::Confirmation]);
    let asked = asks.ask(
        "s",
        Some("gw2-1"),
        AskKind::Confirmation,
        "?".into(),
        json!({}),
        Duration::from_secs(3600),
    );
    let leave = async {
        while asks.pending("s").is_empty() {
            tokio::task::yield_now().await;
        }
        drop(person);
    };
    let (got, ()) =
        tokio::time::timeout(Duration::from_secs(60), async { futures::join!(asked, leave) })
            .await
            .expect("the ask ended when nobody came back");
    assert_eq!(got.unwrap_err(), AskError::AnswererGone("confirmation"));
    assert!(asks.pending("s").is_empty());
}
