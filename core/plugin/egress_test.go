//go:build unix

package plugin

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
)

// fakePoint is the core's egress point, in the test process: it reads the
// requests Dial sends and hands each, with its stream, to the test. (The
// real point is core/egress, whose tests drive Dial end to end.)
type fakePoint struct {
	reqs chan fakeRequest
}

type fakeRequest struct {
	req    *pluginproto.EgressRequest
	fds    int      // descriptors attached
	stream *os.File // the passed stream, if there was exactly one
}

// answer writes s on the request's stream; close ends it.
func (r fakeRequest) answer(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(r.stream, s); err != nil {
		t.Fatal(err)
	}
}

// newFakePoint makes the socket pair and points Dial at it, as the core
// does for a handler.
func newFakePoint(t *testing.T) *fakePoint {
	t.Helper()
	typ := unix.SOCK_SEQPACKET
	if runtime.GOOS != "linux" {
		typ = unix.SOCK_DGRAM // macOS: no SEQPACKET Unix sockets
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, typ, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakePoint{reqs: make(chan fakeRequest, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		oob := make([]byte, unix.CmsgSpace(4*4))
		for {
			n, oobn, _, _, err := unix.Recvmsg(fds[0], buf, oob, 0)
			if err != nil || (n == 0 && oobn == 0) {
				return
			}
			var r fakeRequest
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			for i := range msgs {
				got, _ := unix.ParseUnixRights(&msgs[i])
				r.fds += len(got)
				for _, fd := range got {
					if r.stream == nil {
						r.stream = os.NewFile(uintptr(fd), "stream")
						t.Cleanup(func() { r.stream.Close() })
					} else {
						unix.Close(fd)
					}
				}
			}
			r.req, _ = pluginproto.DecodeEgressRequest(buf[:n])
			p.reqs <- r
		}
	}()
	t.Cleanup(func() {
		unix.Shutdown(fds[0], unix.SHUT_RDWR)
		unix.Close(fds[1])
		<-done
		unix.Close(fds[0])
	})
	t.Setenv(pluginproto.EnvEgressFD, strconv.Itoa(fds[1]))
	return p
}

// next is the next request the point got.
func (p *fakePoint) next(t *testing.T) fakeRequest {
	t.Helper()
	select {
	case r := <-p.reqs:
		return r
	case <-time.After(hang):
		t.Fatal("no request")
		return fakeRequest{}
	}
}

// dialAsync runs Dial in a goroutine; the result comes on the channel.
func dialAsync(ctx context.Context, address string) chan dialResult {
	ch := make(chan dialResult, 1)
	go func() {
		c, err := Dial(ctx, "tcp", address)
		ch <- dialResult{c, err}
	}()
	return ch
}

type dialResult struct {
	c   net.Conn
	err error
}

func wait(t *testing.T, ch chan dialResult) dialResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(hang):
		t.Fatal("Dial did not return")
		return dialResult{}
	}
}

