package plugintest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

// notes is the handler of testdata/notes, with knobs that break it in the
// ways Conformance must catch.
type notes struct {
	svc plugin.Services

	skip      string // a declared tool missing from the switch
	panicOn   string
	hangOn    string
	nilOn     string
	leakOn    string // the API key in the result
	shapedOn  string // a token-shaped string in the result
	reserved  string // a declared tool answered with a reserved code
	readExtra bool   // reads a credential the manifest does not declare
	initErr   error
	shutErr   error
	// unknown answers tools the switch does not know; nil: a ToolError.
	unknown func(tool string) (map[string]any, error)

	mu   sync.Mutex
	args map[string]map[string]any
}

var _ plugin.Handler = (*notes)(nil)

func (n *notes) Init(ctx context.Context, _ map[string]any, svc plugin.Services) error {
	if n.initErr != nil {
		return n.initErr
	}
	if _, err := svc.ReadCredential(ctx, "api-key"); err != nil {
		return plugin.NewInitError(plugin.CategoryAuth, err)
	}
	n.svc = svc
	return nil
}

func (n *notes) Shutdown(context.Context) error { return n.shutErr }

func (n *notes) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	n.mu.Lock()
	if n.args == nil {
		n.args = map[string]map[string]any{}
	}
	n.args[req.Tool] = req.Arguments
	n.mu.Unlock()
	key, err := n.svc.ReadCredential(ctx, "api-key")
	if err != nil {
		return nil, fmt.Errorf("read api-key: %w", err)
	}
	if n.readExtra {
		_, _ = n.svc.ReadCredential(ctx, "secret-x")
	}
	tool := req.Tool
	switch tool {
	case n.panicOn:
		panic("index out of range [3] with length 3")
	case n.hangOn:
		<-ctx.Done()
		return nil, ctx.Err()
	case n.nilOn:
		return nil, nil
	case n.leakOn:
		return map[string]any{"id": "n1", "debug": "POST https://notes.example/add key=" + key}, nil
	case n.shapedOn:
		return map[string]any{"id": "n1", "upstream": "ghp_abcdefghijklmnop1234"}, nil
	case n.reserved:
		return nil, &plugin.ToolError{Code: "RATE_LIMITED", Message: "slow down", Retriable: true}
	case n.skip:
		tool = "" // falls to the default below, like a tool missing from the switch
	}
	switch tool {
	case "add_note":
		if s, _ := req.Arguments["text"].(string); s == "" {
			return nil, plugin.NewToolError("text is empty", false)
		}
		return map[string]any{"id": "n1"}, nil
	case "search_notes":
		return map[string]any{"notes": []any{}, "count": 0}, nil
	case "delete_note":
		return nil, plugin.NewToolError("no note with id "+fmt.Sprint(req.Arguments["id"]), false)
	}
	if n.unknown != nil {
		return n.unknown(req.Tool)
	}
	return nil, plugin.NewToolError("notes does not provide "+req.Tool, false)
}

func notesCreds() *FakeCredentials {
	return NewFakeCredentials(map[string]string{"api-key": "nk-7Hq2Lm9Zp4", "backup-token": "bt-5Rw8Yx1Vc3"})
}

// conform runs Conformance on a fake test.
func conform(t *testing.T, dir string, h plugin.Handler, opts ...Option) *fakeT {
	t.Helper()
	return fake(t, func(ft *fakeT) { conformance(ft, dir, h, opts...) })
}

func ran(ft *fakeT) []string {
	var out []string
	for _, m := range ft.messages("log") {
		if _, sub, ok := strings.Cut(m, ": log: ran fake/"); ok {
			out = append(out, sub)
		}
	}
	return out
}

func TestConformancePasses(t *testing.T) {
	opts := []Option{WithServices(&Services{Credentials: notesCreds()}), WithConfig(map[string]any{"endpoint": "https://notes.example"})}
	Conformance(t, "testdata/notes", &notes{}, opts...) // the real thing, on the real test

	h := &notes{}
	ft := conform(t, "testdata/notes", h, opts...)
	mustPass(t, ft)
	want := "manifest init unknown_tool tools/add_note tools/search_notes tools/delete_note credentials skills shutdown"
	if got := strings.Join(ran(ft), " "); got != want {
		t.Errorf("subtests run: %s\nwant:           %s", got, want)
	}
	for tool, want := range map[string]string{
		"add_note":     `{"text":"example"}`,
		"search_notes": `{"limit":1,"query":"aa"}`,
		"delete_note":  `{"id":"123e4567-e89b-42d3-a456-426614174000"}`,
	} {
		if got := compact(h.args[tool]); got != want {
			t.Errorf("%s was called with %s; want %s", tool, got, want)
		}
	}
}

