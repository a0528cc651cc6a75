package server_test

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/keychain"
)

// modelUpstream is a fake model API shaped like one kind of upstream. It
// records the headers and model of every request it gets.
type modelUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	seen   []http.Header
	models []string
}

// The shapes of the fakes' replies. Anthropic's carries usage with cache
// fields; Ollama's (its anthropic package: ToMessagesResponse and
// StreamConverter) carries input_tokens and output_tokens only, an
// estimate of the input in message_start and the counts in message_delta;
// the gateway's carries no usage at all.
const (
	anthropicReply = `{"id":"msg_a","type":"message","role":"assistant","model":"claude-test-1","content":[{"type":"text","text":"hello from anthropic"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"cache_read_input_tokens":3,"output_tokens":5}}`
	ollamaReply    = `{"id":"msg_o","type":"message","role":"assistant","model":"qwen3-coder","content":[{"type":"text","text":"hello from ollama"}],"stop_reason":"end_turn","usage":{"input_tokens":21,"output_tokens":6}}`
	ollamaStream   = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_s\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"qwen3-coder\",\"content\":[],\"usage\":{\"input_tokens\":7,\"output_tokens\":0}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"streamed from ollama\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":9,\"output_tokens\":4}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	gatewayReply = `{"id":"msg_g","type":"message","role":"assistant","model":"claude-test-1","content":[{"type":"text","text":"hello from the gateway"}],"stop_reason":"end_turn"}`
)

// newModelUpstream starts a fake: over TLS (tls) or plain http, on
// loopback, answering /v1/messages with reply, or stream when the
// request asks for one.
func newModelUpstream(t *testing.T, tls bool, reply, stream string) *modelUpstream {
	f := &modelUpstream{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		_ = json.Unmarshal(body, &req)
		f.mu.Lock()
		f.seen = append(f.seen, r.Header.Clone())
		f.models = append(f.models, req.Model)
		f.mu.Unlock()
		if r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		if req.Stream && stream != "" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			for _, ev := range strings.SplitAfter(stream, "\n\n") {
				_, _ = io.WriteString(w, ev)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	})
	if tls {
		f.Server = httptest.NewTLSServer(h)
	} else {
		f.Server = httptest.NewServer(h)
	}
	t.Cleanup(f.Close)
	return f
}

func (f *modelUpstream) requests() ([]http.Header, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]http.Header(nil), f.seen...), append([]string(nil), f.models...)
}

func (f *modelUpstream) caFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// modelsScript starts the relay and makes one Messages call per argument
// "MODEL,STREAM" with raw HTTP/1.0 (so that error bodies show), sending
// the container's placeholder both as x-api-key and as a bearer token;
// each answer ends with "--- end". Then it prints the ANTHROPIC_
// environment and searches the container for CANARY, twice: before and
// after a control file holding the word is planted.
const modelsScript = relayUp + `
cat > /tmp/call.sh <<'END'
msg="{\"model\":\"$1\",\"max_tokens\":10,\"stream\":$2,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
printf 'POST /v1/messages HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nX-Api-Key: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s' "$ANTHROPIC_API_KEY" "$ANTHROPIC_API_KEY" ${#msg} "$msg"
cat >&2
END
for call in "$@"; do
	nc 127.0.0.1 $CARAPACE_LLM_PORT -e sh /tmp/call.sh "${call%%,*}" "${call#*,}" 2>&1
	echo; echo "--- end"
done
env | grep '^ANTHROPIC_' | sort
` + searchFiles + `
search CANARY
mkdir -p /tmp/control && printf '%s%s\n' CANA RY > /tmp/control/planted
search CANARY`

// modelsRun is what a session running modelsScript printed.
type modelsRun struct {
	answers []llmAnswer
	env     string // the ANTHROPIC_ lines
	info    api.Session
}

