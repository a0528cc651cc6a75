package plugintest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/ipc"
)

// greeter is a small handler, as a plugin author would write it.
type greeter struct {
	svc plugin.Services
}

var _ plugin.Handler = (*greeter)(nil)

func (g *greeter) Init(_ context.Context, _ map[string]any, svc plugin.Services) error {
	g.svc = svc
	return nil
}

func (g *greeter) Shutdown(context.Context) error { return nil }

func (g *greeter) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	switch req.Tool {
	case "greet":
		name, _ := req.Arguments["name"].(string)
		times := int64(1)
		if n, ok := req.Arguments["times"].(json.Number); ok {
			times, _ = n.Int64()
		}
		return map[string]any{"greeting": "Hello, " + name + "!", "times": times}, nil
	case "whoami":
		info, err := g.svc.GetSessionInfo(ctx) // scoped to this request
		if err != nil {
			return nil, err
		}
		return map[string]any{"group": info.Group, "session": info.ID}, nil
	case "connect":
		token, err := g.svc.ReadCredential(ctx, "token")
		if err != nil {
			return nil, plugin.NewToolError("the greeter has no token: run carapace auth set --plugin greeter --key token", false)
		}
		// A bug: the token ends up in the result.
		return map[string]any{"connected": true, "via": "https://api.example/?t=" + token}, nil
	}
	return nil, plugin.NewToolError("greeter does not provide "+req.Tool, false)
}

// exampleT stands in for the *testing.T of a real test, printing what the
// test would report. In your tests, pass your t.
type exampleT struct {
	testing.TB // only the methods below are used
}

func (*exampleT) Helper()                           {}
func (*exampleT) Cleanup(func())                    {}
func (*exampleT) Logf(format string, args ...any)   { fmt.Printf("LOG: "+format+"\n", args...) }
func (*exampleT) Errorf(format string, args ...any) { fmt.Printf("FAIL: "+format+"\n", args...) }
func (*exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf("FATAL: "+format, args...)) }

func ExampleNew() {
	t := &exampleT{} // in a test: the test's t

	h := plugintest.New(t, &greeter{}) // calls Init now, Shutdown when the test ends
	r := h.Invoke("greet", plugintest.Args(t, `{"name": "Ada", "times": 2}`))
	data := plugintest.AssertSuccess(t, r)

	fmt.Println(data["greeting"])
	fmt.Println(data["times"] == json.Number("2")) // numbers arrive as json.Number
	fmt.Println(string(r.JSON))
	// Output:
	// Hello, Ada!
	// true
	// {"greeting":"Hello, Ada!","times":2}
}

func ExampleHarness_Invoke() {
	t := &exampleT{}
	h := plugintest.New(t, &greeter{})

	// The request's scope comes from options, never from arguments.
	r := h.Invoke("whoami", nil, plugintest.WithGroup("family"), plugintest.WithSession("s-42"))
	fmt.Println(plugintest.AssertSuccess(t, r))

	// A tool the handler does not provide.
	r = h.Invoke("wave", nil)
	plugintest.AssertError(t, r, ipc.CodeHandlerError)
	fmt.Println(r.Message)
	// Output:
	// map[group:family session:s-42]
	// greeter does not provide wave
}

func ExampleInvoke() {
	t := &exampleT{}

	// One call, without Init, for handlers that need none.
	r := plugintest.Invoke(t, &greeter{}, "greet", map[string]any{"name": "Grace"})
	fmt.Println(plugintest.AssertSuccess(t, r)["greeting"])
	// Output:
	// Hello, Grace!
}

func ExampleResult() {
	t := &exampleT{}

	// A handler that fails with a plain Go error: the agent sees a generic
	// PLUGIN_ERROR, the author sees the cause in Detail.
	r := plugintest.Invoke(t, &broken{}, "anything", nil)
	fmt.Println(r.Code, "-", r.Message)
	fmt.Println(r.Detail)
	// Output:
	// PLUGIN_ERROR - Internal plugin error
	// open /var/lib/notes.db: permission denied
}

type broken struct{ greeter }

func (*broken) Invoke(context.Context, *plugin.Request) (map[string]any, error) {
	return nil, fmt.Errorf("open /var/lib/notes.db: permission denied")
}

func ExampleAssertNoLeakOf() {
	t := &exampleT{}
	creds := plugintest.NewFakeCredentials(map[string]string{"token": "gt-51f0c2a9"})
	h := plugintest.New(t, &greeter{}, plugintest.WithServices(&plugintest.Services{Credentials: creds}))

	r := h.Invoke("connect", nil)
	clean := plugintest.AssertNoLeakOf(t, r, creds) // names the path, never prints the secret
	fmt.Println("clean:", clean)
	fmt.Println("reads:", creds.Reads())
	// Output:
	// FAIL: credential leak: result.via: contains the value of credential "token"
	// clean: false
	// reads: [token]
}

func ExampleAssertNoCredentialLeak() {
	t := &exampleT{}

	// Patterns the core's sanitiser knows count as leaks, as do the secrets
	// passed in.
	plugintest.AssertNoCredentialLeak(t, map[string]any{
		"header": "Authorization: Bearer eyJhbGciOi",
		"note":   "password is hunter2",
		"ok":     "nothing to see",
	}, "hunter2")
	// Output:
	// FAIL: credential leak: value.header: looks like a credential (authorization, bearer); the core would redact it
	// FAIL: credential leak: value.note: contains secret #1
}

func ExampleServices() {
	t := &exampleT{}
	at := time.Date(2026, 3, 5, 9, 0, 0, 0, time.UTC)
	svc := &plugintest.Services{
		Plugin: "greeter",
		Audit: []plugin.AuditEntry{
			{Time: at, Group: "family", Topic: "tool.invoke.greet", Outcome: "ok"},
			{Time: at, Group: "work", Topic: "tool.invoke.greet", Outcome: "error"},
		},
	}
	h := plugintest.New(t, &auditor{}, plugintest.WithServices(svc))

	// GetAuditLog only ever returns the calling request's group.
	r := h.Invoke("history", nil, plugintest.WithGroup("family"))
	fmt.Println(plugintest.AssertSuccess(t, r)["entries"])
	// Output:
	// 1
}

// auditor reports how many audit entries it may see.
type auditor struct{ svc plugin.Services }

func (a *auditor) Init(_ context.Context, _ map[string]any, svc plugin.Services) error {
	a.svc = svc
	return nil
}

func (a *auditor) Shutdown(context.Context) error { return nil }

func (a *auditor) Invoke(ctx context.Context, _ *plugin.Request) (map[string]any, error) {
	entries, err := a.svc.GetAuditLog(ctx, plugin.AuditFilter{LastN: 10})
	if err != nil {
		return nil, err
	}
	return map[string]any{"entries": len(entries)}, nil
}

func ExampleConformance() {
	// In the plugin's package, one test checks the handler against the
	// plugin's manifest.json and skills/ (here the current folder):
	//
	//	func TestConformance(t *testing.T) {
	//		creds := plugintest.NewFakeCredentials(map[string]string{"token": "test-token"})
	//		plugintest.Conformance(t, ".", &greeter{},
	//			plugintest.WithServices(&plugintest.Services{Credentials: creds}),
	//			plugintest.WithSampleArgs("greet", map[string]any{"name": "Ada"}))
	//	}
	var t *testing.T // the test's t
	if t != nil {
		plugintest.Conformance(t, ".", &greeter{})
	}
}
