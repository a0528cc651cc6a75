package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugin/plugintest"
	"github.com/carapace-dev/carapace/ipc"
)

// logBuffer is a log sink safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *logBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// handlerFixture is a handler under the harness, with its storage folder and log.
type handlerFixture struct {
	h   *Handler
	hs  *plugintest.Harness
	dir string
	log *logBuffer
}

// setup starts a handler over a fresh storage folder with cfg (nil: {}).
func newFixture(t *testing.T, cfg map[string]any) *handlerFixture {
	t.Helper()
	return newFixtureIn(t, t.TempDir(), cfg)
}

func newFixtureIn(t *testing.T, dir string, cfg map[string]any) *handlerFixture {
	t.Helper()
	buf := &logBuffer{}
	h := New(dir, slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	hs := plugintest.New(t, h, plugintest.WithConfig(jsonConfig(t, cfg)))
	return &handlerFixture{h: h, hs: hs, dir: dir, log: buf}
}

// normCfg passes a config through JSON, as the core does (numbers become
// json.Number).
func jsonConfig(t *testing.T, cfg map[string]any) map[string]any {
	t.Helper()
	if cfg == nil {
		return map[string]any{}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return plugintest.Args(t, string(b))
}

// store stores one entry and returns its id, failing the test on error.
func (f *handlerFixture) store(t *testing.T, typ, content string, opts ...plugintest.RequestOption) string {
	t.Helper()
	v := plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", map[string]any{"type": typ, "content": content}, opts...))
	id, _ := v["id"].(string)
	if !strings.HasPrefix(id, "mem-") {
		t.Fatalf("memory_store returned id %q; want mem-…", id)
	}
	return id
}

// search runs memory_search and returns its results.
func (f *handlerFixture) search(t *testing.T, args map[string]any, opts ...plugintest.RequestOption) []map[string]any {
	t.Helper()
	v := plugintest.AssertSuccess(t, f.hs.Invoke("memory_search", args, opts...))
	list, ok := v["results"].([]any)
	if !ok {
		t.Fatalf("memory_search: results is %T; want an array", v["results"])
	}
	if got := jsonInt(t, v["count"]); got != len(list) {
		t.Errorf("memory_search: count %d, %d results", got, len(list))
	}
	out := make([]map[string]any, len(list))
	for i, r := range list {
		out[i], _ = r.(map[string]any)
	}
	return out
}

func resultIDs(rs []map[string]any) []string {
	var out []string
	for _, r := range rs {
		id, _ := r["id"].(string)
		out = append(out, id)
	}
	return out
}

func jsonInt(t *testing.T, v any) int {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("%v is not an integer", v)
	}
	return int(i)
}

// wantToolError checks that r is a ToolError with the handler code and field.
func wantToolError(t *testing.T, r plugintest.Result, code, field string) plugintest.Result {
	t.Helper()
	plugintest.AssertError(t, r, ipc.CodeHandlerError)
	if r.HandlerCode != code {
		t.Errorf("handler code %q; want %q (%s)", r.HandlerCode, code, r)
	}
	if r.Field != field {
		t.Errorf("field %q; want %q (%s)", r.Field, field, r)
	}
	if r.Retriable {
		t.Errorf("retriable; want not (%s)", r)
	}
	if strings.TrimSpace(r.Message) == "" {
		t.Errorf("empty message")
	}
	return r
}

func TestConformance(t *testing.T) {
	plugintest.Conformance(t, ".", New(t.TempDir(), nil))
}

func TestConformanceWithConfig(t *testing.T) {
	cfg := jsonConfig(t, map[string]any{
		"storage_path": t.TempDir(), "max_brief_entries": 10, "max_brief_chars": 500,
		"purge_superseded_days": 30, "embedding_provider": "none",
		"max_stores_per_session": 3, "max_supersedes_per_session": 0, "max_deletes_per_session": 1,
	})
	plugintest.Conformance(t, ".", New(t.TempDir(), nil), plugintest.WithConfig(cfg))
}

func TestHandlerStoreBehavioralFromType(t *testing.T) {
	f := newFixture(t, nil)
	when := time.Date(2026, 2, 18, 14, 30, 0, 0, time.UTC)
	for i, tc := range []struct {
		typ        string
		behavioral bool
	}{
		{"preference", true},
		{"fact", false},
		{"instruction", true},
		{"context", false},
		{"correction", true},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			r := f.hs.Invoke("memory_store", map[string]any{"type": tc.typ, "content": "about " + tc.typ, "tags": []any{"Work", "x"}},
				plugintest.WithTime(when))
			v := plugintest.AssertSuccess(t, r)
			if v["type"] != tc.typ || v["behavioral"] != tc.behavioral {
				t.Errorf("type %v behavioral %v; want %s %v", v["type"], v["behavioral"], tc.typ, tc.behavioral)
			}
			if v["created_at"] != "2026-02-18T14:30:00Z" {
				t.Errorf("created_at %v; want the request's time", v["created_at"])
			}
			if _, ok := v["supersedes"]; ok {
				t.Errorf("supersedes present in %s without supersedes", r.JSON)
			}
			if got := jsonInt(t, v["stores_left"]); got != 20-(i+1) {
				t.Errorf("stores_left %d; want %d", got, 20-(i+1))
			}
			res := f.search(t, map[string]any{"type": tc.typ})
			if len(res) != 1 || res[0]["id"] != v["id"] || res[0]["behavioral"] != tc.behavioral || res[0]["content"] != "about "+tc.typ {
				t.Errorf("search by type found %v", res)
			}
		})
	}
}

