package server_test

import (
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

// fakeModelAPI is a TLS server on loopback standing in for the model API:
// it records the credentials it is sent and answers /v1/models and
// /v1/messages.
type fakeModelAPI struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newFakeModelAPI(t *testing.T) *fakeModelAPI {
	f := &fakeModelAPI{}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, r.Header.Clone())
		f.mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"data":[{"id":"claude-test-1","type":"model"}],"has_more":false}`)
		case "/v1/messages":
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test-1","content":[{"type":"text","text":"hello from the fake model"}],"usage":{"input_tokens":12,"output_tokens":5}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// caFile writes the fake's certificate where the core's [llm] ca_file
// can name it.
func (f *fakeModelAPI) caFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestModelAPIThroughTheRelay: a client inside the real container reaches
// 127.0.0.1:PORT and gets the fake model API's answer through ipc-relay
// and the core's proxy; the real key arrives upstream, the placeholder
// never does, and the container never sees the key — while it still
// cannot reach any network address directly.
func TestModelAPIThroughTheRelay(t *testing.T) {
	const key = "sk-ant-api03-CANARY-llm-key-0123456789"
	up := newFakeModelAPI(t)
	c := startCoreWith(t, coreOptions{
		Config: dockerConfig(t, fmt.Sprintf("[llm]\nupstream = %q\nca_file = %q\n", up.URL, up.caFile(t))),
		Setup: func(h home.Dir) {
			if err := keychain.NewFileStore(h.CredentialsDir()).Set(keychain.LLMPlugin, keychain.LLMKeyAPI, []byte(key)); err != nil {
				t.Fatal(err)
			}
		},
	})
	script := relayUp + `
