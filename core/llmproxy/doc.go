// Package llmproxy is the host side of the agent's connection to the model
// API (DESIGN decision 6). The agent container has no network and no
// credential: Claude Code talks to http://127.0.0.1:<port> inside it, where
// `ipc-relay` copies bytes to a per-session Unix socket mounted at
// /run/carapace/llm.sock. On the host, Serve listens on that socket and a
// Proxy answers each request:
//
//  1. Only POST /v1/messages, POST /v1/messages/count_tokens, GET /v1/models
//     and GET /v1/models/{id} pass, matched on the path exactly as sent (no
//     percent-encoding, dot segments or doubled slashes); anything else is
//     refused with 403 (405 for a wrong method) in the API's error shape.
//  2. The session's request rate (a token bucket) and, for /v1/messages, the
//     group's daily token Budget are checked; over either, 429
//     rate_limit_error.
//  3. The body is read whole, up to Options.MaxRequestBytes (413 past it),
//     so that nothing leaves the host for a request that is refused. The
//     body of a POST is checked (body.go): a request that asks the model
//     API itself to reach the network or data outside the conversation — a
//     server tool such as web_search or web_fetch (tools are allow-listed:
//     only client tools pass), mcp_servers, container, an image or
//     document whose source is a URL or a Files API file — is refused with
//     403 permission_error naming the field and why, and one that is not a
//     single JSON object with 400.
//     When the group is limited to some models (Options.Models), a body
//     that names another, or none, is refused with 403 permission_error
//     (models.go).
//  4. The credential is fetched (Options.Credential, every request) and a
//     "routed" audit entry written; if it cannot be, nothing is sent.
//  5. The request goes to the model API — over verified TLS, or over plain
//     http to a loopback address only (CheckUpstream) — with an allowed
//     set of headers only: whatever credential the container sent (its
//     placeholder key) is dropped, the real one injected in the upstream's
//     style (x-api-key; Authorization: Bearer, plus OAuthBeta for a Claude
//     subscription's token; or nothing for a keyless local server),
//     Accept-Encoding is replaced by identity, and anthropic-beta values
//     that would let the API reach the network for the agent
//     (Options.DeniedBetas) are dropped.
//  6. The reply's status and body are relayed as they arrive (a stream is
//     flushed chunk by chunk), with an allowed set of response headers.
//     Usage is read on the way: from message_start and message_delta
//     events of a stream, without holding it, or from a JSON reply. The
//     tokens are charged to the Budget and the call's outcome audited:
//     session, group, model, status, tokens and latency; never a header, a
//     body or the credential. A reply that carries no usage object (some
//     gateways and local servers count nothing) is audited "usage not
//     reported by the upstream" rather than as zero tokens, and charges
//     nothing to the Budget.
//
// # Upstreams
//
// Every upstream speaks the Messages API; they differ in where they live
// and how they take a credential (upstream.go): anthropic (the default;
// https://api.anthropic.com, the stored key as x-api-key or an OAuth token
// as a bearer token), ollama (http://127.0.0.1:11434, no credential),
// llamacpp (llama-server, http://127.0.0.1:8080, no credential) and custom
// (a gateway: its URL, and x-api-key, bearer or none). The path
// allow-list, the body check, the rate, the budget and the audit are the
// same for each: only the origin and the credential header change.
//
// The forwarding is written by hand rather than with
// httputil.ReverseProxy: its generality — protocol upgrades, 1xx and
// trailer relay, X-Forwarded-*, all response headers — is surface this
// proxy must not have, and each of its hooks (Rewrite, ModifyResponse,
// ErrorHandler, the body copy) would have been replaced; what remains is a
// RoundTrip and a copy loop.
//
// # Limits
//
// An upstream that reports no usage is not held by a daily token budget:
// its calls are audited as "usage not reported" and cost nothing against
// it, so a budget over such an upstream bounds nothing (the request rate
// still does). Ollama and llama-server do report usage; a gateway may not.
// The usage read is the largest count seen in a stream's events, so an
// upstream whose message_start estimates more input tokens than its
// message_delta counts (Ollama estimates when it has no count yet) is
// charged the estimate.
//
// The budget is checked before a call and charged after it, so calls in
// flight when it runs out still finish and the day's total can exceed it.
// DailyBudget is in memory and forgets usage when the core restarts. A
// reply the model API compresses despite "Accept-Encoding: identity", or a
// JSON reply over 16 MiB, is relayed but its usage is not counted (the log
// says so). Options.DeniedBetas cannot cover a network-reaching feature
// that needs no beta (the generally available web_search and web_fetch
// server tools are such); the body check does. What the body check cannot
// see: a future top-level field, or block type without a "source", that
// makes the API fetch (only mcp_servers and container are refused by
// name, so as not to refuse every new field Claude Code sends), and what
// the API does with the text it is sent. It costs a walk of the body with
// encoding/json: about 4 µs for a small request and 7-20 ms per MiB of
// conversation on a loaded 2-core host (BenchmarkCheckBody).
package llmproxy