func TestHandlerProvenanceFromRequest(t *testing.T) {
	f := newFixture(t, nil)
	when := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	// The core refuses arguments outside the schema; the handler must ignore
	// such keys all the same.
	r := f.hs.Invoke("memory_store", map[string]any{
		"type": "fact", "content": "The dog is named Luna",
		"session": "sess-forged", "session_id": "sess-forged", "group": "victim", "provenance": map[string]any{"group": "victim"},
		"created_at": "2000-01-01T00:00:00Z", "behavioral": true, "id": "mem-chosen",
	}, plugintest.WithGroup("home"), plugintest.WithSession("sess-real"), plugintest.WithTime(when))
	v := plugintest.AssertSuccess(t, r)
	if v["id"] == "mem-chosen" || v["behavioral"] != false || v["created_at"] != "2026-03-01T08:00:00Z" {
		t.Errorf("store took provenance or derived fields from the arguments: %s", r.JSON)
	}
	res := f.search(t, map[string]any{}, plugintest.WithGroup("home"))
	if len(res) != 1 {
		t.Fatalf("group home has %d entries; want 1", len(res))
	}
	if res[0]["session_id"] != "sess-real" || res[0]["created_at"] != "2026-03-01T08:00:00Z" {
		t.Errorf("provenance %v %v; want the request's", res[0]["session_id"], res[0]["created_at"])
	}
	if got := f.search(t, map[string]any{}, plugintest.WithGroup("victim")); len(got) != 0 {
		t.Errorf("the group named in the arguments got entries: %v", got)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "victim.sqlite")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a database was created for the group named in the arguments: %v", err)
	}
	// Search arguments cannot pick the group either.
	if got := f.search(t, map[string]any{"group": "home"}, plugintest.WithGroup("other")); len(got) != 0 {
		t.Errorf("search with a group argument read another group: %v", got)
	}
}

