package calendar

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/testutil/caldavserver"
)

var alice = caldavserver.User{Name: "alice", Password: "s3cret pass"}

// paris is the user's zone in these tests: daylight saving time ends on
// 2026-10-25.
func paris(t testing.TB) *time.Location {
	t.Helper()
	l, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// env is a Radicale with alice's calendar "work" (events) and list
// "tasks" (to-dos), and a handler on it in Europe/Paris.
type env struct {
	srv     *caldavserver.Server
	h       *Handler
	backend *CalDAV
	work    string // the calendar's URL
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := caldavserver.Start(t, alice)
	work := srv.MkCalendar(t, alice, "work", "VEVENT")
	srv.MkCalendar(t, alice, "tasks", "VTODO")
	h := New(Options{})
	svc := creds{caldavserverPassword: alice.Password}
	if err := h.Init(context.Background(), map[string]any{
		"caldav_url": srv.URL, "username": alice.Name, "time_zone": "Europe/Paris",
		"default_calendar": "work", "reminders_list": "tasks",
	}, svc); err != nil {
		t.Fatalf("Init: %v", err)
	}
	return &env{srv: srv, h: h, backend: h.backend.(*CalDAV), work: work}
}

// call invokes a tool and returns its result, failing on an error.
func (e *env) call(t *testing.T, tool string, args map[string]any) map[string]any {
	t.Helper()
	out, err := e.try(tool, args)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return out
}

// try invokes a tool as the core would: arguments through JSON, numbers
// as json.Number.
func (e *env) try(tool string, args map[string]any) (map[string]any, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return e.h.Invoke(ctx, &plugin.Request{Tool: tool, Arguments: m, Group: "main", Time: time.Now()})
}

// raw does an HTTP request to Radicale as alice and returns the status,
// the body and the ETag.
func (e *env) raw(t *testing.T, method, url, body string, header map[string]string) (int, string, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(alice.Name, alice.Password)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("ETag")
}

// creds is the core's credential service, as far as Init uses it.
type creds struct {
	plugin.Services
	caldavserverPassword string
}

func (c creds) ReadCredential(_ context.Context, key string) (string, error) {
	if key != CredentialKey || c.caldavserverPassword == "" {
		return "", plugin.ErrNoCredential
	}
	return c.caldavserverPassword, nil
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func events(t *testing.T, out map[string]any) []map[string]any {
	t.Helper()
	l, ok := out["events"].([]any)
	if !ok {
		t.Fatalf("no events in %v", out)
	}
	var evs []map[string]any
	for _, x := range l {
		evs = append(evs, x.(map[string]any))
	}
	return evs
}

func toolCode(err error) string {
	if te, ok := plugin.AsToolError(err); ok {
		return te.Code
	}
	return ""
}
