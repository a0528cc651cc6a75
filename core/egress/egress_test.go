package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/carapace-dev/carapace/core/egress"
	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/plugin"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		class string // "" for public
	}{
		// Public: the positive controls.
		{"1.1.1.1", ""},
		{"8.8.8.8", ""},
		{"149.154.167.220", ""},
		{"2606:4700::1111", ""},
		{"2a00:1450:4001:81b::200e", ""},
		{"::ffff:1.1.1.1", ""}, // mapped: the IPv4 address it reaches
		{"172.32.0.1", ""},     // just past 172.16/12
		{"100.128.0.1", ""},    // just past 100.64/10
		{"198.20.0.1", ""},     // just past 198.18/15
		{"223.255.255.255", ""},

		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.0.0.1", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"::ffff:192.168.1.1", "private"},
		{"100.64.0.1", "cgnat"},
		{"100.127.255.255", "cgnat"},
		{"169.254.169.254", "metadata"},
		{"::ffff:169.254.169.254", "metadata"},
		{"169.254.170.2", "metadata"},
		{"100.100.100.200", "metadata"},
		{"168.63.129.16", "metadata"},
		{"fd00:ec2::254", "metadata"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"fc00::1", "unique-local"},
		{"fd12:3456::1", "unique-local"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		{"192.0.0.8", "reserved"},
		{"2001:10::1", "reserved"},
		{"4000::1", "reserved"}, // outside 2000::/3
		{"5f00::1", "reserved"}, // SRv6 SIDs
		{"::2", "ipv4-compatible"},
		{"::ffff:0:7f00:1", "ipv4-translated"},
		{"64:ff9b::7f00:1", "nat64"},
		{"64:ff9b::101:101", "nat64"}, // even a public IPv4 address inside
		{"64:ff9b:1::1", "nat64"},
		{"2002:7f00:1::1", "6to4"},
		{"192.88.99.1", "6to4"},
		{"2001:0:4136:e378::1", "teredo"},
		{"198.18.0.1", "benchmark"},
		{"198.19.255.255", "benchmark"},
		{"2001:2::1", "benchmark"},
		{"192.0.2.1", "documentation"},
		{"198.51.100.1", "documentation"},
		{"203.0.113.1", "documentation"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"100::1", "discard"},
		{"fec0::1", "site-local"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			class, special := egress.Classify(netip.MustParseAddr(tc.addr))
			if class != tc.class || special != (tc.class != "") {
				t.Fatalf("Classify(%s) = %q, %v; want %q, %v", tc.addr, class, special, tc.class, tc.class != "")
			}
		})
	}
	if class, special := egress.Classify(netip.Addr{}); class != "invalid" || !special {
		t.Fatalf("the zero Addr is %q, %v", class, special)
	}
}