func TestConformanceSampleArgs(t *testing.T) {
	h := &notes{}
	mustPass(t, conform(t, "testdata/notes", h, WithServices(&Services{Credentials: notesCreds()}),
		WithSampleArgs("search_notes", map[string]any{"query": "milk", "limit": 5})))
	if got := compact(h.args["search_notes"]); got != `{"limit":5,"query":"milk"}` {
		t.Errorf("search_notes was called with %s; want the sample", got)
	}
	if got := fmt.Sprintf("%T", h.args["search_notes"]["limit"]); got != "json.Number" {
		t.Errorf("a sample's number reached the handler as %s; want json.Number", got)
	}
}

func TestConformanceCatchesBrokenPlugins(t *testing.T) {
	creds := func() Option { return WithServices(&Services{Credentials: notesCreds()}) }
	tests := []struct {
		name    string
		dir     string
		h       *notes
		opts    []Option
		want    []string // substrings of failures
		notRun  string   // a subtest that must not have run
		timeout bool
	}{
		{name: "tool missing from the switch", h: &notes{skip: "delete_note"},
			want: []string{"fake/tools/delete_note: error: delete_note is declared in manifest.json, but the handler answers it exactly as it answers an unknown tool (\"notes does not provide delete_note\")"}},
		{name: "tool missing, constant message", h: &notes{skip: "add_note", unknown: func(string) (map[string]any, error) {
			return nil, plugin.NewToolError("unknown tool", false)
		}}, want: []string{"fake/tools/add_note: error: add_note is declared in manifest.json, but the handler answers it exactly as it answers an unknown tool"}},
		{name: "panic", h: &notes{panicOn: "search_notes"},
			want: []string{`fake/tools/search_notes: error: search_notes with {"limit":1,"query":"aa"} failed with PLUGIN_ERROR`, "handler panicked: index out of range"}},
		{name: "timeout", h: &notes{hangOn: "add_note"}, opts: []Option{WithTimeout(50 * time.Millisecond)},
			want: []string{"fake/tools/add_note: error: add_note with", "failed with PLUGIN_TIMEOUT", "notes did not respond within 50ms"}},
		{name: "nil result", h: &notes{nilOn: "add_note"},
			want: []string{"fake/tools/add_note: error: add_note with", "was refused by the core: HANDLER_ERROR: Handler returned no result object"}},
		{name: "reserved code", h: &notes{reserved: "search_notes"},
			want: []string{"fake/tools/search_notes: error: search_notes returned a ToolError with the code RATE_LIMITED, which the core reserves"}},
		{name: "unknown tool succeeds", h: &notes{unknown: func(string) (map[string]any, error) { return map[string]any{}, nil }},
			want: []string{`fake/unknown_tool: error: the handler answered the unknown tool "plugintest_no_such_tool" with success {}`}},
		{name: "unknown tool plain error", h: &notes{unknown: func(t string) (map[string]any, error) { return nil, errors.New("no tool " + t) }},
			want: []string{"fake/unknown_tool: error: the handler refused the unknown tool \"plugintest_no_such_tool\" with PLUGIN_ERROR, not a *plugin.ToolError", "detail: no tool plugintest_no_such_tool"}},
		{name: "unknown tool panics", h: &notes{unknown: func(string) (map[string]any, error) { panic("unhandled") }},
			want: []string{"fake/unknown_tool: error: the handler refused the unknown tool", "handler panicked: unhandled"}},
		{name: "unknown tool reserved code", h: &notes{unknown: func(string) (map[string]any, error) {
			return nil, &plugin.ToolError{Code: "UNKNOWN_TOOL", Message: "no such tool"}
		}}, want: []string{"fake/unknown_tool: error: the handler refused the unknown tool with the code UNKNOWN_TOOL, which the core reserves"}},
		{name: "unknown tool without a message", h: &notes{unknown: func(string) (map[string]any, error) { return nil, plugin.NewToolError(" ", false) }},
			want: []string{"fake/unknown_tool: error: the handler refused the unknown tool with an empty message"}},
		{name: "leaks a credential", h: &notes{leakOn: "add_note"},
			want: []string{`fake/tools/add_note: error: credential leak: result.debug: contains the value of credential "api-key"`}},
		{name: "leaks a token", h: &notes{shapedOn: "search_notes"},
			want: []string{"fake/tools/search_notes: error: credential leak: result.upstream: the core's sanitiser had to redact a github-token"}},
		{name: "reads an undeclared credential", h: &notes{readExtra: true},
			want: []string{`fake/credentials: error: the handler read credential "secret-x", which manifest.json does not declare`}},
		{name: "init fails", h: &notes{initErr: plugin.NewInitError(plugin.CategoryNetwork, errors.New("unreachable"))},
			want: []string{"fake/init: fatal: Init failed (the agent would see NETWORK_ERROR): unreachable"}, notRun: "unknown_tool"},
		{name: "required credential missing", h: &notes{}, opts: []Option{WithServices(&Services{})},
			want: []string{`fake/init: fatal: the manifest marks credential "api-key" required`}, notRun: "tools/add_note"},
		{name: "config does not match", h: &notes{}, opts: []Option{WithConfig(map[string]any{"endpoint": 7})},
			want: []string{"fake/init: fatal: the config does not match the manifest's config_schema"}, notRun: "unknown_tool"},
		{name: "shutdown fails", h: &notes{shutErr: errors.New("flush: disk full")},
			want: []string{"fake/shutdown: error: Shutdown failed: flush: disk full"}},
		{name: "sample args off the schema", h: &notes{}, opts: []Option{WithSampleArgs("search_notes", map[string]any{"query": "Milk!", "limit": 5})},
			want: []string{`fake/tools/search_notes: fatal: the arguments {"limit":5,"query":"Milk!"} do not match the schema`}},
		{name: "sample args not JSON", h: &notes{}, opts: []Option{WithSampleArgs("add_note", map[string]any{"text": func() {}})},
			want: []string{"fake/tools/add_note: fatal: the arguments given with WithSampleArgs: arguments cannot be encoded as JSON"}},
		{name: "manifest does not load", dir: "testdata/broken", h: &notes{},
			want: []string{"fake/manifest: fatal: manifest.json does not load", `tool name "Bad.Name" must be snake_case`}, notRun: "init"},
		{name: "manifest missing", dir: "testdata/none", h: &notes{},
			want: []string{"fake/manifest: fatal: manifest.json does not load", "the plugin has no manifest.json"}, notRun: "init"},
		{name: "skills name an undeclared tool", dir: "testdata/badskills", h: &notes{},
			want: []string{
				"fake/skills: error: skills/badskills.md:5: heading \"archive_note\" looks like a tool name",
				"fake/skills: error: skills/badskills.md:7: tool.invoke.archive_note: the manifest declares no such tool",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir
			if dir == "" {
				dir = "testdata/notes"
			}
			ft := conform(t, dir, tt.h, append([]Option{creds()}, tt.opts...)...)
			mustFail(t, ft, tt.want...)
			if tt.notRun != "" {
				for _, r := range ran(ft) {
					if r == tt.notRun {
						t.Errorf("subtest %s ran after a fatal failure", r)
					}
				}
			}
			for _, f := range ft.failures() {
				for _, s := range []string{"nk-7Hq2Lm9Zp4", "bt-5Rw8Yx1Vc3", "ghp_abc"} {
					if strings.Contains(f, s) {
						t.Errorf("a failure prints a credential: %s", f)
					}
				}
			}
		})
	}
}

func TestSameRefusal(t *testing.T) {
	unknown := Result{Code: "HANDLER_ERROR", HandlerCode: "HANDLER_ERROR", Message: "x does not provide " + UnknownTool}
	tests := []struct {
		r    Result
		want bool
	}{
		{Result{Code: "HANDLER_ERROR", HandlerCode: "HANDLER_ERROR", Message: "x does not provide t"}, true},
		{Result{Code: "HANDLER_ERROR", HandlerCode: "HANDLER_ERROR", Message: "x does not provide " + UnknownTool}, true},
		{Result{Code: "HANDLER_ERROR", HandlerCode: "NOT_FOUND", Message: "x does not provide t"}, false},
		{Result{Code: "HANDLER_ERROR", HandlerCode: "HANDLER_ERROR", Message: "no note with id 1"}, false},
		{Result{Value: map[string]any{}}, false},
	}
	for i, tt := range tests {
		if got := sameRefusal(tt.r, unknown, "t"); got != tt.want {
			t.Errorf("case %d: sameRefusal = %v; want %v", i, got, tt.want)
		}
	}
}