echo "base: $ANTHROPIC_BASE_URL"
wget -q -O- --header "x-api-key: $ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL/v1/models"; echo
wget -q -O- --header "x-api-key: $ANTHROPIC_API_KEY" --header "content-type: application/json" --post-data '{"model":"claude-test-1","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}' "$ANTHROPIC_BASE_URL/v1/messages"; echo
wget -q -O- "$ANTHROPIC_BASE_URL/v1/files" >/dev/null 2>&1 && echo "FILES REACHED" || echo "files refused"
wget -q -T 2 -O- ` + up.URL + `/v1/models >/dev/null 2>&1 && echo "DIRECT REACHED" || echo "direct refused"
nc -w 2 1.1.1.1 443 </dev/null >/dev/null 2>&1 && echo "NET REACHED" || echo "net refused"
env; cat /proc/self/environ /proc/1/environ | tr '\0' '\n'
` + searchFiles + `
search CANARY
# The control: the same search finds the word once a file holds it.
mkdir -p /tmp/control && printf '%s%s\n' CANA RY > /tmp/control/planted
search CANARY`
	stdout, stderr, exit, info := runAgent(t, c, api.SessionRequest{Group: "main", Runtime: "docker", Command: []string{"sh", "-c", script}})
	for _, want := range []string{"RELAY UP", "base: http://127.0.0.1:8377", `"claude-test-1"`, "hello from the fake model", "files refused", "direct refused", "net refused"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("container output lacks %q\nstdout:\n%s\nstderr:\n%s", want, stdout, stderr)
		}
	}
	if exit != 0 {
		t.Errorf("exit %d", exit)
	}
	// The first search finds nothing, the second (after the control is
	// planted) exactly the control: a search that failed silently would
	// find nothing both times.
	searches := strings.Split(stdout, "SEARCH DONE")
	if len(searches) != 3 || strings.Contains(searches[0], "HIT ") || strings.Count(searches[1], "HIT ") != 1 || !strings.Contains(searches[1], "HIT /tmp/control/planted\n") {
		t.Errorf("a file in the container holds the key, or the control was not found:\n%s", stdout)
	}
	if strings.Contains(searches[0], "CANARY") || strings.Contains(stdout+stderr, key) {
		t.Errorf("the container saw the model API key:\n%s", stdout)
	}
	up.mu.Lock()
	seen := up.seen
	up.mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("the model API got %d requests, want 2 (models, messages)", len(seen))
	}
	for _, h := range seen {
		if h.Get("X-Api-Key") != key {
			t.Errorf("the model API did not get the real key: x-api-key %q", h.Get("X-Api-Key"))
		}
		for name, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, "carapace-placeholder") {
					t.Errorf("the placeholder reached the model API in %s", name)
				}
			}
		}
	}
	raw, _ := os.ReadFile(c.Home.AuditLog())
	if strings.Contains(string(raw), key) || strings.Contains(c.Log.String(), key) {
		t.Error("the key is in the audit log or the core's log")
	}
	var llmCalls int
	for _, e := range c.Audit(t) {
		if e.Session == info.ID && e.Stage == "llm" && strings.Contains(e.Reason, "claude-test-1") {
			llmCalls++
		}
	}
	if llmCalls == 0 {
		t.Errorf("no audit entry for the model calls of session %s", info.ID)
	}
}

// TestBadLLMCAFileStopsTheCore: an unusable [llm] ca_file is reported when
// the core starts, naming the setting, not at the first container session.
func TestBadLLMCAFileStopsTheCore(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, want string
	}{
		{"missing", filepath.Join(dir, "absent.pem"), "no such file"},
		{"not PEM", notPEM, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHome(t)
			cfg := fmt.Sprintf("[llm]\nca_file = %q\n", tc.file)
			if err := os.WriteFile(h.Config(), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := runCore(t, h, coreOptions{})
			if err == nil || !strings.Contains(err.Error(), "llm.ca_file") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("core start: %v; want an error naming llm.ca_file and %q", err, tc.want)
			}
		})
	}
}

// relayUp starts ipc-relay in the container as the image's entrypoint does
// and waits until it listens: it prints "RELAY UP", or "RELAY DOWN" and
// the relay's log and exits 3. (busybox nc has no -z to probe the port.)
const relayUp = `ipc-relay --listen 127.0.0.1:$CARAPACE_LLM_PORT 2>/tmp/relay.log &
up=
for i in $(seq 100); do grep -q "listening on" /tmp/relay.log && up=1 && break; sleep 0.05; done
if [ -n "$up" ]; then echo "RELAY UP"; else echo "RELAY DOWN: $(cat /tmp/relay.log)"; exit 3; fi`

// searchFiles defines search PATTERN in a container script: it prints
// "HIT path" for every regular file outside /proc, /sys and /dev that holds
// PATTERN, then "SEARCH DONE". It uses only what busybox has (its grep
// has no --exclude-dir); its failures are not hidden, and each use is
// paired with a control that plants PATTERN and must be found.
const searchFiles = `search() {
	find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -exec grep -lF "$1" {} + | sed 's/^/HIT /'
	echo "SEARCH DONE"
}`

// llmScript is a container script that starts ipc-relay and then makes the
// calls named in its arguments through it with raw HTTP/1.0 (so that error
// bodies are shown too): "post" a Messages call, "get" the model list. Each
// answer ends with a line "--- end". busybox nc quits when its input ends,
// before the answer has come, so the request is written by nc -e's program,
// which then copies the answer to stderr.
const llmScript = relayUp + `
cat > /tmp/call.sh <<'END'
msg='{"model":"claude-test-1","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}'
case $1 in
post) printf 'POST /v1/messages HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' ${#msg} "$msg" ;;
get) printf 'GET /v1/models HTTP/1.0\r\nHost: x\r\n\r\n' ;;
esac
cat >&2
END
for call in "$@"; do
	nc 127.0.0.1 $CARAPACE_LLM_PORT -e sh /tmp/call.sh $call 2>&1
	echo; echo "--- end"
