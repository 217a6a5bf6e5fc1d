//! What the supervisor needs from the sessions above it ([`Callers`]): whose call a server's
//! progress and requests belong to, and who answers what a server asks.

/// Where a request a 2026-07-28 server made as an input request carries the server's key for
/// it on its way to an ask (`_meta`; the ask keeps it as `detail.inputKey`).
pub(crate) const INPUT_KEY: &str = "dev.geminid/inputKey";

/// The call behind something a server sent: its progress notifications and its requests
/// (elicitation, sampling, roots) belong to the session whose call caused them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The session that called.
    pub session: String,
    /// The caller's call id.
    pub call_id: Option<String>,
    /// The tool's fully qualified name.
    pub name: String,
}

/// Whose call a server's request belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Whose {
    /// This call's (by the stream it came on, or as the one session with calls in flight).
    One(Caller),
    /// No call of any session is in flight on that server.
    Nobody,
    /// The transport cannot say which call caused it, and these sessions have calls in
    /// flight on it.
    Several(Vec<String>),
}

/// What the supervisor needs from the sessions above it: where a server's progress goes, and
/// who answers what it asks (the call pipeline knows which calls are in flight, see
/// `calls::progress`, and the asks seat who can answer).
#[allow(
    deprecated,
    reason = "sampling and roots are SEP-2577-deprecated; servers of the eras before 2026-07-28 use them"
)]
pub(crate) trait Callers: Send + Sync + std::fmt::Debug {
    /// A progress notification arrived from the server of `identity`.
    fn progress(&self, identity: &str, params: &rmcp::model::ProgressNotificationParam);
    /// What a call of `session` declares to a server of the 2026-07-28 era in its own
    /// `_meta`: elicitation and sampling only while a client of the session answers them.
    fn capabilities(&self, session: &str) -> rmcp::model::ClientCapabilities;
    /// The call a request of `identity`'s server belongs to: the one that sent request
    /// `origin` when the transport says (streamable HTTP), else the only session with calls
    /// in flight there.
    fn whose(&self, identity: &str, origin: Option<&rmcp::model::RequestId>) -> Whose;
    /// The calls in flight on `identity`'s connection.
    fn in_flight(&self, identity: &str) -> Vec<Caller>;
    /// Ask the caller's clients to fill in a server's elicitation: the protocol's decline
    /// when none of them can, or nobody answers in time.
    fn elicit(
        &self,
        caller: Caller,
        server: String,
        params: rmcp::model::ElicitRequestParams,
    ) -> futures::future::BoxFuture<'static, rmcp::model::ElicitResult>;
    /// Ask the caller's clients for a sampling answer (geminid never calls a model itself):
    /// an error when none of them declared sampling, or nobody answers in time.
    fn sample(
        &self,
        caller: Caller,
        server: String,
        params: rmcp::model::CreateMessageRequestParams,
    ) -> futures::future::BoxFuture<
        'static,
        Result<rmcp::model::CreateMessageResult, rmcp::ErrorData>,
    >;
}
