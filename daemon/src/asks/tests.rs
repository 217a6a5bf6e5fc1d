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
    let mut mine = asks.listen_to("s", C1, &[AskKind::Confirmation], Some("gw9-"));
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
