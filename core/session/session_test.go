package session

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/ipc"
	"github.com/carapace-dev/carapace/ipc/zmtp"
)

func TestCache(t *testing.T) {
	h1, h2 := [32]byte{1}, [32]byte{2}
	c := newCache(time.Minute)
	if st, _ := c.join("a", h1, []byte("r1")); st != joinNew {
		t.Fatalf("first sighting = %v", st)
	}
	if st, _ := c.join("a", h2, []byte("r2")); st != joinConflict {
		t.Fatalf("different request, same correlation = %v", st)
	}
	if st, f := c.join("a", h1, []byte("r2")); st != joinWaiting || f != nil {
		t.Fatalf("resend while running = %v %q", st, f)
	}
	if ws := c.deliver("a", []byte("pending"), false); len(ws) != 2 {
		t.Fatalf("pending goes to %d waiters, want 2", len(ws))
	}
	if st, f := c.join("a", h1, []byte("r3")); st != joinWaiting || string(f[0]) != "pending" {
		t.Fatalf("late joiner gets %v %q, want the pending frame", st, f)
	}
	if ws := c.deliver("a", []byte("final"), true); len(ws) != 3 {
		t.Fatalf("final goes to %d waiters, want 3", len(ws))
	}
	if st, f := c.join("a", h1, []byte("r4")); st != joinDone || string(f[0]) != "final" {
		t.Fatalf("resend after the answer = %v %q", st, f)
	}
}

func TestCacheBounds(t *testing.T) {
	c := newCache(time.Minute)
	c.maxN = 3
	for i := 0; i < 10; i++ {
		corr := string(rune('a' + i))
		c.join(corr, [32]byte{}, []byte("r"))
		c.deliver(corr, []byte("x"), true)
	}
	if len(c.entries) != 3 || len(c.order)-c.head != 3 {
		t.Fatalf("entries %d order %d, want 3", len(c.entries), len(c.order)-c.head)
	}
	// An expired answer is forgotten: the correlation is new again.
	c = newCache(time.Nanosecond)
	c.join("a", [32]byte{}, []byte("r"))
	c.deliver("a", []byte("x"), true)
	time.Sleep(time.Millisecond)
	if st, _ := c.join("a", [32]byte{}, []byte("r")); st != joinNew {
		t.Fatalf("after ttl = %v, want joinNew", st)
	}
	// Running requests are never evicted, however many finish around them.
	c = newCache(time.Minute)
	c.maxN = 1
	c.join("run", [32]byte{}, []byte("r"))
	for i := 0; i < 5; i++ {
		corr := string(rune('a' + i))
		c.join(corr, [32]byte{}, []byte("r"))
		c.deliver(corr, []byte("x"), true)
	}
	if st, _ := c.join("run", [32]byte{}, []byte("r2")); st != joinWaiting {
		t.Fatalf("running request evicted: %v", st)
	}
}

// countingPipeline answers every request with its count of Handle calls.
type countingPipeline struct {
	calls atomic.Int64
	delay time.Duration
}

func (p *countingPipeline) Handle(_ context.Context, s *Session, req *ipc.Request, send func([]byte, bool)) {
	n := p.calls.Add(1)
	time.Sleep(p.delay)
	b, _ := json.Marshal(ipc.Response{Type: ipc.TypeResponse, Correlation: req.Correlation, Group: s.Group, Payload: ipc.Payload{Result: json.RawMessage(`{"n":` + string(rune('0'+n)) + `}`)}})
	send(b, true)
}

func (p *countingPipeline) Reject(s *Session, corr string, e *ipc.Error, send func([]byte, bool)) {
	b, _ := json.Marshal(ipc.Response{Type: ipc.TypeResponse, Correlation: corr, Group: s.Group, Payload: ipc.Payload{Error: e}})
	send(b, true)
}

type memAudit struct {
	mu sync.Mutex
	es []audit.Entry
}

func (m *memAudit) Write(e *audit.Entry) error {
	m.mu.Lock()
	m.es = append(m.es, *e)
	m.mu.Unlock()
	return nil
}

func (m *memAudit) count(stage, outcome string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range m.es {
		if e.Stage == stage && e.Outcome == outcome {
			n++
		}
	}
	return n
}