func TestHandlerSearch(t *testing.T) {
	f := newFixture(t, nil)
	base := time.Now().UTC().Add(-time.Hour)
	at := func(i int) plugintest.RequestOption {
		return plugintest.WithTime(base.Add(time.Duration(i) * time.Minute))
	}
	add := func(i int, typ, content string, tags ...string) string {
		t.Helper()
		args := map[string]any{"type": typ, "content": content}
		if tags != nil {
			args["tags"] = tags
		}
		v := plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", args, at(i)))
		return v["id"].(string)
	}
	coffee := add(1, "preference", "Likes strong black coffee in the morning", "food", "morning")
	tea := add(2, "fact", "Drinks green tea in the afternoon", "food")
	deploy := add(3, "instruction", "Always run the tests before a deploy", "work", "deploy")
	proj := add(4, "context", "Working on the Carapace memory plugin", "work")

	for _, tc := range []struct {
		name string
		args map[string]any
		want []string // in order, or nil for "as a set"
		set  []string
	}{
		{"recent first", map[string]any{}, []string{proj, deploy, tea, coffee}, nil},
		{"limit", map[string]any{"limit": 2}, []string{proj, deploy}, nil},
		{"words", map[string]any{"query": "coffee morning"}, []string{coffee}, nil},
		{"word in two", map[string]any{"query": "tea"}, []string{tea}, nil},
		{"tags AND", map[string]any{"tags": []string{"food", "morning"}}, []string{coffee}, nil},
		{"tag", map[string]any{"tags": []string{"work"}}, nil, []string{deploy, proj}},
		{"type", map[string]any{"type": "instruction"}, []string{deploy}, nil},
		{"type and query", map[string]any{"type": "fact", "query": "coffee"}, []string{}, nil},
		{"no match", map[string]any{"query": "zebra"}, []string{}, nil},
		{"query syntax is words", map[string]any{"query": `"coffee" AND morning* OR NEAR(x) -tea ^col: {}`}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := f.search(t, tc.args)
			got := resultIDs(res)
			switch {
			case tc.want != nil:
				if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
					t.Errorf("got %v; want %v", got, tc.want)
				}
			case tc.set != nil:
				slices.Sort(got)
				want := slices.Sorted(slices.Values(tc.set))
				if !slices.Equal(got, want) {
					t.Errorf("got %v; want %v", got, want)
				}
			}
			for _, r := range res {
				for _, k := range []string{"id", "type", "content", "behavioral", "tags", "created_at", "relevance_score", "session_id"} {
					if _, ok := r[k]; !ok {
						t.Errorf("result %v lacks %q", r["id"], k)
					}
				}
				if _, ok := r["tags"].([]any); !ok {
					t.Errorf("tags of %v is %T; want an array", r["id"], r["tags"])
				}
				s, err := r["relevance_score"].(json.Number).Float64()
				if err != nil || s < 0 || s > 1 {
					t.Errorf("relevance_score %v outside 0–1", r["relevance_score"])
				}
			}
		})
	}
}

