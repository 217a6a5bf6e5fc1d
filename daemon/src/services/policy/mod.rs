//! Policy as the daemon applies it (the engine is `crate::policy`): the decision a tool call
//! gets (`tool_calls.rs`: `ToolCallPolicy`, the pipeline's policy seat and static filter) and
//! the policy requests outside a call (`requests.rs`: `PolicyRequests`: the approval mode,
//! confirmations answered, `policy/check`, `policy/review|accept|list`).

pub(crate) mod requests;
pub(crate) mod tool_calls;
