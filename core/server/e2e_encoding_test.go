package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/install"
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
)

// payer is a built-in test plugin with one high-risk tool whose arguments
// hold numbers: what the user approves must reach every surface as it
// runs, digit for digit.
type payer struct{}

const payerManifest = `{
  "description": "test payments", "version": "1.0.0", "app_compat": ">=0.1.0", "author": {"name": "tests"},
  "provides": {"channels": [], "tools": [
    {"name": "payer_send", "description": "send money", "risk_level": "high",
     "arguments_schema": {"type": "object", "additionalProperties": false, "required": ["amount"], "properties": {
       "amount": {"type": "number"}, "fee": {"type": "number"}, "memo": {"type": "string", "maxLength": 100}}}}
  ]},
  "subscribes": []
}`

func (payer) Init(context.Context, map[string]any, plugin.Services) error { return nil }
func (payer) Shutdown(context.Context) error                              { return nil }
func (payer) Invoke(context.Context, *plugin.Request) (map[string]any, error) {
	return map[string]any{"sent": true}, nil
}

// TestConfirmationEncodedOnce: a confirmation is encoded once, by the
// core, and every surface gets those bytes. Its arguments — a number past
// float64's precision, a decimal with a trailing zero — reach the watch
// stream and an out-of-process surface plugin byte for byte as the
// control API shows them and as they run; and the plugin's payload is the
// very line member the watch stream carries. (Before, the core turned the
// payload into a map of float64s and encoded it again: the stream and the
// plugin showed 9007199254740992 and 1.5 for an approval of
// 9007199254740993 and 1.50.)
func TestConfirmationEncodedOnce(t *testing.T) {
	c := startCoreWith(t, coreOptions{
		Config: confirmConfig + "[plugins.phone]\nsurface = true\n",
		Builtins: func(bs []loader.Builtin) []loader.Builtin {
			return append(bs, loader.Builtin{Name: "payer", Manifest: []byte(payerManifest), New: func(loader.Env) plugin.Handler { return payer{} }})
		},
		Setup: func(h home.Dir) {
			m := strings.Replace(kitManifest("phone", plugin.TopicConfirmationRequested.Name()), `"channels": []`, `"channels": [], "capabilities": ["surface"]`, 1)
			if _, err := install.Install(h, kitSource(t, "phone", m), install.Options{}); err != nil {
				t.Fatal(err)
			}
		},
	})
	w := watchRaw(t, c)
	s := c.Session(t, "main")
	startIPC(t, s.Socket, "tool.invoke.payer_send", `{"amount": 9007199254740993, "fee": 1.50, "memo": "rent <May>"}`)
	const args = `{"amount":9007199254740993,"fee":1.50,"memo":"rent \u003cMay\u003e"}`

	line := w.find(t, "confirmation.requested", func(l watchLine) bool { return l.Type == api.WatchConfirmationRequested })
	var shown api.Confirmation
	if err := json.Unmarshal(line.Confirmation, &shown); err != nil {
		t.Fatal(err)
	}
	if string(shown.Arguments) != args {
		t.Errorf("the watch stream shows the arguments %s, want them as they run: %s", shown.Arguments, args)
	}
	listed, err := c.Client.Confirmations(context.Background(), false)
	if err != nil || len(listed) != 1 || string(listed[0].Arguments) != args {
		t.Fatalf("GET /v1/confirmations: %+v, %v", listed, err)
	}

	var got []plugin.Event
	waitFor(t, "the phone's confirmation.requested", func() bool {
		got = eventsOf(t, c, "phone", plugin.TopicConfirmationRequested.Name())
		return len(got) > 0
	})
	conf, err := plugin.TopicConfirmationRequested.Decode(&got[0])
	if err != nil {
		t.Fatal(err)
	}
	if string(conf.Arguments) != args {
		t.Errorf("the surface plugin got the arguments %s, want %s", conf.Arguments, args)
	}
	if !bytes.Equal(got[0].Payload, line.Confirmation) {
		t.Errorf("the plugin's payload and the watch line's confirmation differ: one encoding should reach both\nplugin %s\nwatch  %s", got[0].Payload, line.Confirmation)
	}
}

// watchLine is a watch line with its member as the stream wrote it.
type watchLine struct {
	Type         string          `json:"type"`
	Confirmation json.RawMessage `json:"confirmation"`
}

// rawLines reads a watch stream over the control socket and keeps each
// line as written.
type rawLines struct {
	mu    sync.Mutex
	lines []watchLine
}

// watchRaw starts a watch whose lines a test needs as bytes, once its
// snapshot has come.
func watchRaw(t *testing.T, c *testCore) *rawLines {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", c.Home.ControlSocket())
	}}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://carapace/v1/watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	r := &rawLines{}
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l watchLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				r.mu.Lock()
				r.lines = append(r.lines, l)
				r.mu.Unlock()
			}
		}
	}()
	r.find(t, "the snapshot", func(l watchLine) bool { return l.Type == api.WatchSnapshot })
	return r
}

// find waits for the first line match accepts.
func (r *rawLines) find(t *testing.T, what string, match func(watchLine) bool) watchLine {
	t.Helper()
	var found watchLine
	waitFor(t, what+" on the watch stream", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, l := range r.lines {
			if match(l) {
				found = l
				return true
			}
		}
		return false
	})
	return found
}
