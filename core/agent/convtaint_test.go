package agent

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/provenance"
	"github.com/carapace-dev/carapace/core/session"
)

type auditLog struct {
	mu      sync.Mutex
	entries []audit.Entry
}

func (a *auditLog) Write(e *audit.Entry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, *e)
	return nil
}

func (a *auditLog) taints(session string) []audit.Entry {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []audit.Entry
	for _, e := range a.entries {
		if e.Stage == audit.StageTaint && e.Session == session {
			out = append(out, e)
		}
	}
	return out
}

// convRig is a Runner on a real home with a real session manager: what
// conversationTaint needs, without containers.
type convRig struct {
	t        *testing.T
	home     home.Dir
	sessions *session.Manager
	audit    *auditLog
	r        *Runner
}

func newConvRig(t *testing.T, h home.Dir, sessions *session.Manager) *convRig {
	t.Helper()
	a := &auditLog{}
	return &convRig{t: t, home: h, sessions: sessions, audit: a,
		r: New(Options{Home: h, Config: &config.Config{}, Audit: a, Sessions: sessions})}
}

// start opens a session of group main in conversation conv (its
// transcript there or not: resume) and returns it.
func (g *convRig) start(id string, resume bool) (session.Info, *provenance.Store) {
	g.t.Helper()
	info, err := g.sessions.Open("main", "docker")
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { _ = g.sessions.Close(info.ID) })
	g.r.startProvenance(info, "hello", nil, &convRef{id: id, resume: resume})
	s, _ := g.sessions.State(info.ID)
	return info, s.Provenance
}

// A session of a conversation that read untrusted output taints the
// conversation on disk at once; the next session resuming it starts
// tainted with the conversation's reason, audited — also under a Runner
// started afresh on the same home (a restarted core); another
// conversation does not (control). A new conversation (no transcript)
// clears the record once the session that wrote it has ended, and not
// before.
func TestConversationTaintCarriesOver(t *testing.T) {
	h := home.Dir(shortTemp(t))
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	sessions := session.NewManager(session.Options{Home: h})
	g := newConvRig(t, h, sessions)
	id, _ := conversation(t.TempDir(), "telegram", "main", "telegram:42")
	other, _ := conversation(t.TempDir(), "telegram", "main", "telegram:43")

	first, pv1 := g.start(id, false)
	if _, tainted := pv1.Tainted(); tainted {
		t.Fatal("the first session of a new conversation starts tainted")
	}
	at := time.Date(2026, 11, 27, 10, 42, 0, 0, time.UTC)
	pv1.Taint(provenance.Taint{Tool: "web_fetch", Source: "https://a.example/page", Time: at})
	// On disk the moment Taint returns: what the pipeline calls before it
	// answers the call.
	rec, found, err := lookupConv(t, h, id)
	if err != nil || !found || rec.Session != first.ID || rec.Source != "https://a.example/page" {
		t.Fatalf("the conversation's record after the taint: %+v, found %v, %v", rec, found, err)
	}

	second, pv2 := g.start(id, true)
	tn, tainted := pv2.Tainted()
	want := "this conversation read https://a.example/page at 10:42 UTC (web_fetch), in an earlier session"
	if !tainted || !strings.Contains(tn.Reason(), want) {
		t.Fatalf("a session resuming the tainted conversation: tainted %v, reason %q", tainted, tn.Reason())
	}
	if e := g.audit.taints(second.ID); len(e) != 1 || !strings.Contains(e[0].Reason, "session tainted from its start") ||
		!strings.Contains(e[0].Reason, first.ID) || !strings.Contains(e[0].Reason, want) {
		t.Fatalf("the resuming session's taint in the audit log: %+v", e)
	}
	if rec2, _, _ := lookupConv(t, h, id); rec2.Session != first.ID {
		t.Fatalf("the resuming session replaced the first taint: %+v", rec2)
	}

	_, pvOther := g.start(other, true)
	if _, tainted := pvOther.Tainted(); tainted {
		t.Fatal("a session of another conversation starts tainted")
	}

	// A restarted core: a new Runner on the same home.
	g2 := newConvRig(t, h, sessions)
	_, pv3 := g2.start(id, true)
	if tn, tainted := pv3.Tainted(); !tainted || !tn.Earlier {
		t.Fatalf("after a restart, the conversation's next session: tainted %v %+v", tainted, tn)
	}

	// Started anew while the session that tainted it still runs: the
	// record stays, and the session starts tainted.
	_, pvNew := g2.start(id, false)
	if _, tainted := pvNew.Tainted(); !tainted {
		t.Fatal("a new conversation started while its tainting session runs is untainted")
	}
	if err := sessions.Close(first.ID); err != nil {
		t.Fatal(err)
	}
	_, pvFresh := g2.start(id, false)
	if _, tainted := pvFresh.Tainted(); tainted {
		t.Fatal("a new conversation (no transcript) starts tainted by a stale record")
	}
	if _, found, _ := lookupConv(t, h, id); found {
		t.Fatal("the stale record is still there")
	}
	_, pvAfter := g2.start(id, true)
	if _, tainted := pvAfter.Tainted(); tainted {
		t.Fatal("the conversation is tainted after its record was cleared")
	}
}

// A session started by an untrusted event taints its conversation; an
// unreadable record taints the session (fail closed); a session of no
// conversation records nothing.
func TestConversationTaintFromAnEventAndUnreadable(t *testing.T) {
	h := home.Dir(shortTemp(t))
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	sessions := session.NewManager(session.Options{Home: h})
	g := newConvRig(t, h, sessions)
	id, _ := conversation(t.TempDir(), "mail", "main", "thread-1")

	info, err := sessions.Open("main", "docker")
	if err != nil {
		t.Fatal(err)
	}
	defer sessions.Close(info.ID)
	g.r.startProvenance(info, "hi", &provenance.Taint{Source: "the event message.inbound from mail (marked untrusted)", Time: time.Now()}, &convRef{id: id})
	if rec, found, err := lookupConv(t, h, id); !found || err != nil || rec.Session != info.ID || rec.Tool != "" {
		t.Fatalf("the untrusted event's conversation: %+v %v %v", rec, found, err)
	}

	bad, _ := conversation(t.TempDir(), "mail", "main", "thread-2")
	if err := os.WriteFile(filepath.Join(h.ConversationsDir(), bad+".json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, pv := g.start(bad, true)
	if tn, tainted := pv.Tainted(); !tainted || !strings.Contains(tn.Reason(), "unreadable") {
		t.Fatalf("a session over an unreadable record: tainted %v, %q", tainted, tn.Reason())
	}

	plain, err := sessions.Open("main", "docker")
	if err != nil {
		t.Fatal(err)
	}
	defer sessions.Close(plain.ID)
	g.r.startProvenance(plain, "hi", &provenance.Taint{Source: "x", Time: time.Now()}, nil)
	entries, err := os.ReadDir(h.ConversationsDir())
	if err != nil || len(entries) != 2 {
		t.Fatalf("records: %v %v, want the two above only", entries, err)
	}
}

// shortTemp is a temporary folder with a path short enough for the
// sessions' Unix sockets.
func shortTemp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "cv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// lookupConv reads conversation id's record as a restarted core would.
func lookupConv(t *testing.T, h home.Dir, id string) (provenance.ConversationTaint, bool, error) {
	t.Helper()
	c, err := provenance.NewConversations(h.ConversationsDir())
	if err != nil {
		t.Fatal(err)
	}
	return c.Lookup(id)
}