func TestHandlerSupersession(t *testing.T) {
	f := newFixture(t, nil)
	a := f.store(t, "preference", "Prefers TypeScript for new projects")
	other := f.store(t, "preference", "Prefers tabs", plugintest.WithGroup("other"))

	r := f.hs.Invoke("memory_store", map[string]any{"type": "preference", "content": "Prefers Go for new projects", "supersedes": a})
	v := plugintest.AssertSuccess(t, r)
	b, _ := v["id"].(string)
	if v["supersedes"] != a {
		t.Errorf("supersedes %v; want %s", v["supersedes"], a)
	}
	if got := resultIDs(f.search(t, map[string]any{})); !slices.Equal(got, []string{b}) {
		t.Errorf("current entries %v; want [%s]", got, b)
	}
	all := f.search(t, map[string]any{"include_superseded": true})
	found := false
	for _, e := range all {
		if e["id"] == a {
			found = true
			if e["superseded_by"] != b {
				t.Errorf("superseded_by %v; want %s", e["superseded_by"], b)
			}
		}
		if e["id"] == b {
			if _, ok := e["superseded_by"]; ok {
				t.Errorf("current entry has superseded_by %v", e["superseded_by"])
			}
		}
	}
	if !found {
		t.Errorf("include_superseded did not return %s: %v", a, resultIDs(all))
	}

	c := ""
	for _, tc := range []struct {
		name       string
		supersedes string
		opts       []plugintest.RequestOption
		code       string
		mention    string
	}{
		{"already superseded", a, nil, CodeAlreadySuperseded, b},
		{"unknown", "mem-00000000-0000-0000-0000-000000000000", nil, CodeNotFound, "memory_search"},
		{"not an id", "robert'); DROP TABLE memory_entries;--", nil, CodeNotFound, ""},
		{"other group's", other, nil, CodeNotFound, ""},
		{"own from other group", b, []plugintest.RequestOption{plugintest.WithGroup("other")}, CodeNotFound, ""},
		{"group without a file", b, []plugintest.RequestOption{plugintest.WithGroup("nofile")}, CodeNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.hs.Invoke("memory_store", map[string]any{"type": "preference", "content": "x", "supersedes": tc.supersedes}, tc.opts...)
			wantToolError(t, r, tc.code, "supersedes")
			if tc.mention != "" && !strings.Contains(r.Message, tc.mention) {
				t.Errorf("message %q does not mention %s", r.Message, tc.mention)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(f.dir, "nofile.sqlite")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused supersede created a database: %v", err)
	}

	// The chain goes on from the current entry.
	v = plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", map[string]any{"type": "preference", "content": "Prefers Rust now", "supersedes": b}))
	c, _ = v["id"].(string)
	if got := resultIDs(f.search(t, map[string]any{})); !slices.Equal(got, []string{c}) {
		t.Errorf("current entries %v; want [%s]", got, c)
	}
	// Deleting the head makes the one it replaced current again.
	v = plugintest.AssertSuccess(t, f.hs.Invoke("memory_delete", map[string]any{"id": c}))
	if v["deleted"] != c {
		t.Errorf("deleted %v; want %s", v["deleted"], c)
	}
	if got, _ := v["restored"].([]any); len(got) != 1 || got[0] != b {
		t.Errorf("restored %v; want [%s]", v["restored"], b)
	}
	if got := resultIDs(f.search(t, map[string]any{})); !slices.Equal(got, []string{b}) {
		t.Errorf("current entries after delete %v; want [%s]", got, b)
	}
	// The other group's entry is untouched throughout.
	if got := resultIDs(f.search(t, map[string]any{}, plugintest.WithGroup("other"))); !slices.Equal(got, []string{other}) {
		t.Errorf("other group %v; want [%s]", got, other)
	}
}

func TestHandlerDelete(t *testing.T) {
	f := newFixture(t, nil)
	a := f.store(t, "fact", "Lives in Lisbon")
	v := plugintest.AssertSuccess(t, f.hs.Invoke("memory_delete", map[string]any{"id": a}))
	if v["deleted"] != a {
		t.Errorf("deleted %v; want %s", v["deleted"], a)
	}
	if got, ok := v["restored"].([]any); !ok || len(got) != 0 {
		t.Errorf("restored %v (%T); want []", v["restored"], v["restored"])
	}
	if got := f.search(t, map[string]any{"include_superseded": true}); len(got) != 0 {
		t.Errorf("entries after delete: %v", resultIDs(got))
	}
	for _, tc := range []struct {
		name string
		id   string
		opts []plugintest.RequestOption
	}{
		{"again", a, nil},
		{"unknown", "mem-nope", nil},
		{"group without a file", a, []plugintest.RequestOption{plugintest.WithGroup("empty")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantToolError(t, f.hs.Invoke("memory_delete", map[string]any{"id": tc.id}, tc.opts...), CodeNotFound, "id")
		})
	}
}

func TestHandlerGroupIsolation(t *testing.T) {
	f := newFixture(t, nil)
	secret := f.store(t, "instruction", "Group B secret plan: launch on Friday", plugintest.WithGroup("b"))
	f.store(t, "fact", "Group A fact", plugintest.WithGroup("a"))
	inA := plugintest.WithGroup("a")

	for _, args := range []map[string]any{{}, {"query": "secret plan Friday"}, {"include_superseded": true}, {"type": "instruction"}} {
		for _, r := range f.search(t, args, inA) {
			if r["id"] == secret || strings.Contains(r["content"].(string), "Group B") {
				t.Errorf("group a found group b's entry with %v", args)
			}
		}
	}
	v := plugintest.AssertSuccess(t, f.hs.Invoke("memory_brief", map[string]any{"include_provenance": true}, inA))
	if md := v["markdown"].(string); strings.Contains(md, "Group B") || jsonInt(t, v["entry_count"]) != 1 {
		t.Errorf("group a's brief shows group b: %s", md)
	}
	b, err := f.h.MemoryBrief(t.Context(), "a")
	if err != nil || strings.Contains(claudemd.Brief(b), "Group B") || b.EntryCount != 1 {
		t.Errorf("MemoryBrief(a) = %+v, %v", b, err)
	}
	wantToolError(t, f.hs.Invoke("memory_store", map[string]any{"type": "instruction", "content": "x", "supersedes": secret}, inA), CodeNotFound, "supersedes")
	wantToolError(t, f.hs.Invoke("memory_delete", map[string]any{"id": secret}, inA), CodeNotFound, "id")
	if got := resultIDs(f.search(t, map[string]any{}, plugintest.WithGroup("b"))); !slices.Equal(got, []string{secret}) {
		t.Errorf("group b after group a's attempts: %v", got)
	}
}

func TestHandlerBadGroup(t *testing.T) {
	f := newFixture(t, nil)
	for _, g := range []string{"", "..", "../x", "a/b", "a.b", strings.Repeat("g", 65)} {
		for _, tool := range []string{"memory_search", "memory_brief"} {
			r := f.hs.Invoke(tool, nil, plugintest.WithGroup(g))
			plugintest.AssertError(t, r, ipc.CodePluginError)
		}
		r := f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "x"}, plugintest.WithGroup(g))
		plugintest.AssertError(t, r, ipc.CodePluginError)
		if _, err := f.h.MemoryBrief(t.Context(), g); err == nil {
			t.Errorf("MemoryBrief(%q) succeeded", g)
		}
	}
	ents, _ := os.ReadDir(f.dir)
	if len(ents) != 0 {
		t.Errorf("bad groups left files: %v", ents)
	}
	// A refused call did not use the budget.
	v := plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "x"}))
	if jsonInt(t, v["stores_left"]) != 19 {
		t.Errorf("stores_left %v; want 19", v["stores_left"])
	}
}