// runModels runs modelsScript in a container session of group, checks
// that the container holds no credential (and that the search would have
// found one), and returns the answers.
func runModels(t *testing.T, c *testCore, group string, calls ...string) modelsRun {
	t.Helper()
	stdout, stderr, exit, info := runAgent(t, c, api.SessionRequest{Group: group, Runtime: "docker", Command: append([]string{"sh", "-c", modelsScript, "models"}, calls...)})
	if exit != 0 {
		t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", group, exit, stdout, stderr)
	}
	out, ok := strings.CutPrefix(stdout, "RELAY UP\n")
	if !ok {
		t.Fatalf("%s: the relay did not come up:\n%s\nstderr:\n%s", group, stdout, stderr)
	}
	parts := strings.Split(out, "--- end\n")
	if len(parts) != len(calls)+1 {
		t.Fatalf("%s: %d answers for %d calls:\n%s", group, len(parts)-1, len(calls), stdout)
	}
	run := modelsRun{info: info}
	for _, p := range parts[:len(calls)] {
		var a llmAnswer
		if _, err := fmt.Sscanf(p, "HTTP/1.%d %d", new(int), &a.Status); err != nil {
			t.Fatalf("%s: no status line in %q", group, p)
		}
		if _, body, ok := strings.Cut(p, "\r\n\r\n"); ok {
			a.Body = body
		}
		run.answers = append(run.answers, a)
	}
	tail := parts[len(calls)]
	searches := strings.Split(tail, "SEARCH DONE")
	if len(searches) != 3 {
		t.Fatalf("%s: the searches did not both finish:\n%s\nstderr:\n%s", group, tail, stderr)
	}
	run.env = searches[0]
	// The first search finds nothing, the second exactly the control: a
	// search that failed silently would find nothing both times.
	if strings.Contains(searches[0], "HIT ") || strings.Count(searches[1], "HIT ") != 1 || !strings.Contains(searches[1], "HIT /tmp/control/planted\n") {
		t.Errorf("%s: a file in the container holds a credential, or the control was not found:\n%s", group, tail)
	}
	if strings.Contains(run.env, "CANARY") || strings.Contains(stdout+stderr, "CANARY-") {
		t.Errorf("%s: the container saw a credential:\n%s", group, stdout)
	}
	return run
}

