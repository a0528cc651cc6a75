package llmproxy

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startServe starts the server with Start, whose socket must accept as
// soon as Start has returned (no wait: a session's container is started
// right after it).
func startServe(t *testing.T, sock string, h http.Handler) (cancel func() error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	served, err := Start(ctx, sock, h)
	if err != nil {
		stop()
		t.Fatalf("Start: %v", err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		stop()
		t.Fatalf("the socket does not accept once Start has returned: %v", err)
	}
	c.Close()
	return func() error {
		stop()
		return <-served
	}
}

// TestServe checks Serve on a real Unix socket: its mode, a request
// through it, a stale socket replaced, and its removal when the context
// ends.
func TestServe(t *testing.T) {
	api := newFakeAPI(t, replyJSON)
	p, err := New(Options{
		Upstream: api.url(t), Transport: api.transport(),
		Credential: staticCredential(Credential{Kind: KindAPIKey, Secret: apiSecret}),
		Session:    testSession, Group: testGroup, Audit: newMemAudit(),
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := socketPath(t)

	// A socket left by a core that died.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()

	stop := startServe(t, sock, p)
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o666 {
		t.Errorf("socket mode %v, want a 0666 socket", fi.Mode())
	}

	// A second Serve on a live socket is refused (its context is
	// cancelled so that a wrong start returns at once).
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Serve(cancelled, sock, p); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Serve: %v, want in use", err)
	}

	c := unixClient(sock)
	resp, err := c.Do(claudeRequest(t, "POST", "/v1/messages?beta=true", messagesBody))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != messageJSON {
		t.Fatalf("through the socket: %d %q", resp.StatusCode, body)
	}
	c.CloseIdleConnections()

	if err := stop(); err != nil {
		t.Errorf("Serve returned %v after its context ended, want nil", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket is still there: %v", err)
	}
}

// TestServeEndsStreams checks that calls in flight end with the session:
// the API's side of a stream that would otherwise stay open is cancelled.
func TestServeEndsStreams(t *testing.T) {
	apiDone := make(chan struct{})
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(apiDone)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, sseFirst)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // only a cancelled call ends this
	})
	p, err := New(Options{
		Upstream: api.url(t), Transport: api.transport(),
		Credential: staticCredential(Credential{Kind: KindAPIKey, Secret: apiSecret}), Audit: newMemAudit(),
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := socketPath(t)
	stop := startServe(t, sock, p)
	resp, err := unixClient(sock).Do(claudeRequest(t, "POST", "/v1/messages", messagesBody))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, len(sseFirst))
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	<-apiDone
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the client read a whole reply from a stream cut by the session's end")
	}
}

func TestServeRefuses(t *testing.T) {
	h := http.NotFoundHandler()
	// Cancelled, so that a Serve that wrongly starts returns at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	open := t.TempDir()
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Serve(ctx, filepath.Join(open, "llm.sock"), h); err == nil || !strings.Contains(err.Error(), "private") {
		t.Errorf("in a 0755 directory: %v", err)
	}

	sock := socketPath(t)
	if err := os.WriteFile(sock, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Serve(ctx, sock, h); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("over a regular file: %v", err)
	}
	if _, err := Start(ctx, sock, h); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Start over a regular file: %v", err)
	}
	if b, err := os.ReadFile(sock); err != nil || string(b) != "not a socket" {
		t.Errorf("the file was touched: %q %v", b, err)
	}

	if err := Serve(ctx, filepath.Join(t.TempDir(), "missing", "llm.sock"), h); err == nil {
		t.Error("in a missing directory: no error")
	}
}

// TestConnLimit checks that connections beyond the bound wait.
func TestConnLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := newLimitListener(ln, 1)
	go net.Dial("tcp", ln.Addr().String())
	go net.Dial("tcp", ln.Addr().String())
	c1, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	// A broken limit accepts the pending connection at once; a working
	// one never does, however long this waits, so the wait only sets how
	// likely a broken limit is caught.
	select {
	case <-accepted:
		t.Fatal("a second connection was accepted while the first was open")
	case <-time.After(100 * time.Millisecond):
	}
	c1.Close()
	c1.Close() // a second Close must not free a second slot
	c2 := <-accepted
	c2.Close()
	if len(l.sem) != 0 {
		t.Errorf("%d slots held after every connection closed", len(l.sem))
	}
}