func TestHandlerArguments(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"memory_store", map[string]any{"content": "x"}, "type"},
		{"memory_store", map[string]any{"type": 5, "content": "x"}, "type"},
		{"memory_store", map[string]any{"type": "secret", "content": "x"}, "type"},
		{"memory_store", map[string]any{"type": "fact"}, "content"},
		{"memory_store", map[string]any{"type": "fact", "content": "  \n"}, "content"},
		{"memory_store", map[string]any{"type": "fact", "content": []any{"x"}}, "content"},
		{"memory_store", map[string]any{"type": "fact", "content": "x", "tags": "x"}, "tags"},
		{"memory_store", map[string]any{"type": "fact", "content": "x", "tags": []any{1}}, "tags"},
		{"memory_store", map[string]any{"type": "fact", "content": "x", "supersedes": 7}, "supersedes"},
		{"memory_search", map[string]any{"query": 1}, "query"},
		{"memory_search", map[string]any{"type": "nope"}, "type"},
		{"memory_search", map[string]any{"limit": 0}, "limit"},
		{"memory_search", map[string]any{"limit": 101}, "limit"},
		{"memory_search", map[string]any{"limit": 1.5}, "limit"},
		{"memory_search", map[string]any{"limit": "5"}, "limit"},
		{"memory_search", map[string]any{"include_superseded": "yes"}, "include_superseded"},
		{"memory_search", map[string]any{"tags": []any{true}}, "tags"},
		{"memory_brief", map[string]any{"include_provenance": 1}, "include_provenance"},
		{"memory_delete", map[string]any{}, "id"},
		{"memory_delete", map[string]any{"id": ""}, "id"},
		{"memory_delete", map[string]any{"id": 3}, "id"},
	} {
		b, _ := json.Marshal(tc.args)
		t.Run(tc.tool+string(b), func(t *testing.T) {
			wantToolError(t, f.hs.Invoke(tc.tool, tc.args), CodeInvalidArgument, tc.field)
		})
	}
	// What only the store checks comes back the same way, worded for the agent.
	for _, tc := range []struct {
		args    map[string]any
		field   string
		message string
	}{
		{map[string]any{"type": "fact", "content": "nul \x00 byte"}, "content", "content contains a NUL character. Correct it"},
		{map[string]any{"type": "fact", "content": "x", "tags": []any{"ok", "new\nline"}}, "tags", "Invalid tags: tag 2 contains a control character (U+000A)."},
		{map[string]any{"type": "fact", "content": "x", "tags": []any{"\u202eevil"}}, "tags", "Invalid tags: tag 1 contains a bidirectional"},
	} {
		r := wantToolError(t, f.hs.Invoke("memory_store", tc.args), CodeInvalidArgument, tc.field)
		if !strings.HasPrefix(r.Message, tc.message) {
			t.Errorf("message %q; want it to start with %q", r.Message, tc.message)
		}
	}
	// None of the refused stores was counted.
	v := plugintest.AssertSuccess(t, f.hs.Invoke("memory_store", map[string]any{"type": "fact", "content": "x"}))
	if jsonInt(t, v["stores_left"]) != 19 {
		t.Errorf("stores_left %v; want 19", v["stores_left"])
	}
}

