package confirm

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestWhoHears: a confirmation's story, told by the gate alone — audited,
// then published, in order, for each change; a refused decision audited
// with who tried what; arguments too large for an event left out of the
// published confirmation (not of the control API's list).
func TestWhoHears(t *testing.T) {
	rec := &recorder{}
	g := New(rec.options(Options{Timeout: time.Minute}))
	large := []byte(`{"body":"` + strings.Repeat("x", MaxEventArguments) + `"}`)
	tk, err := g.Request(Request{Session: "s", Group: "main", Tool: "send", Correlation: "c-1", ArgsHash: hashA, Arguments: large, Display: large})
	if err != nil {
		t.Fatal(err)
	}
	id := tk.ID()
	if _, err := g.Decide(api.Decision{ID: id, Approve: true, ArgsHash: hashA, Surface: "cli", Decider: "alice"}); err != nil {
		t.Fatal(err)
	}
	_, err = g.Decide(api.Decision{ID: id, Approve: true, ArgsHash: hashA, Surface: "telegram", Decider: "42"})
	var decided *ErrDecided
	if !errors.Is(err, api.ErrConflict) || !errors.As(err, &decided) {
		t.Fatalf("a late approval: %v, want api.ErrConflict wrapping ErrDecided", err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	var story []string
	for _, e := range rec.audited {
		if e.Confirmation != id || e.Group != "main" || e.Stage != audit.StageConfirm || e.Topic != "tool.invoke.send" {
			t.Errorf("audited %+v: not this confirmation's", e)
		}
		story = append(story, e.Outcome+": "+e.Reason)
	}
	want := []string{
		"pending: waits for the user until ",
		"approved: decided on cli by alice",
		"rejected: approval on telegram by 42 refused: confirmation " + id + " is already decided: approved (cli, alice)",
	}
	if len(story) != len(want) {
		t.Fatalf("audited %q, want %q", story, want)
	}
	for i := range want {
		if !strings.HasPrefix(story[i], want[i]) {
			t.Errorf("audit entry %d: %q, want %q", i, story[i], want[i])
		}
	}
	if strings.Join(rec.topics, " ") != "requested resolved" {
		t.Fatalf("published %q, want requested then resolved", rec.topics)
	}
	req, res := rec.published[0], rec.published[1]
	if req.ID != id || !req.Pending() || !req.ArgumentsOmitted || req.Arguments != nil || req.Correlation != "c-1" {
		t.Errorf("published request %+v: want it pending, its large arguments left out", req)
	}
	if res.Decision != "approved" || res.Surface != "cli" || res.Decider != "alice" || res.DecidedAt == nil {
		t.Errorf("published resolution %+v", res)
	}
	if list := g.List(true); len(list) != 1 || list[0].ArgumentsOmitted || !bytes.Equal(list[0].Arguments, large) {
		t.Errorf("the control API's list left the arguments out: omitted %v", list[0].ArgumentsOmitted)
	}
}

// TestDecideErrors: the one Decide speaks the control API's errors, so
// that every surface hears the same, and keeps this package's.
func TestDecideErrors(t *testing.T) {
	rec := &recorder{}
	g := New(rec.options(Options{Timeout: time.Minute}))
	canonical := []byte(`{"key":"-----BEGIN RSA PRIVATE KEY-----\nx"}`)
	display, hidden := Display(canonical)
	tk, err := g.Request(Request{Session: "s", Group: "main", Tool: "send", ArgsHash: hashA, Arguments: canonical, Display: display, Hidden: hidden})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		d        api.Decision
		api, own error
		text     string
	}{
		{"unknown id", api.Decision{ID: "0123456789abcdef0123456789abcdef", ArgsHash: hashA, Surface: "cli"}, api.ErrNotFound, ErrNotFound, "no confirmation"},
		{"no hash", api.Decision{ID: tk.ID(), Surface: "cli"}, api.ErrInvalid, ErrInvalid, "args_hash"},
		{"another hash", api.Decision{ID: tk.ID(), ArgsHash: hashB, Surface: "cli"}, api.ErrConflict, ErrMismatch, "differ"},
		{"approve what was hidden", api.Decision{ID: tk.ID(), Approve: true, ArgsHash: hashA, Surface: "telegram"}, api.ErrConflict, ErrHidden,
			"carapace confirm approve --raw " + api.ShortID(tk.ID())},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.Decide(tt.d)
			if !errors.Is(err, tt.api) || !errors.Is(err, tt.own) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("Decide: %v, want %v and %v, saying %q", err, tt.api, tt.own, tt.text)
			}
		})
	}
	if c, _ := g.Get(tk.ID()); !c.Pending() {
		t.Fatalf("a refused decision decided: %+v", c)
	}
	rec.mu.Lock()
	refused := 0
	for _, e := range rec.audited {
		if e.Outcome == audit.OutcomeRejected {
			refused++
		}
	}
	rec.mu.Unlock()
	if refused != 3 {
		t.Errorf("%d refused decisions audited, want 3 (all but the unknown id)", refused)
	}
}