// TestDialKeepsTheBytesBehindTheReply: what the host sent first arrives
// in the same write as the reply line, and the connection still has it.
// The request is the wire's, with one descriptor.
func TestDialKeepsTheBytesBehindTheReply(t *testing.T) {
	p := newFakePoint(t)
	ch := dialAsync(context.Background(), "smtp.example.com:587")
	r := p.next(t)
	want := pluginproto.EgressRequest{V: 1, Network: "tcp", Host: "smtp.example.com", Port: 587}
	if r.req == nil || *r.req != want || r.fds != 1 {
		t.Fatalf("request %+v with %d descriptors, want %+v with 1", r.req, r.fds, want)
	}
	r.answer(t, `{"ok":true,"addr":"203.0.113.25:587"}`+"\n220 mail.example.com ESMTP ready\r\n")
	res := wait(t, ch)
	if res.err != nil {
		t.Fatal(res.err)
	}
	c := res.c
	defer c.Close()
	if got := c.RemoteAddr().String(); got != "203.0.113.25:587" || c.RemoteAddr().Network() != "tcp" {
		t.Errorf("RemoteAddr %s %s", c.RemoteAddr().Network(), got)
	}
	_ = c.SetReadDeadline(time.Now().Add(hang))
	banner := make([]byte, len("220 mail.example.com ESMTP ready\r\n"))
	if _, err := io.ReadFull(c, banner); err != nil || string(banner) != "220 mail.example.com ESMTP ready\r\n" {
		t.Fatalf("read %q, %v", banner, err)
	}
	// Both ways, and a half-close that reaches the core's side.
	if _, err := c.Write([]byte("EHLO x\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = r.stream.SetReadDeadline(time.Now().Add(hang))
	if got, err := io.ReadAll(r.stream); err != nil || string(got) != "EHLO x\r\n" {
		t.Fatalf("the core's side read %q, %v", got, err)
	}
}

func TestDialRefused(t *testing.T) {
	p := newFakePoint(t)
	ch := dialAsync(context.Background(), "api.example.com:443")
	r := p.next(t)
	r.answer(t, string(pluginproto.EncodeEgressReply(&pluginproto.EgressReply{Code: pluginproto.EgressHostNotDeclared,
		Error: "api.example.com:443 is not among the plugin's declared hosts"})))
	r.stream.Close()
	res := wait(t, ch)
	var ee *EgressError
	if !errors.As(res.err, &ee) || ee.Code != pluginproto.EgressHostNotDeclared || !strings.Contains(ee.Message, "declared hosts") {
		t.Fatalf("Dial = %v, %v; want a HOST_NOT_DECLARED EgressError", res.c, res.err)
	}
	if !strings.Contains(res.err.Error(), "HOST_NOT_DECLARED") {
		t.Errorf("the error does not show the code: %v", res.err)
	}
}

// TestDialHonoursTheContext: a point that does not answer holds Dial only
// as long as ctx; the point answering the next request is the control.
func TestDialHonoursTheContext(t *testing.T) {
	p := newFakePoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ch := dialAsync(ctx, "slow.example.com:443")
	p.next(t) // never answered
	if res := wait(t, ch); !errors.Is(res.err, context.DeadlineExceeded) {
		t.Fatalf("Dial = %v, %v; want the deadline", res.c, res.err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	ch = dialAsync(ctx, "slow.example.com:443")
	p.next(t)
	cancel()
	if res := wait(t, ch); !errors.Is(res.err, context.Canceled) {
		t.Fatalf("Dial = %v, %v; want the cancellation", res.c, res.err)
	}

	ch = dialAsync(context.Background(), "fast.example.com:443")
	p.next(t).answer(t, `{"ok":true,"addr":"192.0.2.1:443"}`+"\n")
	res := wait(t, ch)
	if res.err != nil {
		t.Fatal(res.err)
	}
	res.c.Close()
}

// TestDialBadAnswers: a point that closes without a reply, answers
// garbage or never ends its line fails the dial with a reason.
func TestDialBadAnswers(t *testing.T) {
	p := newFakePoint(t)
	for name, tc := range map[string]struct{ answer, want string }{
		"no answer":   {"", "without an answer"},
		"not JSON":    {"HTTP/1.1 200 OK\n", "malformed"},
		"no address":  {`{"ok":true}` + "\n", "without an address"},
		"bad address": {`{"ok":true,"addr":"somewhere"}` + "\n", "address"},
		"endless":     {strings.Repeat("x", 2*pluginproto.MaxEgressReply), "longer than"},
		"cut short":   {`{"ok":tr`, "reading the egress point's answer"},
	} {
		ch := dialAsync(context.Background(), "a.example.com:443")
		r := p.next(t)
		r.answer(t, tc.answer)
		r.stream.Close()
		res := wait(t, ch)
		if res.err == nil || !strings.Contains(res.err.Error(), tc.want) {
			t.Errorf("%s: Dial = %v, %v; want an error saying %q", name, res.c, res.err, tc.want)
		}
	}
}

// TestDialWithoutEgress: no variable, or a descriptor that is not a
// socket, is ErrNoEgress; a bad variable or address is an error of its
// own, without a request sent.
func TestDialWithoutEgress(t *testing.T) {
	t.Setenv(pluginproto.EnvEgressFD, "")
	os.Unsetenv(pluginproto.EnvEgressFD)
	_, err := Dial(context.Background(), "tcp", "api.example.com:443")
	if !errors.Is(err, ErrNoEgress) || !strings.Contains(err.Error(), "declare its hosts in the manifest") {
		t.Fatalf("no variable: %v", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	t.Setenv(pluginproto.EnvEgressFD, strconv.Itoa(int(pw.Fd())))
	if _, err := Dial(context.Background(), "tcp", "api.example.com:443"); !errors.Is(err, ErrNoEgress) {
		t.Fatalf("a pipe: %v", err)
	}
	t.Setenv(pluginproto.EnvEgressFD, "four")
	if _, err := Dial(context.Background(), "tcp", "api.example.com:443"); err == nil || errors.Is(err, ErrNoEgress) || !strings.Contains(err.Error(), "descriptor number") {
		t.Fatalf("a bad variable: %v", err)
	}

	p := newFakePoint(t)
	var ee *EgressError
	if _, err := Dial(context.Background(), "udp", "dns.example.com:53"); !errors.As(err, &ee) || ee.Code != pluginproto.EgressBadRequest {
		t.Fatalf("udp: %v", err)
	}
	for _, addr := range []string{"api.example.com", "api.example.com:https", "api.example.com:0", "api.example.com:65536"} {
		if _, err := Dial(context.Background(), "tcp", addr); err == nil {
			t.Fatalf("%s: no error", addr)
		}
	}
	select {
	case r := <-p.reqs:
		t.Fatalf("a request was sent: %+v", r.req)
	default:
	}
	// The positive control: the same point serves a good address.
	ch := dialAsync(context.Background(), "[2001:db8::1]:443")
	r := p.next(t)
	if r.req.Host != "2001:db8::1" || r.req.Port != 443 {
		t.Fatalf("request %+v", r.req)
	}
	r.answer(t, `{"ok":true,"addr":"[2001:db8::1]:443"}`+"\n")
	res := wait(t, ch)
	if res.err != nil {
		t.Fatal(res.err)
	}
	res.c.Close()
}

func TestHTTPClientDialsThroughTheEgressPoint(t *testing.T) {
	c := HTTPClient()
	tr, ok := c.Transport.(interface{ CloseIdleConnections() })
	if !ok || c.Timeout == 0 {
		t.Fatalf("client %+v", c)
	}
	defer tr.CloseIdleConnections()
	t.Setenv(pluginproto.EnvEgressFD, "")
	os.Unsetenv(pluginproto.EnvEgressFD)
	if _, err := c.Get("http://api.example.com/"); !errors.Is(err, ErrNoEgress) {
		t.Fatalf("GET without an egress point: %v", err)
	}
}
