package measure

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/carapace-dev/carapace/cmd/wiring"
	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/server"
	"github.com/carapace-dev/carapace/ipc"
)

// BenchConfig is the config.toml of a benchmark core: the default
// configuration with the rate limit raised out of the way, since the
// benchmarks send far more than an agent's 60 requests a minute.
const BenchConfig = "[rate_limit]\nper_minute = 100000000\nburst = 1000000\n"

// EchoTopic is the topic every benchmark request invokes: the built-in echo
// plugin's low-risk tool, in process.
const EchoTopic = "tool.invoke.echo"

// Core is a real core started in process with server.Run — the code
// `carapace serve` runs — in a temporary home.
type Core struct {
	Home   home.Dir
	Client *control.Client

	cancel context.CancelFunc
	done   chan error
}

// StartCore starts a core in a fresh short home (socket paths are limited to
// about 104 bytes) with config as its config.toml (BenchConfig if empty) and
// the built-in plugins. It returns once the core accepts requests.
func StartCore(config string) (*Core, error) {
	c, _, err := StartCoreWith(config, nil, nil)
	return c, err
}

// StartCoreWith is StartCore with setup run on the home before the core
// starts and the core logging to log (nil discards). It also reports how
// long server.Run took from its call to ready.
func StartCoreWith(config string, setup func(home.Dir) error, log *slog.Logger) (*Core, time.Duration, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if config == "" {
		config = BenchConfig
	}
	dir, err := os.MkdirTemp("", "cp")
	if err != nil {
		return nil, 0, err
	}
	h := home.Dir(dir)
	fail := func(err error) (*Core, time.Duration, error) {
		os.RemoveAll(dir)
		return nil, 0, err
	}
	if err := h.Ensure(); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(h.Config(), []byte(config), 0o600); err != nil {
		return fail(err)
	}
	if setup != nil {
		if err := setup(h); err != nil {
			return fail(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Core{Home: h, Client: control.NewClient(h.ControlSocket()), cancel: cancel, done: make(chan error, 1)}
	ready := make(chan time.Time, 1)
	start := time.Now()
	go func() {
		o := wiring.Options(h, log, "bench")
		o.Ready = func(*server.Server) { ready <- time.Now() }
		c.done <- server.Run(ctx, o)
	}()
	select {
	case at := <-ready:
		return c, at.Sub(start), nil
	case err := <-c.done:
		cancel()
		return fail(fmt.Errorf("core did not start: %w", err))
	case <-time.After(30 * time.Second):
		cancel()
		return fail(errors.New("core did not start within 30s"))
	}
}

// OpenSession opens a session of group "main" through the control API. It
// lives until the handle is closed.
func (c *Core) OpenSession() (*control.SessionHandle, error) {
	return c.Client.OpenSession(context.Background(), "main")
}

// AuditBytes returns the size of the current audit log file.
func (c *Core) AuditBytes() int64 {
	st, err := os.Stat(c.Home.AuditLog())
	if err != nil {
		return 0
	}
	return st.Size()
}

// Close stops the core (what SIGTERM does), waits for Run to return and
// removes the home.
func (c *Core) Close() error {
	c.cancel()
	var err error
	select {
	case err = <-c.done:
	case <-time.After(60 * time.Second):
		err = errors.New("core did not stop within 60s")
	}
	os.RemoveAll(string(c.Home))
	return err
}

// callerSeq makes correlation prefixes unique within the process.
var callerSeq atomic.Uint64

// Caller sends real wire messages for the echo tool to a session socket from
// a plain zmq4 DEALER, each with a unique correlation. Use it from one
// goroutine.
type Caller struct {
	peer   *Peer
	prefix []byte // unique per caller; correlations are prefix + counter
	n      uint64
	req    []byte // reused request buffer
	corr   []byte // the correlation of the last request built
	topic  string
}

// newCaller connects a DEALER that invokes topic to a session socket (a
// path) over zmq4's own ipc:// transport — the same client side as the
// transport floor, so that the difference between the two is the core's
// side.
func newCaller(socket, topic string) (*Caller, error) {
	p, err := Dial("ipc://" + socket)
	if err != nil {
		return nil, err
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	prefix := fmt.Sprintf("b%s-%d-", hex.EncodeToString(r[:]), callerSeq.Add(1))
	c := &Caller{peer: p, prefix: []byte(prefix), topic: topic}
	if err := c.check(); err != nil {
		p.Close()
		return nil, err
	}
	return c, nil
}

// check makes one call and decodes its answer fully: the later calls check
// only that the answer carries their correlation and the echoed result.
func (c *Caller) check() error {
	if err := c.Send(); err != nil {
		return err
	}
	frame, err := c.peer.Recv()
	if err != nil {
		return err
	}
	resp, err := ipc.DecodeResponse(frame)
	if err != nil {
		return err
	}
	if resp.Payload.Error != nil {
		return fmt.Errorf("echo failed: %s: %s", resp.Payload.Error.Code, resp.Payload.Error.Message)
	}
	var res struct{ Message string }
	if json.Unmarshal(resp.Payload.Result, &res) != nil || res.Message != "hello" || resp.Correlation != string(c.corr) {
		return fmt.Errorf("unexpected answer %s", frame)
	}
	return nil
}

// Send sends the next request without waiting for its answer.
func (c *Caller) Send() error {
	c.n++
	b := append(c.req[:0], `{"topic":"`...)
	b = append(b, c.topic...)
	b = append(b, `","correlation":"`...)
	start := len(b)
	b = append(b, c.prefix...)
	b = strconv.AppendUint(b, c.n, 10)
	c.corr = b[start:]
	b = append(b, `","arguments":{"message":"hello"}}`...)
	c.req = b
	return c.peer.Send(b)
}

var okResult = []byte(`"result":{"message":"hello"}`)

// Recv waits for the next answer and checks it is a successful echo of one
// of this caller's requests.
func (c *Caller) Recv() error {
	frame, err := c.peer.Recv()
	if err != nil {
		return err
	}
	if !bytes.Contains(frame, okResult) || !bytes.Contains(frame, c.prefix) {
		return fmt.Errorf("unexpected answer %.300s", frame)
	}
	return nil
}

// Call sends one request and waits for its answer.
func (c *Caller) Call() error {
	if err := c.Send(); err != nil {
		return err
	}
	frame, err := c.peer.Recv()
	if err != nil {
		return err
	}
	if !bytes.Contains(frame, okResult) || !bytes.Contains(frame, c.corr) {
		return fmt.Errorf("unexpected answer %.300s", frame)
	}
	return nil
}

// Close closes the DEALER.
func (c *Caller) Close() error { return c.peer.Close() }

// Session is an open session with a Caller on its socket.
type Session struct {
	*Caller
	Handle *control.SessionHandle
}

// OpenCaller opens a session and connects a Caller to it that invokes the
// echo tool.
func (c *Core) OpenCaller() (*Session, error) { return c.OpenCallerTopic(EchoTopic) }

// OpenCallerTopic opens a session and connects a Caller that invokes topic.
func (c *Core) OpenCallerTopic(topic string) (*Session, error) {
	h, err := c.OpenSession()
	if err != nil {
		return nil, err
	}
	cl, err := newCaller(h.Info().Socket, topic)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &Session{Caller: cl, Handle: h}, nil
}

// Close closes the caller and the session.
func (s *Session) Close() error {
	return errors.Join(s.Caller.Close(), s.Handle.Close())
}