// TestRaw: the arguments as they run are read only while pending, and
// reading them is audited when the display hides something.
func TestRaw(t *testing.T) {
	rec := &recorder{}
	g := New(rec.options(Options{Timeout: time.Minute}))
	canonical := []byte(`{"key":"-----BEGIN RSA PRIVATE KEY-----\nx"}`)
	display, hidden := Display(canonical)
	secret, err := g.Request(Request{Session: "s", Group: "main", Tool: "send", ArgsHash: hashA, Arguments: canonical, Display: display, Hidden: hidden})
	if err != nil {
		t.Fatal(err)
	}
	plain := request(t, g, "s2", "main", hashB)
	audited := func() int { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.audited) }
	before := audited()
	if raw, err := g.Raw(plain.ID()); err != nil || !raw.Raw || audited() != before {
		t.Errorf("raw arguments of a plain display: %+v, %v, %d entries audited", raw, err, audited()-before)
	}
	if raw, err := g.Raw(secret.ID()); err != nil || !bytes.Equal(raw.Arguments, canonical) || !raw.Raw || audited() != before+1 {
		t.Errorf("raw arguments of a hidden display: %s, %v, %d entries audited; want them whole and 1", raw.Arguments, err, audited()-before)
	}
	if _, err := g.Raw("0123456789abcdef0123456789abcdef"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("an unknown id: %v", err)
	}
	if _, err := g.Decide(api.Decision{ID: secret.ID(), ArgsHash: hashA, Surface: "cli"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Raw(secret.ID()); !errors.Is(err, api.ErrConflict) {
		t.Errorf("a decided one: %v, want api.ErrConflict", err)
	}
}

// TestDependencies: the gate tells its story through the interfaces it
// declares (Auditor, Publisher); the core wires the real audit log and
// the bus. So it links neither the core's assembly nor the bus nor a
// transport, and of core/audit it names only the entry and its words,
// never the log itself.
func TestDependencies(t *testing.T) {
	const mod = "github.com/carapace-dev/carapace/"
	const why = "core/confirm declares what it needs (Auditor, Publisher); core/server wires them"
	deptest.Checker{
		Package: mod + "core/confirm",
		Forbidden: map[string]string{
			mod + "core/server/...":  why,
			mod + "core/events/...":  why,
			mod + "core/control/...": why,
			mod + "core/plugin/...":  why,
			mod + "core/loader/...":  why,
		},
		Want: []string{mod + "core/api", mod + "core/audit"},
	}.Check(t)

	// Of core/audit: the entry and its constants, not the log.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	uses := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "audit" {
					uses[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	if !uses["Entry"] {
		t.Fatal("core/confirm names no audit.Entry: the scan is wrong")
	}
	for name := range uses {
		if name != "Entry" && !strings.HasPrefix(name, "Stage") && !strings.HasPrefix(name, "Outcome") {
			t.Errorf("core/confirm uses audit.%s: it may name only the entry and its constants (its Auditor is the log)", name)
		}
	}
}