// TestDeclaredLiteralReachesLoopback is the positive control of every
// refusal: a declared IP literal, loopback itself, is reached, the bytes
// go both ways with a half-close, and the record counts them.
func TestDeclaredLiteralReachesLoopback(t *testing.T) {
	srv := newServer(t, false)
	_, rec, _ := newPoint(t, egress.Options{Allow: []egress.Host{{Name: "127.0.0.1", Port: srv.port()}},
		Resolver: &fakeResolver{strict: t}})

	c, err := dial(srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.RemoteAddr().String(); got != srv.addr() {
		t.Errorf("RemoteAddr %s, want %s", got, srv.addr())
	}
	msg := strings.Repeat("ping ", 1000)
	want := fmt.Sprintf("got %d: %s", len(msg), msg)
	if got := exchange(t, c, msg); got != want {
		t.Fatalf("answer %.60q..., want %.60q...", got, want)
	}
	c.Close()
	r := rec.next(t)
	if r.Plugin != "weather" || r.Host != "127.0.0.1" || r.Port != srv.port() || r.Addr != srv.addr() ||
		r.BytesOut != int64(len(msg)) || r.BytesIn != int64(len(want)) || r.Refused != "" || r.Code != "" || r.Duration <= 0 {
		t.Fatalf("record %+v; want %d bytes out, %d in, to %s", r, len(msg), len(want), srv.addr())
	}
}

func TestUndeclaredHostIsRefused(t *testing.T) {
	srv := newServer(t, false)
	_, rec, _ := newPoint(t, egress.Options{Allow: []egress.Host{{Name: "127.0.0.1", Port: srv.port()}, {Name: "API.example.com", Port: 443}},
		Resolver: &fakeResolver{strict: t}})

	for _, addr := range []string{
		"127.0.0.2:" + fmt.Sprint(srv.port()),          // another address
		"127.0.0.1:" + fmt.Sprint(srv.port()+1),        // another port
		"api.example.com:80",                           // a declared name, another port
		"example.com:443",                              // a name not declared
		"localhost:" + fmt.Sprint(srv.port()),          // loopback by name: not the literal declared
		"[::ffff:127.0.0.1]:" + fmt.Sprint(srv.port()), // the same address, spelt another way
	} {
		_, err := dial(addr)
		ee := refusedWith(t, err, pluginproto.EgressHostNotDeclared)
		if !strings.Contains(ee.Message, "not among the plugin's declared hosts") {
			t.Errorf("%s: message %q", addr, ee.Message)
		}
		r := rec.next(t)
		host, _, _ := net.SplitHostPort(addr)
		if r.Host != host || r.Code != pluginproto.EgressHostNotDeclared || r.Refused != ee.Message || r.Addr != "" {
			t.Errorf("%s: record %+v", addr, r)
		}
	}
	// The positive control: the declared host and port, in the same point.
	c, err := dial(srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	if got := exchange(t, c, "hi"); got != "got 2: hi" {
		t.Fatalf("answer %q", got)
	}
	c.Close()
}

// TestDeclaredNameReachesOnlyPublicAddresses: a declared name whose
// address is special is refused, by the address; one whose address is
// public is dialled (a fake internet), and only its public address.
func TestDeclaredNameReachesOnlyPublicAddresses(t *testing.T) {
	srv := newServer(t, false)
	res := &fakeResolver{answer: map[string][][]netip.Addr{
		"loop.test":   {addrs("127.0.0.1")},
		"ten.test":    {addrs("10.0.0.1")},
		"meta.test":   {addrs("169.254.169.254")},
		"mapped.test": {addrs("::ffff:127.0.0.1")},
		"ula.test":    {addrs("fd00::1", "::1")},
		"nat64.test":  {addrs("64:ff9b::7f00:1")},
		"pub.test":    {addrs("93.184.216.34")},
		"mixed.test":  {addrs("127.0.0.1", "10.1.1.1", "93.184.216.34")},
	}}
	fd := &fakeDialer{routes: map[string]string{"93.184.216.34:443": srv.addr()}}
	var allow []egress.Host
	for name := range res.answer {
		allow = append(allow, egress.Host{Name: name, Port: 443})
	}
	_, rec, _ := newPoint(t, egress.Options{Allow: allow, Resolver: res, Dialer: fd.dial})

	for _, tc := range []struct{ host, why string }{
		{"loop.test", "127.0.0.1 (loopback)"},
		{"ten.test", "10.0.0.1 (private)"},
		{"meta.test", "169.254.169.254 (metadata)"},
		{"mapped.test", "127.0.0.1 (loopback)"},
		{"ula.test", "fd00::1 (unique-local), ::1 (loopback)"},
		{"nat64.test", "64:ff9b::7f00:1 (nat64)"},
	} {
		_, err := dial(tc.host + ":443")
		ee := refusedWith(t, err, pluginproto.EgressAddressRefused)
		if !strings.Contains(ee.Message, "every address is refused: "+tc.why) {
			t.Errorf("%s: message %q, want it to say %q", tc.host, ee.Message, tc.why)
		}
		// Only an address a fake-IP DNS could have answered (fc00::/7
		// here) brings the name of that opt-in (TestFakeIP has the rest).
		if fake := strings.Contains(ee.Message, "[network] fake_ip"); fake != (tc.host == "ula.test") {
			t.Errorf("%s: message %q names the fake-IP opt-in: %v", tc.host, ee.Message, fake)
		}
		if r := rec.next(t); r.Code != pluginproto.EgressAddressRefused || r.Host != tc.host {
			t.Errorf("%s: record %+v", tc.host, r)
		}
	}
	if d := fd.dialled(); len(d) != 0 {
		t.Fatalf("refused names were dialled: %v", d)
	}

	for _, host := range []string{"pub.test", "mixed.test"} {
		c, err := dial(host + ":443")
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if c.RemoteAddr().String() != "93.184.216.34:443" {
			t.Errorf("%s: RemoteAddr %s", host, c.RemoteAddr())
		}
		if got := exchange(t, c, host); got != "got "+fmt.Sprint(len(host))+": "+host {
			t.Errorf("%s: answer %q", host, got)
		}
		c.Close()
		if r := rec.next(t); r.Addr != "93.184.216.34:443" || r.Code != "" || r.BytesOut != int64(len(host)) {
			t.Errorf("%s: record %+v", host, r)
		}
	}
	// mixed.test's special addresses were never tried.
	if d := fd.dialled(); len(d) != 2 || d[0] != "93.184.216.34:443" || d[1] != "93.184.216.34:443" {
		t.Fatalf("dialled %v, want the public address twice", d)
	}
}

// TestLocalhostDeclared: "localhost" declared is loopback without DNS;
// undeclared in public mode it is refused like any loopback address.
func TestLocalhostDeclared(t *testing.T) {
	srv := newServer(t, false)
	_, rec, _ := newPoint(t, egress.Options{Allow: []egress.Host{{Name: "localhost", Port: srv.port()}},
		Resolver: &fakeResolver{strict: t}})
	c, err := dial("LocalHost:" + fmt.Sprint(srv.port()))
	if err != nil {
		t.Fatal(err)
	}
	if got := exchange(t, c, "x"); got != "got 1: x" {
		t.Fatalf("answer %q", got)
	}
	c.Close()
	if r := rec.next(t); r.Addr != srv.addr() {
		t.Fatalf("record %+v", r)
	}

	// Public mode, localhost not declared.
	_, rec, _ = newPoint(t, egress.Options{Public: true, Resolver: &fakeResolver{strict: t}})
	_, err = dial("localhost:" + fmt.Sprint(srv.port()))
	refusedWith(t, err, pluginproto.EgressAddressRefused)
	if r := rec.next(t); r.Code != pluginproto.EgressAddressRefused {
		t.Fatalf("record %+v", r)
	}
}

// TestPublicMode: any public address, named or literal, on any port; no
// special address, literal or not.
func TestPublicMode(t *testing.T) {
	srv := newServer(t, false)
	res := &fakeResolver{answer: map[string][][]netip.Addr{
		"pub.test":   {addrs("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946")},
		"inner.test": {addrs("192.168.0.10")},
	}}
	fd := &fakeDialer{routes: map[string]string{"1.1.1.1:443": srv.addr(), "93.184.216.34:8443": srv.addr()}}
	_, rec, _ := newPoint(t, egress.Options{Public: true, Resolver: res, Dialer: fd.dial})

	for _, addr := range []string{"127.0.0.1:" + fmt.Sprint(srv.port()), "10.1.2.3:80", "[::1]:443", "169.254.169.254:80",
		"[::ffff:127.0.0.1]:443", "0.0.0.0:443", "inner.test:443"} {
		_, err := dial(addr)
		refusedWith(t, err, pluginproto.EgressAddressRefused)
		if r := rec.next(t); r.Code != pluginproto.EgressAddressRefused {
			t.Errorf("%s: record %+v", addr, r)
		}
	}
	if d := fd.dialled(); len(d) != 0 {
		t.Fatalf("special addresses were dialled: %v", d)
	}
	for _, addr := range []string{"1.1.1.1:443", "pub.test:8443"} {
		c, err := dial(addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		if got := exchange(t, c, "q"); got != "got 1: q" {
			t.Errorf("%s: answer %q", addr, got)
		}
		c.Close()
		if r := rec.next(t); r.Code != "" {
			t.Errorf("%s: record %+v", addr, r)
		}
	}
	// pub.test's IPv6 address has no route here: the point tried the first
	// address, which answered.
	if d := fd.dialled(); len(d) != 2 || d[1] != "93.184.216.34:8443" {
		t.Fatalf("dialled %v", d)
	}
}

// TestResolvesOnce: the point resolves a name once per request and dials
// that answer's address, never the name, so a resolver whose next answer
// is loopback (DNS rebinding) does not get it there.
func TestResolvesOnce(t *testing.T) {
	srv := newServer(t, false)
	res := &fakeResolver{answer: map[string][][]netip.Addr{"rebind.test": {addrs("93.184.216.34"), addrs("127.0.0.1")}}}
	fd := &fakeDialer{routes: map[string]string{"93.184.216.34:80": srv.addr()}}
	_, rec, _ := newPoint(t, egress.Options{Allow: []egress.Host{{Name: "rebind.test", Port: 80}}, Resolver: res, Dialer: fd.dial})

	c, err := dial("rebind.test:80")
	if err != nil {
		t.Fatal(err)
	}
	if got := exchange(t, c, "a"); got != "got 1: a" {
		t.Fatalf("answer %q", got)
	}
	c.Close()
	rec.next(t)
	if n := res.count("rebind.test"); n != 1 {
		t.Fatalf("resolved %d times for one request", n)
	}
	if d := fd.dialled(); len(d) != 1 || d[0] != "93.184.216.34:80" {
		t.Fatalf("dialled %v", d)
	}
	// The next request resolves again, gets loopback, and is refused.
	_, err = dial("rebind.test:80")
	refusedWith(t, err, pluginproto.EgressAddressRefused)
	if d := fd.dialled(); len(d) != 1 {
		t.Fatalf("dialled %v after the refusal", d)
	}
}

// send sends one raw message on the point's socket, as a hostile plugin
// could, with the descriptors fds attached.
func send(t *testing.T, p *egress.Point, msg []byte, fds ...int) {
	t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(int(p.PluginEnd().Fd()), msg, oob, nil, 0); err != nil {
		t.Fatal(err)
	}
}

// streamPair returns both ends of a Unix stream socket pair; the test
// passes the second and reads on the first.
func streamPair(t *testing.T) (*os.File, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0) // no exec here: no SOCK_CLOEXEC (macOS has none)
	if err != nil {
		t.Fatal(err)
	}
	ours := os.NewFile(uintptr(fds[0]), "ours")
	t.Cleanup(func() { ours.Close() })
	return ours, fds[1]
}

// answer reads what the point wrote on a passed stream until it closed it.
func answer(t *testing.T, ours *os.File) string {
	t.Helper()
	if err := ours.SetReadDeadline(time.Now().Add(waitFor)); err != nil && !errors.Is(err, os.ErrNoDeadline) {
		t.Fatal(err)
	}
	b, err := io.ReadAll(ours)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMalformedRequests: what the point cannot read is dropped with its
// descriptors (the passed stream sees its end, no answer) and logged; the
// point serves the next good request. A readable request it cannot serve
// gets BAD_REQUEST.
func TestMalformedRequests(t *testing.T) {
	srv := newServer(t, false)
	p, rec, logs := newPoint(t, egress.Options{Allow: []egress.Host{{Name: "127.0.0.1", Port: srv.port()}}})
	good := fmt.Sprintf(`{"v":1,"network":"tcp","host":"127.0.0.1","port":%d}`, srv.port())

	// No descriptor: nothing to close, nothing to answer on.
	send(t, p, []byte(good))
	// Two descriptors: both closed.
	a, fa := streamPair(t)
	b, fb := streamPair(t)
	send(t, p, []byte(good), fa, fb)
	unix.Close(fa)
	unix.Close(fb)
	for _, ours := range []*os.File{a, b} {
		if got := answer(t, ours); got != "" {
			t.Errorf("two descriptors: answered %q", got)
		}
	}
	for name, msg := range map[string]string{
		"oversize":      `{"v":1,"network":"tcp","host":"` + strings.Repeat("a", 2000) + `","port":1}`,
		"bad JSON":      `{"v":1,"network":"tcp"`,
		"two values":    good + good,
		"wrong version": fmt.Sprintf(`{"v":2,"network":"tcp","host":"127.0.0.1","port":%d}`, srv.port()),
		"no version":    fmt.Sprintf(`{"network":"tcp","host":"127.0.0.1","port":%d}`, srv.port()),
		"unknown field": fmt.Sprintf(`{"v":1,"network":"tcp","host":"127.0.0.1","port":%d,"via":"x"}`, srv.port()),
		"port too big":  `{"v":1,"network":"tcp","host":"127.0.0.1","port":70000}`,
		"null":          `null`,
	} {
		ours, theirs := streamPair(t)
		send(t, p, []byte(msg), theirs)
		unix.Close(theirs)
		if got := answer(t, ours); got != "" {
			t.Errorf("%s: answered %q", name, got)
		}
	}
	// Descriptors that are not Unix stream sockets: a pipe, a datagram pair.
	var pipe [2]int
	if err := unix.Pipe(pipe[:]); err != nil {
		t.Fatal(err)
	}
	send(t, p, []byte(good), pipe[1])
	unix.Close(pipe[1])
	pr := os.NewFile(uintptr(pipe[0]), "pipe")
	if got := answer(t, pr); got != "" {
		t.Errorf("pipe: %q written", got)
	}
	pr.Close()
	dg, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	send(t, p, []byte(good), dg[1])
	unix.Close(dg[1])
	unix.Close(dg[0])

	// None of that was recorded: there was no request to audit.
	rec.none(t)

	// Readable, but not servable: BAD_REQUEST, recorded.
	for name, tc := range map[string]struct{ msg, why, host string }{
		"udp":    {`{"v":1,"network":"udp","host":"127.0.0.1","port":53}`, `network "udp": only tcp`, "127.0.0.1"},
		"port 0": {`{"v":1,"network":"tcp","host":"127.0.0.1","port":0}`, "port 0", "127.0.0.1"},
		// A host that is no host is recorded quoted: it goes to the audit log.
		"host":  {`{"v":1,"network":"tcp","host":"a b\n","port":80}`, "is not a host name or an IP literal", `"a b\n"`},
		"empty": {`{"v":1,"network":"tcp","host":"","port":80}`, "is not a host name or an IP literal", `""`},
	} {
		ours, theirs := streamPair(t)
		send(t, p, []byte(tc.msg), theirs)
		unix.Close(theirs)
		got := answer(t, ours)
		r, err := pluginproto.DecodeEgressReply([]byte(got))
		if err != nil || r.OK || r.Code != pluginproto.EgressBadRequest || !strings.Contains(r.Error, tc.why) || strings.Count(got, "\n") != 1 {
			t.Errorf("%s: answered %q (%v), want BAD_REQUEST %q", name, got, err, tc.why)
		}
		if rr := rec.next(t); rr.Code != pluginproto.EgressBadRequest || rr.Host != tc.host {
			t.Errorf("%s: record %+v", name, rr)
		}
	}

	// The point still serves.
	c, err := dial(srv.addr())
	if err != nil {
		t.Fatalf("after the malformed requests: %v", err)
	}
	if got := exchange(t, c, "ok"); got != "got 2: ok" {
		t.Fatalf("answer %q", got)
	}
	c.Close()
	select {
	case <-p.Done():
		t.Fatal("the point stopped serving")
	default:
	}
	// Logged, at most 5 lines in a burst.
	if n := strings.Count(logs.String(), "egress request dropped"); n < 1 || n > 5 {
		t.Fatalf("%d lines logged:\n%s", n, logs.String())
	}
}

// TestTooMany: past MaxConns the point answers TOO_MANY; a slot freed is
// taken again.
func TestTooMany(t *testing.T) {
	srv := newServer(t, true)
	_, rec, _ := newPoint(t, egress.Options{Allow: []egress.Host{{Name: "127.0.0.1", Port: srv.port()}}, MaxConns: 2})
	var open []net.Conn
	for range 2 {
		c, err := dial(srv.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		open = append(open, c)
	}
	_, err := dial(srv.addr())
	ee := refusedWith(t, err, pluginproto.EgressTooMany)
	if !strings.Contains(ee.Message, "2 connections") {
		t.Errorf("message %q", ee.Message)
	}
	if r := rec.next(t); r.Code != pluginproto.EgressTooMany {
		t.Fatalf("record %+v", r)
	}
	// Free one: both sides end it (each half-close is passed on, so one
	// side alone leaves it half open), the record comes.
	open[0].Close()
	(<-srv.conns).Close()
	if r := rec.next(t); r.Code != "" {
		t.Fatalf("record %+v", r)
	}
	c, err := dial(srv.addr())
	if err != nil {
		t.Fatalf("a freed slot: %v", err)
	}
	c.Close()
}

// TestCloseTearsDownRelays: Close ends the relayed connections on both
// sides, records them, and leaves no goroutine behind; the point's end of
// the socket closes, so a later Dial fails.
func TestCloseTearsDownRelays(t *testing.T) {
	srv := newServer(t, true)
	before := goleak.IgnoreCurrent() // the server's
	p, rec, _ := newPoint(t, egress.Options{Allow: []egress.Host{{Name: "127.0.0.1", Port: srv.port()}}})
	c, err := dial(srv.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	remote := <-srv.conns
	defer remote.Close()
	// The relay runs: a byte each way.
	if _, err := c.Write([]byte("u")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(remote, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Write([]byte("d")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}

	p.Close()
	<-p.Done()
	for name, conn := range map[string]net.Conn{"plugin": c, "host": remote} {
		_ = conn.SetReadDeadline(time.Now().Add(waitFor))
		if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil || os.IsTimeout(err) {
			t.Errorf("%s side after Close: %d, %v; want its end", name, n, err)
		}
	}
	if r := rec.next(t); r.BytesOut != 1 || r.BytesIn != 1 {
		t.Fatalf("record %+v", r)
	}
	if _, err := dial(srv.addr()); err == nil {
		t.Fatal("a dial after Close succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	goleak.VerifyNone(t, before)
}

// TestPluginEndClosedEndsServing: when the plugin's end is closed (the
// handler exited, the core closed its copy) the point stops serving.
func TestPluginEndClosedEndsServing(t *testing.T) {
	srv := newServer(t, false)
	p, _, logs := newPoint(t, egress.Options{Allow: []egress.Host{{Name: "127.0.0.1", Port: srv.port()}}})
	c, err := dial(srv.addr()) // the positive control: it serves
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-p.Done():
		t.Fatal("done while the plugin's end is open")
	default:
	}
	p.PluginEnd().Close()
	select {
	case <-p.Done():
	case <-time.After(waitFor):
		t.Fatal("still serving after the plugin's end was closed")
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a clean end logged a warning:\n%s", logs.String())
	}
}

// TestDialTimeout: a dial that does not answer ends at DialTimeout with
// DIAL_FAILED, and a resolver that does not answer with RESOLVE_FAILED.
func TestDialTimeout(t *testing.T) {
	hang := func(ctx context.Context, _, _ string) (net.Conn, error) { <-ctx.Done(); return nil, ctx.Err() }
	res := &blockingResolver{}
	_, rec, _ := newPoint(t, egress.Options{Allow: []egress.Host{{Name: "192.0.2.1", Port: 80}, {Name: "slow.test", Port: 80}},
		Dialer: hang, Resolver: res, DialTimeout: 50 * time.Millisecond})
	_, err := dial("192.0.2.1:80")
	ee := refusedWith(t, err, pluginproto.EgressDialFailed)
	if !strings.Contains(ee.Message, "deadline exceeded") {
		t.Errorf("message %q", ee.Message)
	}
	if r := rec.next(t); r.Code != pluginproto.EgressDialFailed || r.Addr != "" {
		t.Fatalf("record %+v", r)
	}
	_, err = dial("slow.test:80")
	refusedWith(t, err, pluginproto.EgressResolveFailed)
	rec.next(t)
}

type blockingResolver struct{}

func (blockingResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestHTTPClient: an HTTP GET through the point, to a server on a
// declared literal address.
func TestHTTPClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Query().Get("name"))
	}))
	defer srv.Close()
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	_, rec, _ := newPoint(t, egress.Options{Allow: []egress.Host{{Name: ap.Addr().String(), Port: ap.Port()}}})

	client := plugin.HTTPClient()
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL + "/?name=carapace")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(body) != "hello carapace" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, err)
	}
	client.CloseIdleConnections()
	if r := rec.next(t); r.Addr != ap.String() || r.BytesOut == 0 || r.BytesIn == 0 {
		t.Fatalf("record %+v", r)
	}
	// The same client to an undeclared host fails with the point's code.
	_, err = client.Get("http://127.0.0.1:1/")
	refusedWith(t, err, pluginproto.EgressHostNotDeclared)
}

func TestNewRefusesBadHosts(t *testing.T) {
	for _, h := range []egress.Host{{Name: "", Port: 80}, {Name: "a b", Port: 80}, {Name: "example.com", Port: 0}} {
		if p, err := egress.New(egress.Options{Allow: []egress.Host{h}}); err == nil {
			p.Close()
			t.Errorf("New accepted %+v", h)
		}
	}
	p, err := egress.New(egress.Options{Allow: []egress.Host{{Name: "example.com", Port: 443}, {Name: "::1", Port: 80}}})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
}
