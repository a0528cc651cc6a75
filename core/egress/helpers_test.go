package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/egress"
	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// waitFor bounds a wait that must end: a negative bound only (the test
// fails if it is reached), never a measured duration.
const waitFor = 10 * time.Second

// recorder keeps the point's records.
type recorder struct {
	mu   sync.Mutex
	recs []egress.Record
	ch   chan egress.Record
}

func newRecorder() *recorder { return &recorder{ch: make(chan egress.Record, 100)} }

func (r *recorder) record(rec egress.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	r.ch <- rec
}

// next waits for the next record.
func (r *recorder) next(t *testing.T) egress.Record {
	t.Helper()
	select {
	case rec := <-r.ch:
		return rec
	case <-time.After(waitFor):
		t.Fatal("no record")
		return egress.Record{}
	}
}

// none fails if a record is waiting.
func (r *recorder) none(t *testing.T) {
	t.Helper()
	select {
	case rec := <-r.ch:
		t.Fatalf("unexpected record %+v", rec)
	default:
	}
}

// newPoint starts a point with o, records into the returned recorder, and
// points the SDK at it (the env variable, as the core sets it for a
// handler: the descriptor number of the plugin's end, here in this very
// process).
func newPoint(t *testing.T, o egress.Options) (*egress.Point, *recorder, *testutil.Buffer) {
	t.Helper()
	rec := newRecorder()
	logs := &testutil.Buffer{}
	if o.Plugin == "" {
		o.Plugin = "weather"
	}
	o.Record = rec.record
	o.Logger = slogTo(logs)
	p, err := egress.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	t.Setenv(pluginproto.EnvEgressFD, strconv.Itoa(int(p.PluginEnd().Fd())))
	return p, rec, logs
}

// fakeResolver answers from a table and counts its calls; a name not in
// the table is "no such host". With strict set, any call fails the test.
type fakeResolver struct {
	mu     sync.Mutex
	answer map[string][][]netip.Addr // successive answers; the last repeats
	calls  map[string]int
	strict *testing.T // if set, any call fails this test
}

func (f *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.strict != nil {
		f.strict.Errorf("the resolver was asked for %s", host)
	}
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	n := f.calls[host]
	f.calls[host]++
	as, ok := f.answer[host]
	if !ok || network != "ip" {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return as[min(n, len(as)-1)], nil
}

func (f *fakeResolver) count(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[host]
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// fakeDialer stands for the internet: it records each address it is asked
// for, and connects those of routes to a real listener on loopback (so the
// relay runs over real TCP), failing the others.
type fakeDialer struct {
	mu     sync.Mutex
	routes map[string]string // "ip:port" asked -> listener address
	asked  []string
}

func (f *fakeDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	f.asked = append(f.asked, addr)
	to, ok := f.routes[addr]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("fake internet: no route to %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

func (f *fakeDialer) dialled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// server is a TCP server on 127.0.0.1: for each connection it reads until
// the client's half-close, then answers "got N: " and what it read, and
// closes.
type server struct {
	ln    net.Listener
	conns chan net.Conn // each accepted connection, if hold
	hold  bool          // keep connections open (no answer) instead
	wg    sync.WaitGroup
}

func newServer(t *testing.T, hold bool) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, conns: make(chan net.Conn, 100), hold: hold}
	s.wg.Add(1)
	accepting := make(chan struct{})
	go func() {
		defer s.wg.Done()
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if s.hold {
				s.conns <- c
				continue
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				b, _ := io.ReadAll(c)
				fmt.Fprintf(c, "got %d: %s", len(b), b)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepting // no send on conns after it is closed
		close(s.conns)
		for c := range s.conns {
			c.Close()
		}
		s.wg.Wait()
	})
	return s
}

func (s *server) addr() string { return s.ln.Addr().String() }

func (s *server) port() uint16 { return s.ln.Addr().(*net.TCPAddr).AddrPort().Port() }

// exchange sends msg on c, half-closes, and returns the whole answer.
func exchange(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(waitFor))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dial is plugin.Dial with a bound.
func dial(address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	return plugin.Dial(ctx, "tcp", address)
}

// refusedWith checks that err is the point's refusal with code.
func refusedWith(t *testing.T, err error, code string) *plugin.EgressError {
	t.Helper()
	var ee *plugin.EgressError
	if !errors.As(err, &ee) || ee.Code != code {
		t.Fatalf("error %v, want a refusal %s", err, code)
	}
	return ee
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