func TestHandlerUnknownTool(t *testing.T) {
	f := newFixture(t, nil)
	for _, tool := range []string{"memory_purge", "echo", "memory_store "} {
		r := f.hs.Invoke(tool, nil)
		plugintest.AssertError(t, r, ipc.CodeHandlerError)
		if !strings.Contains(r.Message, "memory_store, memory_search") || r.HandlerCode != string(ipc.CodeHandlerError) {
			t.Errorf("%q: %s", tool, r)
		}
	}
}

func TestHandlerShutdownClosesDatabases(t *testing.T) {
	f := newFixture(t, nil)
	f.store(t, "fact", "one", plugintest.WithGroup("a"))
	f.store(t, "fact", "two", plugintest.WithGroup("b"))
	f.h.mu.Lock()
	n := len(f.h.dbs)
	f.h.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d databases open; want 2", n)
	}
	f.hs.Shutdown()
	f.h.mu.Lock()
	n = len(f.h.dbs)
	f.h.mu.Unlock()
	if n != 0 {
		t.Errorf("%d databases open after Shutdown", n)
	}
	plugintest.AssertError(t, f.hs.Invoke("memory_search", nil, plugintest.WithGroup("a")), ipc.CodePluginError)
	if _, err := f.h.MemoryBrief(t.Context(), "a"); !errors.Is(err, errClosed) {
		t.Errorf("MemoryBrief after Shutdown: %v; want errClosed", err)
	}
}

func TestHandlerLogsNoContent(t *testing.T) {
	dir := t.TempDir()
	seedGroup(t, dir, "g", func(db *DB) {
		old := time.Now().AddDate(0, -6, 0)
		e := seedPut(t, db, NewEntry{Type: "fact", Content: "hunter2 is the password", Session: "s", Group: "g", Time: old})
		seedPut(t, db, NewEntry{Type: "fact", Content: "hunter3 is the password", Supersedes: e.ID, Session: "s", Group: "g", Time: old.Add(time.Hour)})
	})
	f := newFixtureIn(t, dir, nil)
	f.store(t, "fact", "hunter4 secretive content", plugintest.WithGroup("g"))
	plugintest.AssertSuccess(t, f.hs.Invoke("memory_brief", nil, plugintest.WithGroup("g")))
	f.hs.Shutdown()
	if out := f.log.String(); strings.Contains(out, "hunter") {
		t.Errorf("the log holds memory content:\n%s", out)
	}
}

// seed creates group's database in dir and fills it with f.
func seedGroup(t testing.TB, dir, group string, f func(db *DB)) {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(dir, group+".sqlite"), group)
	if err != nil {
		t.Fatal(err)
	}
	f(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func seedPut(t testing.TB, db *DB, n NewEntry) Entry {
	t.Helper()
	e, err := db.Put(context.Background(), n)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return e
}

// toolErr returns err as a *plugin.ToolError, failing the test if it is not.
func asToolError(t *testing.T, err error) *plugin.ToolError {
	t.Helper()
	te, ok := plugin.AsToolError(err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *plugin.ToolError", err, err)
	}
	return te
}

func TestHandlerBeforeInit(t *testing.T) {
	h := New(t.TempDir(), nil)
	for _, tool := range []string{"memory_store", "memory_search", "memory_brief", "memory_delete"} {
		plugintest.AssertError(t, plugintest.Invoke(t, h, tool, map[string]any{"type": "fact", "content": "x", "id": "mem-x"}), ipc.CodePluginError)
	}
	if _, err := h.MemoryBrief(t.Context(), "main"); err == nil {
		t.Error("MemoryBrief before Init succeeded")
	}
}
