package zmtp

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
	"github.com/go-zeromq/zmq4"
)

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"ipc:///run/carapace/ipc.sock", "zipc:///run/carapace/ipc.sock"},
		{"/run/carapace/ipc.sock", "zipc:///run/carapace/ipc.sock"},
		{"zipc:///run/carapace/ipc.sock", "zipc:///run/carapace/ipc.sock"},
		{"ipc://relative.sock", ""},
		{"ipc://@abstract", ""},
		{"relative.sock", ""},
		{"tcp://127.0.0.1:5555", ""},
		{"inproc://x", ""},
		{"", ""},
		{"ipc:///a://b", ""},
		{"/a\x00b", ""},
	} {
		got, err := Endpoint(tc.in)
		if tc.want == "" {
			if err == nil || !errors.Is(err, ErrBadEndpoint) {
				t.Errorf("Endpoint(%q) = %q, %v; want ErrBadEndpoint", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Endpoint(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestRegister(t *testing.T) {
	if err := Register(Scheme, Options{}); err == nil {
		t.Fatal("registering zipc a second time succeeded")
	}
	found := false
	for _, name := range zmq4.Transports() {
		found = found || name == Scheme
	}
	if !found {
		t.Fatalf("%q not among zmq4 transports %q", Scheme, zmq4.Transports())
	}
	if o := (Options{}).withDefaults(); o.MaxFrame != 1<<20+64<<10 || o.MaxMessage != o.MaxFrame ||
		o.MaxFrames != 4 || o.HandshakeTimeout != 3*time.Second || o.WriteTimeout != 10*time.Second || o.MaxConns != 64 {
		t.Fatalf("defaults = %+v", o)
	}
}

// TestLazy checks that a Lazy scheme is registered on its first use, once,
// and that a second Lazy of the same scheme fails loudly rather than
// leaving a socket on the other's transport.
func TestLazy(t *testing.T) {
	registered := func(scheme string) bool { return slices.Contains(zmq4.Transports(), scheme) }
	const scheme = "zt-lazy"
	scheme1 := Lazy(scheme, New(Options{}))
	if registered(scheme) {
		t.Fatalf("%q registered before its first use", scheme)
	}
	for range 2 {
		if got := scheme1(); got != scheme {
			t.Fatalf("Lazy's function returned %q; want %q", got, scheme)
		}
	}
	if !registered(scheme) {
		t.Fatalf("%q not among zmq4 transports %q after its first use", scheme, zmq4.Transports())
	}
	defer func() {
		if r := fmt.Sprint(recover()); !strings.Contains(r, "register the "+scheme+" transport") {
			t.Fatalf("a second Lazy of %q: recovered %q; want a panic naming the scheme", scheme, r)
		}
	}()
	Lazy(scheme, New(Options{}))()
}

// TestRoundTripStripsIdentity: request/reply works over Endpoint(...), and
// the routing id the ROUTER sees is not the one the DEALER asked for.
func TestRoundTripStripsIdentity(t *testing.T) {
	ep, err := Endpoint(sockPath(t))
	if err != nil {
		t.Fatal(err)
	}
	r := router(t, ep)
	d := dealer(t, ep, zmq4.WithID(zmq4.SocketIdentity("forged-identity")))
	if err := d.Send(zmq4.NewMsgFrom([]byte{}, []byte("request"))); err != nil {
		t.Fatal(err)
	}
	m, err := recv(r, wait)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Frames) != 3 || string(m.Frames[2]) != "request" {
		t.Fatalf("router got %q", m.Frames)
	}
	id := m.Frames[0]
	if string(id) == "forged-identity" || len(id) == 0 {
		t.Fatalf("routing id %q: the peer chose it", id)
	}
	if err := r.Send(zmq4.NewMsgFrom(id, []byte{}, []byte("reply"))); err != nil {
		t.Fatal(err)
	}
	rep, err := recv(d, wait)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Frames) != 2 || string(rep.Frames[1]) != "reply" {
		t.Fatalf("dealer got %q", rep.Frames)
	}
}

// TestSharedIdentity: two DEALERs claiming the same identity. On plain zmq4
// "ipc://" the ROUTER writes each reply to both (attack 4, reproduced); on
// this transport each gets only its own.
func TestSharedIdentity(t *testing.T) {
	for _, tc := range []struct {
		name      string
		scheme    string
		patched   bool
		wantA     []string
		wantB     []string
		sameRoute bool
	}{
		{"zipc", Scheme, true, []string{"for-a"}, []string{"for-b"}, false},
		{"ipc unpatched", "ipc", false, []string{"for-a", "for-b"}, []string{"for-a", "for-b"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := tc.scheme + "://" + sockPath(t)
			r := router(t, ep)
			a := dealer(t, ep, zmq4.WithID(zmq4.SocketIdentity("same")))
			b := dealer(t, ep, zmq4.WithID(zmq4.SocketIdentity("same")))
			ids := map[string][]byte{}
			for _, s := range []struct {
				d    zmq4.Socket
				name string
			}{{a, "a"}, {b, "b"}} {
				if err := s.d.Send(zmq4.NewMsgString(s.name)); err != nil {
					t.Fatal(err)
				}
				m, err := recv(r, wait)
				if err != nil {
					t.Fatal(err)
				}
				ids[string(m.Frames[1])] = m.Frames[0]
			}
			if got := string(ids["a"]) == string(ids["b"]); got != tc.sameRoute {
				t.Fatalf("routing ids a=%q b=%q: shared=%v, want %v", ids["a"], ids["b"], got, tc.sameRoute)
			}
			for _, who := range []string{"a", "b"} {
				if err := r.Send(zmq4.NewMsgFrom(ids[who], []byte("for-"+who))); err != nil {
					t.Fatal(err)
				}
			}
			// Router.Send returns once every matching connection was
			// written, so a misrouted reply is already in flight; 500ms
			// is ample to see it arrive.
			if got := collect(t, a, len(tc.wantA)); !equal(got, tc.wantA) {
				t.Errorf("dealer a got %q, want %q", got, tc.wantA)
			}
			if got := collect(t, b, len(tc.wantB)); !equal(got, tc.wantB) {
				t.Errorf("dealer b got %q, want %q", got, tc.wantB)
			}
		})
	}
}

// collect receives n messages, then checks that no further one arrives
// within 500ms, and returns their first frames sorted by arrival.
func collect(t *testing.T, d zmq4.Socket, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		m, err := recv(d, wait)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		out = append(out, string(m.Frames[0]))
	}
	if m, err := recv(d, 500*time.Millisecond); err == nil {
		out = append(out, string(m.Frames[0]))
	}
	return out
}

func equal(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// TestImports keeps the package linkable into the tiny static ipc binary,
// on the platforms it runs on.
func TestImports(t *testing.T) {
	for _, goos := range []string{"linux", "darwin"} {
		deptest.Checker{
			GOOS: goos,
			CGO:  "0",
			AllowedImports: []string{
				"github.com/go-zeromq/zmq4", "github.com/go-zeromq/zmq4/transport",
				"github.com/carapace-dev/carapace/ipc/zmtp/wire",
				"net", "io", "bufio", "encoding/binary", "errors",
				"fmt", "sync", "sync/atomic", "time", "context",
				"os", "strings", "bytes",
			},
		}.Check(t)
	}
}