// TestModelUpstreams: three groups, each on an upstream shaped like one
// kind — a local Ollama (plain http on loopback, no credential, its
// usage and stream shapes), Anthropic (x-api-key) and a company gateway
// (a bearer token, no usage reported) — reached from inside real
// containers through ipc-relay and the core's proxy. Calls and streams
// work; each upstream gets its own credential style and nothing else;
// no credential enters a box; a model the group may not use is refused
// and audited; the group's model reaches Claude Code's environment; the
// usage each upstream reports is audited, and where it reports none the
// audit says so.
func TestModelUpstreams(t *testing.T) {
	const anthKey = "sk-ant-api03-CANARY-anthropic-0123456789"
	const gwToken = "gw-CANARY-token-9876543210"
	ollama := newModelUpstream(t, false, ollamaReply, ollamaStream)
	anth := newModelUpstream(t, true, anthropicReply, "")
	gw := newModelUpstream(t, true, gatewayReply, "")
	cfg := fmt.Sprintf(`[llm]
provider = "ollama"
upstream = %q
[llm.upstreams.cloud]
upstream = %q
ca_file = %q
[llm.upstreams.corp]
provider = "custom"
upstream = %q
auth = "bearer"
ca_file = %q
[groups.local]
models = ["qwen3-coder"]
model = "qwen3-coder"
[groups.cloud]
upstream = "cloud"
[groups.corp]
upstream = "corp"
`, ollama.URL, anth.URL, anth.caFile(t), gw.URL, gw.caFile(t))
	c := startCoreWith(t, coreOptions{
		Config: dockerConfig(t, cfg),
		Setup: func(h home.Dir) {
			s := keychain.NewFileStore(h.CredentialsDir())
			if err := s.Set(keychain.LLMPlugin, keychain.LLMKeyAPI, []byte(anthKey)); err != nil {
				t.Fatal(err)
			}
			if err := s.Set(keychain.LLMPlugin, "custom-api-key", []byte(gwToken)); err != nil {
				t.Fatal(err)
			}
		},
	})

	local := runModels(t, c, "local", "qwen3-coder,false", "qwen3-coder,true", "claude-opus-4-1,false")
	if a := local.answers[0]; a.Status != 200 || !strings.Contains(a.Body, "hello from ollama") {
		t.Errorf("local call: %+v", a)
	}
	// The script's echo adds a newline after each answer.
	if a := local.answers[1]; a.Status != 200 || strings.TrimSuffix(a.Body, "\n") != ollamaStream {
		t.Errorf("local stream: %d, body %q; want Ollama's stream relayed whole", a.Status, a.Body)
	}
	if a := local.answers[2]; a.Status != 403 || !strings.Contains(a.Body, `"type":"permission_error"`) ||
		!strings.Contains(a.Body, "group local may use only the models qwen3-coder; this request names \\\"claude-opus-4-1\\\"") {
		t.Errorf("a model the group may not use: %+v", a)
	}
	for _, want := range []string{"ANTHROPIC_MODEL=qwen3-coder\n", "ANTHROPIC_DEFAULT_HAIKU_MODEL=qwen3-coder\n", "ANTHROPIC_SMALL_FAST_MODEL=qwen3-coder\n", "ANTHROPIC_BASE_URL=http://127.0.0.1:8377\n"} {
		if !strings.Contains(local.env, want) {
			t.Errorf("the local group's environment lacks %q:\n%s", want, local.env)
		}
	}

	cloud := runModels(t, c, "cloud", "claude-test-1,false")
	if a := cloud.answers[0]; a.Status != 200 || !strings.Contains(a.Body, "hello from anthropic") {
		t.Errorf("cloud call: %+v", a)
	}
	if strings.Contains(cloud.env, "ANTHROPIC_MODEL=") {
		t.Errorf("a group that names no model got one:\n%s", cloud.env)
	}
	corp := runModels(t, c, "corp", "claude-test-1,false")
	if a := corp.answers[0]; a.Status != 200 || !strings.Contains(a.Body, "hello from the gateway") {
		t.Errorf("corp call: %+v", a)
	}

	// Each upstream got its own style of credential, and nothing of the
	// container's.
	for _, u := range []struct {
		name         string
		f            *modelUpstream
		calls        int
		apiKey, auth string
	}{
		{"ollama", ollama, 2, "", ""},
		{"anthropic", anth, 1, anthKey, ""},
		{"gateway", gw, 1, "", "Bearer " + gwToken},
	} {
		seen, models := u.f.requests()
		if len(seen) != u.calls {
			t.Errorf("%s got %d requests (models %v), want %d", u.name, len(seen), models, u.calls)
		}
		for _, h := range seen {
			if h.Get("X-Api-Key") != u.apiKey || h.Get("Authorization") != u.auth {
				t.Errorf("%s got x-api-key %q, authorization %q; want %q, %q", u.name, h.Get("X-Api-Key"), h.Get("Authorization"), u.apiKey, u.auth)
			}
			for k, vs := range h {
				for _, v := range vs {
					if strings.Contains(v, "carapace-placeholder") {
						t.Errorf("%s got the container's placeholder in %s", u.name, k)
					}
				}
			}
		}
	}
	if _, models := ollama.requests(); strings.Contains(strings.Join(models, ","), "claude-opus") {
		t.Errorf("the refused model reached Ollama: %v", models)
	}

	// The audit: the usage each upstream reported, "not reported" where it
	// reported none, and the refusal.
	reasons := map[string][]string{}
	codes := map[string][]string{}
	for _, e := range c.Audit(t) {
		if e.Stage == "llm" && e.Outcome != "routed" {
			reasons[e.Session] = append(reasons[e.Session], e.Reason)
			codes[e.Session] = append(codes[e.Session], e.Code)
		}
	}
	wantReasons := []struct {
		session, want string
	}{
		{local.info.ID, "model qwen3-coder, status 200, 21 in / 6 out tokens"},
		{local.info.ID, "model qwen3-coder, status 200, 9 in / 4 out tokens"},
		{cloud.info.ID, "model claude-test-1, status 200, 15 in / 5 out tokens (3 cache read, 0 cache write)"},
		{corp.info.ID, "model claude-test-1, status 200, usage not reported by the upstream; not charged to the budget"},
	}
	for _, w := range wantReasons {
		found := false
		for _, r := range reasons[w.session] {
			found = found || strings.HasSuffix(r, w.want)
		}
		if !found {
			t.Errorf("no audit entry of session %s ends %q; have %q", w.session, w.want, reasons[w.session])
		}
	}
	if !strings.Contains(strings.Join(codes[local.info.ID], ","), "MODEL_NOT_ALLOWED") {
		t.Errorf("the refused model is not audited: %v %q", codes[local.info.ID], reasons[local.info.ID])
	}
	raw, _ := os.ReadFile(c.Home.AuditLog())
	for _, secret := range []string{anthKey, gwToken} {
		if strings.Contains(string(raw), secret) || strings.Contains(c.Log.String(), secret) {
			t.Errorf("a credential is in the audit log or the core's log")
		}
	}
}

// TestModelUpstreamPlainHTTPRefused: an http upstream that is not on
// loopback stops the core at load, with the reason and the fix; the same
// upstream on loopback starts it (the control).
func TestModelUpstreamPlainHTTPRefused(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, want string
	}{
		{"default upstream", "[llm]\nprovider = \"ollama\"\nupstream = \"http://192.0.2.10:11434\"\n",
			`llm.upstream: "http://192.0.2.10:11434": plain http is allowed only to a loopback address (127.0.0.0/8, ::1, localhost), where it never crosses a network: use https:// for 192.0.2.10`},
		{"named upstream", "[llm.upstreams.lan]\nprovider = \"custom\"\nauth = \"none\"\nupstream = \"http://gpu-box.lan:8080\"\n",
			`llm.upstreams.lan.upstream: "http://gpu-box.lan:8080": plain http is allowed only to a loopback address`},
		{"loopback (control)", "[llm]\nprovider = \"ollama\"\nupstream = \"http://127.0.0.1:11434\"\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHome(t)
			if err := os.WriteFile(h.Config(), []byte(tc.cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := runCore(t, h, coreOptions{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("core start with a loopback http upstream: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("core start: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