done`

// llmAnswer is one raw answer of llmScript: its status code and body.
type llmAnswer struct {
	Status int
	Body   string
}

// llmCalls runs llmScript in a container session of group and returns the
// answers, one per call.
func llmCalls(t *testing.T, c *testCore, group string, calls ...string) ([]llmAnswer, api.Session) {
	t.Helper()
	return rawCalls(t, c, group, append([]string{"sh", "-c", llmScript, "llm"}, calls...), len(calls))
}

// rawCalls runs cmd, a container script that starts the relay as llmScript
// does and then prints calls raw answers, each ending with "--- end", and
// returns the answers.
func rawCalls(t *testing.T, c *testCore, group string, cmd []string, calls int) ([]llmAnswer, api.Session) {
	t.Helper()
	stdout, stderr, exit, info := runAgent(t, c, api.SessionRequest{Group: group, Runtime: "docker", Command: cmd})
	if exit != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", exit, stdout, stderr)
	}
	stdout, ok := strings.CutPrefix(stdout, "RELAY UP\n")
	if !ok {
		t.Fatalf("the relay did not come up:\n%s\nstderr:\n%s", stdout, stderr)
	}
	parts := strings.Split(stdout, "--- end\n")
	if len(parts) != calls+1 {
		t.Fatalf("%d answers for %d calls:\n%s\nstderr:\n%s", len(parts)-1, calls, stdout, stderr)
	}
	var as []llmAnswer
	for _, p := range parts[:calls] {
		var a llmAnswer
		if _, err := fmt.Sscanf(p, "HTTP/1.%d %d", new(int), &a.Status); err != nil {
			t.Fatalf("no status line in %q", p)
		}
		if _, body, ok := strings.Cut(p, "\r\n\r\n"); ok {
			a.Body = body
		}
		as = append(as, a)
	}
	return as, info
}

// TestModelAPILimitsThroughTheRelay: the per-session request rate and the
// per-group daily token budget trip for calls made from inside the real
// container, answered in the model API's own error shape; the budget is
// the group's (a new session of the group is refused too, another group is
// not) and both refusals are audited.
func TestModelAPILimitsThroughTheRelay(t *testing.T) {
	up := newFakeModelAPI(t)
	// Each fake Messages answer costs 17 tokens (12 in, 5 out): the budget
	// of 20 lets two calls start and refuses the third. 4 requests a minute
	// (burst 4): the fourth call passes, the fifth is refused.
	c := startCoreWith(t, coreOptions{
		Config: dockerConfig(t, fmt.Sprintf("[llm]\nupstream = %q\nca_file = %q\nrequests_per_minute = 4\ndaily_tokens = 20\n", up.URL, up.caFile(t))),
		Setup: func(h home.Dir) {
			if err := keychain.NewFileStore(h.CredentialsDir()).Set(keychain.LLMPlugin, keychain.LLMKeyAPI, []byte("sk-ant-api03-limits")); err != nil {
				t.Fatal(err)
			}
		},
	})
	as, first := llmCalls(t, c, "main", "post", "post", "post", "get", "get")
	want := []struct {
		status int
		body   string
	}{
		{200, "hello from the fake model"},
		{200, "hello from the fake model"},
		{429, `"type":"rate_limit_error"`},
		{200, "claude-test-1"},
		{429, `"type":"rate_limit_error"`},
	}
	for i, w := range want {
		if as[i].Status != w.status || !strings.Contains(as[i].Body, w.body) || !strings.HasPrefix(strings.TrimSpace(as[i].Body), `{`) {
			t.Errorf("call %d: %d %q; want %d with %s", i+1, as[i].Status, as[i].Body, w.status, w.body)
		}
	}
	if !strings.Contains(as[2].Body, "daily token budget") || !strings.Contains(as[4].Body, "model API requests a minute") {
		t.Errorf("the refusals do not say which limit: %q, %q", as[2].Body, as[4].Body)
	}

	// The budget is the group's: a fresh session of main is refused at
	// once, while group other still gets an answer.
	as, _ = llmCalls(t, c, "main", "post")
	if as[0].Status != 429 || !strings.Contains(as[0].Body, "daily token budget") {
		t.Errorf("a new session of the spent group: %d %q; want the budget refusal", as[0].Status, as[0].Body)
	}
	as, _ = llmCalls(t, c, "other", "post")
	if as[0].Status != 200 {
		t.Errorf("group other: %d %q; want 200", as[0].Status, as[0].Body)
	}

	up.mu.Lock()
	forwarded := len(up.seen)
	up.mu.Unlock()
	if forwarded != 4 { // two Messages calls and a model list from main, one call from other
		t.Errorf("the model API got %d requests; want 4 (refused calls must not be forwarded)", forwarded)
	}
	got := map[string]int{}
	for _, e := range c.Audit(t) {
		if e.Session == first.ID && e.Stage == "llm" {
			got[e.Code]++
		}
	}
	if got["BUDGET_EXCEEDED"] != 1 || got["RATE_LIMITED"] != 1 {
		t.Errorf("audit codes for session %s: %v; want one BUDGET_EXCEEDED and one RATE_LIMITED", first.ID, got)
	}
}