func newManager(t *testing.T, p Handler, a Auditor) *Manager {
	t.Helper()
	dir, err := os.MkdirTemp("", "cs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := home.Dir(dir)
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	m := NewManager(Options{Home: h, Pipeline: p, Audit: a})
	t.Cleanup(m.CloseAll)
	return m
}

func dealer(t *testing.T, socket string) zmq4.Socket {
	t.Helper()
	d := zmq4.NewDealer(context.Background(), zmq4.WithDialerMaxRetries(0))
	if err := d.Dial(zmtp.Scheme + "://" + socket); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestResendRunsOnce(t *testing.T) {
	p := &countingPipeline{delay: 200 * time.Millisecond}
	m := newManager(t, p, nil)
	info, err := m.Open("main", "none")
	if err != nil {
		t.Fatal(err)
	}
	wire := []byte(`{"topic":"tool.invoke.x","correlation":"c1","arguments":{}}`)
	// Two connections send the same request: the second joins the first.
	d1, d2 := dealer(t, info.Socket), dealer(t, info.Socket)
	for _, d := range []zmq4.Socket{d1, d2} {
		if err := d.Send(zmq4.NewMsg(wire)); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []zmq4.Socket{d1, d2} {
		msg, err := d.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(msg.Frames[0]), `"n":1`) {
			t.Fatalf("answer %s, want the first run's", msg.Frames[0])
		}
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("handled %d times, want 1", n)
	}
	// A different request with the same correlation is refused.
	if err := d1.Send(zmq4.NewMsg([]byte(`{"topic":"tool.invoke.y","correlation":"c1","arguments":{}}`))); err != nil {
		t.Fatal(err)
	}
	msg, _ := d1.Recv()
	if !strings.Contains(string(msg.Frames[0]), "already used for a different request") {
		t.Fatalf("reused correlation: %s", msg.Frames[0])
	}
}

func TestOpenClose(t *testing.T) {
	a := &memAudit{}
	m := newManager(t, &countingPipeline{}, a)
	if _, err := m.Open("../etc", "none"); err == nil {
		t.Fatal("bad group accepted")
	}
	info, err := m.Open("main", "none")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(info.Socket)
	if err != nil || st.Mode().Perm() != 0o666 || st.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket %v %v", st, err)
	}
	if err := m.Close(info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(info.Socket); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
	if err := m.Close(info.ID); err == nil {
		t.Fatal("closing twice succeeded")
	}
	if a.count(audit.StageSession, audit.OutcomeOpened) != 1 || a.count(audit.StageSession, audit.OutcomeClosed) != 1 {
		t.Fatalf("audit %+v", a.es)
	}
}

func TestTransportRejectionAudited(t *testing.T) {
	a := &memAudit{}
	m := newManager(t, &countingPipeline{}, a)
	info, err := m.Open("main", "none")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", info.Socket)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("\x00", 64)))
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for a.count(audit.StageSession, audit.OutcomeRejected) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no rejection audited: %+v", a.es)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.es {
		if e.Outcome == audit.OutcomeRejected && (e.Session != info.ID || !strings.HasPrefix(e.Reason, "transport: ")) {
			t.Fatalf("rejection entry %+v", e)
		}
	}
}

func TestMaxSessions(t *testing.T) {
	m := newManager(t, &countingPipeline{}, nil)
	m.opts.MaxSessions = 2
	for i := 0; i < 2; i++ {
		if _, err := m.Open("main", "none"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Open("main", "none"); err == nil || !strings.Contains(err.Error(), "too many sessions") {
		t.Fatalf("third session: %v", err)
	}
	socks, _ := os.ReadDir(m.opts.Home.SessionsDir())
	if len(socks) != 2 || m.Len() != 2 {
		t.Fatalf("%d sockets, %d sessions; want 2 and 2", len(socks), m.Len())
	}
}

// zmqReaders counts zmq4's per-connection reader goroutines.
func zmqReaders() int {
	buf := make([]byte, 1<<22)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "routerQReader).listen")
}

func TestCloseUnderFloodLeaksNoGoroutines(t *testing.T) {
	m := newManager(t, &countingPipeline{delay: 50 * time.Millisecond}, nil)
	info, err := m.Open("main", "none")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		d := dealer(t, info.Socket)
		for j := 0; j < 50; j++ { // far more than the session handles at once
			d.Send(zmq4.NewMsg([]byte(`{"topic":"tool.invoke.x","correlation":"c` + strconv.Itoa(i*100+j) + `","arguments":{}}`)))
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for zmqReaders() < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d readers started", zmqReaders())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := m.Close(info.ID); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for zmqReaders() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d zmq4 reader goroutines left after the session closed", zmqReaders())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Reached is zero until the agent reaches the core: a bare connection to
// the session's socket is enough (on Apple's runtime, the relay's
// connect), and so is MarkReached; another session's contact is not this
// session's. The first contact's time stays.
func TestReached(t *testing.T) {
	m := newManager(t, &countingPipeline{}, &memAudit{})
	a, err := m.Open("main", "docker")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Open("main", "docker")
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Open("main", "docker")
	if err != nil {
		t.Fatal(err)
	}
	reached := func(id string) time.Time {
		for _, i := range m.List() {
			if i.ID == id {
				return i.Reached
			}
		}
		t.Fatalf("session %s not listed", id)
		return time.Time{}
	}
	for _, id := range []string{a.ID, b.ID, c.ID} {
		if !reached(id).IsZero() {
			t.Fatalf("session %s reached before anything connected", id)
		}
	}
	conn, err := net.Dial("unix", a.Socket) // a connection, no byte sent
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for reached(a.ID).IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("a connection to the socket did not mark the session reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
	first := reached(a.ID)
	m.MarkReached(b.ID)
	m.MarkReached("s-unknown") // ignored
	m.MarkReached(a.ID)
	if reached(b.ID).IsZero() {
		t.Error("MarkReached did not mark the session reached")
	}
	if got := reached(a.ID); !got.Equal(first) {
		t.Errorf("a later contact moved Reached from %v to %v", first, got)
	}
	if !reached(c.ID).IsZero() {
		t.Error("another session's contact marked this one reached")
	}
}

// TestCloseAllWaitsForACloseUnderWay: a session another goroutine is
// closing when CloseAll begins (a client that left as the core stops) is
// closed and observed before CloseAll returns, so that the core's own
// "closed" audit entry, written next, is the last.
func TestCloseAllWaitsForACloseUnderWay(t *testing.T) {
	dir := t.TempDir()
	h := home.Dir(dir)
	if err := h.Ensure(); err != nil {
		t.Fatal(err)
	}
	observing, release := make(chan struct{}), make(chan struct{})
	m := NewManager(Options{Home: h, Pipeline: &countingPipeline{}, Observe: func(_ Info, opened bool) {
		if !opened {
			close(observing)
			<-release
		}
	}})
	info, err := m.Open("main", "none")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = m.Close(info.ID) }()
	<-observing // the Close is under way: the session is out of the map
	done := make(chan struct{})
	go func() { m.CloseAll(); close(done) }()
	select {
	case <-done:
		t.Fatal("CloseAll returned while a Close was still under way")
	case <-time.After(300 * time.Millisecond): // a bound on a negative, not a timing assumption
	}
	close(release)
	<-done
}

// A reserved session's socket listens, but the session is not listed and
// nothing sent on it is handled until Activate, which runs first before
// it handles what was sent meanwhile; Release removes the socket of one
// never activated.
func TestReserveActivateRelease(t *testing.T) {
	p := &countingPipeline{}
	m := newManager(t, p, nil)
	r, err := m.Reserve("main", "docker")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(r.Socket()); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("reserved socket: %v %v", fi, err)
	}
	if n := m.Len(); n != 0 || len(m.List()) != 0 {
		t.Fatalf("a reserved session is listed: %d", n)
	}
	if _, ok := m.State(r.ID()); ok {
		t.Fatal("a reserved session has state before Activate")
	}
	// Sent before the claim: held, not handled.
	d := dealer(t, r.Socket())
	if err := d.Send(zmq4.NewMsg([]byte(`{"topic":"tool.invoke.x","correlation":"c1","arguments":{}}`))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // a negative: nothing may handle it meanwhile
	if n := p.calls.Load(); n != 0 {
		t.Fatalf("a reserved session handled %d messages", n)
	}
	var firstSaw bool
	var handledBefore int64 = -1
	info, err := m.Activate(r, func(i Info) {
		_, firstSaw = m.State(i.ID)
		handledBefore = p.calls.Load()
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != r.ID() || !firstSaw || handledBefore != 0 || m.Len() != 1 {
		t.Fatalf("activated %+v (state seen by first: %v, messages handled before it: %d), %d listed", info, firstSaw, handledBefore, m.Len())
	}
	// Positive control: the held message is handled once activated.
	msg, err := d.Recv()
	if err != nil || !strings.Contains(string(msg.Frames[0]), `"n":1`) {
		t.Fatalf("the held message's answer: %v %v", msg, err)
	}
	if err := m.Close(info.ID); err != nil {
		t.Fatal(err)
	}

	r2, err := m.Reserve("main", "docker")
	if err != nil {
		t.Fatal(err)
	}
	m.Release(r2)
	if _, err := os.Stat(r2.Socket()); !os.IsNotExist(err) {
		t.Errorf("a released reservation's socket is still there: %v", err)
	}
	if m.Len() != 0 {
		t.Errorf("%d sessions after a release", m.Len())
	}
}
