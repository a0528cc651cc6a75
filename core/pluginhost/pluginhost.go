// Package pluginhost runs an external plugin's handler in a process of its
// own and presents it to the core as an ordinary plugin.Handler.
//
// Start binds a ZeroMQ ROUTER on the plugin's own socket (in a 0700
// directory, on the hardened transport of ipc/zmtp), starts the handler
// executable with a minimal environment that names the socket and carries a
// one-time token, and waits for the handler to connect and say hello with
// that token. From then on the returned *Process forwards Init, Invoke,
// HandleEvent, Verify, MemoryBrief and Shutdown as calls of the protocol in
// core/internal/pluginproto, and answers the handler's service calls with
// the plugin.Services the core gave Init.
//
// What the core can rely on:
//
//   - Only the connection that presented the token is ever answered or
//     sent to; messages from any other connection are ignored (and logged,
//     rate-limited).
//   - A handler that breaks the protocol — a frame that is not a protocol
//     message, an unknown message type, a second hello, a reply to a call
//     never made, a frame over pluginproto.MaxMessage — is cut off: its
//     process group is killed, its in-flight calls fail with ErrCrashed, and
//     OnExit is called.
//   - A call whose ctx ends before the reply returns ctx.Err() at once and
//     sends the handler a cancel; a late reply is dropped.
//   - The process is its own process group: Kill and Shutdown kill the group,
//     so children the handler started die with it. On Linux the handler also
//     gets SIGKILL if the core dies (Pdeathsig); elsewhere the SDK notices
//     that its parent changed.
//   - Service calls are scoped: a call names, in its Scope, the core call it
//     is made for, and is answered with that call's ctx, so the core's own
//     scoping (session and group come from the ctx) applies. A scope that is
//     not in flight gets plugin.ErrNoRequest.
//
// Limits, honestly:
//
//   - The SHA-256 pin is checked before every start, but the file is then
//     executed by path: whoever can rewrite it between the check and the
//     exec wins the race. The pin detects a changed file; it does not
//     defend against a concurrent writer, who already has the user's rights.
//   - The socket's directory is the only access control. A process of the
//     same user can connect; it is ignored without the token, but if it sends
//     a frame over the transport's limits, the transport cannot say which
//     connection did, and the plugin is cut off as if it had.
//   - If the handler's connection drops while its process lives on, the
//     core does not notice until a call times out (zmq4 does not report
//     disconnects); the SDK exits when its connection drops.
//   - Linux's Pdeathsig fires when the thread that started the process
//     exits, not the whole core; the Go runtime does not retire threads in
//     normal operation.
package pluginhost

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
	"golang.org/x/time/rate"

	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/egress"
	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/ipc/zmtp"
)

// Errors of Start and of calls on a Process.
var (
	// ErrPinMismatch: the executable's SHA-256 is not the pinned one.
	// Nothing was started.
	ErrPinMismatch = errors.New("pluginhost: handler executable does not match its SHA-256 pin")
	// ErrCrashed: the process died while the call was in flight, whether
	// it exited, was cut off for breaking the protocol, or was killed by
	// Kill or a Shutdown that ran out of time. The call may have had
	// effects.
	ErrCrashed = errors.New("pluginhost: plugin process died during the call")
	// ErrUnavailable: the call was not made because the process is gone or
	// being stopped (after a crash, Shutdown or Kill).
	ErrUnavailable = errors.New("pluginhost: plugin process is not running")
)

// ResultError is returned by Invoke when the handler's result is valid
// JSON but not an object (or null).
type ResultError struct {
	JSONType string // "array", "string", "number" or "boolean"
}

// Error implements the error interface.
func (e *ResultError) Error() string {
	return "handler returned a JSON " + e.JSONType + ", not an object"
}

// Spec describes one handler process.
type Spec struct {
	Name      string       // kebab-case plugin name
	Dir       string       // the plugin folder: the process's working directory
	Exec      string       // absolute path of the handler executable (normally Dir/handler)
	SHA256    string       // hex pin; if set, checked before every start (ErrPinMismatch)
	DataDir   string       // private data dir, created 0700: the process's HOME; TMPDIR is DataDir/tmp
	SocketDir string       // directory of the per-plugin socket, created 0700: SocketDir/<Name>.sock
	Logger    *slog.Logger // nil = discard
	// OnExit is called once, with an error wrapping ErrCrashed, if the
	// process dies without the core asking (it exited, crashed or was cut
	// off), never after Shutdown or Kill. It runs after the socket is gone
	// and before Done is closed, so it may Start the plugin again but must
	// not wait for Done.
	OnExit func(error)
	// HelloTimeout bounds the wait for the handler's hello; zero means
	// pluginproto.HelloTimeout.
	HelloTimeout time.Duration
	// Confine, if set, is what the operating system lets the handler
	// touch: it starts through the launcher of core/confine, which
	// confines itself and then execs the handler. Its Exec must be Exec.
	Confine *confine.Policy
	// Egress, if set, gives the handler an egress point in the core
	// (core/egress), its only way to the network, as descriptor 4. One
	// point per start; it closes when the process is gone.
	Egress *egress.Options
	// Env is added to the handler's minimal environment ("NAME=value"):
	// the certificates to trust (pluginpolicy.TrustEnv).
	Env []string

	// serviceRate and serviceBurst replace defaultServiceRate and
	// defaultServiceBurst when not zero: tests make them small.
	serviceRate  rate.Limit
	serviceBurst int
}

// Tunables.
const (
	// maxSocketPath is the shortest sun_path limit of the supported
	// systems (macOS: 104 bytes including the NUL).
	maxSocketPath = 103
	// maxConns bounds the socket's connections: the handler needs one.
	maxConns = 4
	// exitGrace bounds how long Shutdown waits for the process after
	// SIGKILL, and cleanup for the output pipes after the exit.
	exitGrace = 2 * time.Second
	// sendTimeout bounds one write to the handler's connection.
	sendTimeout = 5 * time.Second
	// outQueue is the writer's queue length.
	outQueue = 256
	// replyGrace bounds how long in-flight calls wait, after the process
	// exited on its own, for replies it sent just before.
	replyGrace = 250 * time.Millisecond
	// maxServiceCalls bounds the handler's service calls in flight.
	maxServiceCalls = 64
)

// Service calls a handler may make, per second and in a burst.
const (
	defaultServiceRate  rate.Limit = 200
	defaultServiceBurst int        = 400
)

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

func (s *Spec) check() error {
	if len(s.Name) > 64 || !nameRE.MatchString(s.Name) {
		return fmt.Errorf("pluginhost: plugin name %q is not kebab-case", s.Name)
	}
	for _, d := range []struct{ what, path string }{
		{"Exec", s.Exec}, {"Dir", s.Dir}, {"DataDir", s.DataDir}, {"SocketDir", s.SocketDir},
	} {
		if !filepath.IsAbs(d.path) {
			return fmt.Errorf("pluginhost: plugin %s: %s %q is not an absolute path", s.Name, d.what, d.path)
		}
	}
	return nil
}

// checkPin hashes the executable and compares it with the pin.
func checkPin(path, pin string) error {
	want, err := hex.DecodeString(strings.TrimSpace(pin))
	if err != nil || len(want) != sha256.Size {
		return fmt.Errorf("%w: the pin %q is not a hex SHA-256", ErrPinMismatch, pin)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("pluginhost: hash handler executable: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("pluginhost: hash handler executable %s: %w", path, err)
	}
	if got := h.Sum(nil); subtle.ConstantTimeCompare(got, want) != 1 {
		return fmt.Errorf("%w: %s has SHA-256 %x, pinned %x", ErrPinMismatch, path, got, want)
	}
	return nil
}

// privateDir creates dir (and its parents) and makes it 0700.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// Start verifies the pin, binds the plugin's socket, starts the handler and
// waits for its hello (within Spec.HelloTimeout, or until ctx is done; ctx
// bounds the start only). On failure the process group is killed, the
// socket removed, and the error says what happened. A plugin's previous
// Process must be Done before the plugin is started again (its socket is
// still taken until then).
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	lg := spec.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("plugin", spec.Name)
	if spec.SHA256 != "" {
		if err := checkPin(spec.Exec, spec.SHA256); err != nil {
			return nil, err
		}
	}
	tmp := filepath.Join(spec.DataDir, "tmp")
	for _, d := range []string{spec.DataDir, tmp, spec.SocketDir} {
		if err := privateDir(d); err != nil {
			return nil, fmt.Errorf("pluginhost: plugin %s: create directory: %w", spec.Name, err)
		}
	}
	sock := filepath.Join(spec.SocketDir, spec.Name+".sock")
	if len(sock) > maxSocketPath {
		return nil, fmt.Errorf("pluginhost: plugin %s: socket path %s is %d bytes, longer than Unix sockets allow (%d)", spec.Name, sock, len(sock), maxSocketPath)
	}
	var tok [32]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("pluginhost: token: %w", err)
	}
	helloTimeout := spec.HelloTimeout
	if helloTimeout <= 0 {
		helloTimeout = pluginproto.HelloTimeout
	}
	svcRate, svcBurst := spec.serviceRate, spec.serviceBurst
	if svcRate == 0 || svcBurst == 0 {
		svcRate, svcBurst = defaultServiceRate, defaultServiceBurst
	}

	rctx, rcancel := context.WithCancel(context.Background())
	p := &Process{
		spec:      spec,
		log:       lg,
		socket:    sock,
		token:     hex.EncodeToString(tok[:]),
		rctx:      rctx,
		rcancel:   rcancel,
		out:       make(chan []byte, outQueue),
		quit:      make(chan struct{}),
		helloOK:   make(chan struct{}),
		helloErr:  make(chan error, 1),
		svcLimit:  rate.NewLimiter(svcRate, svcBurst),
		svcSlots:  make(chan struct{}, maxServiceCalls),
		strangers: rate.NewLimiter(1, 5),
		rejects:   rate.NewLimiter(1, 5),
		calls:     map[uint64]*pending{},
		exited:    make(chan struct{}),
		done:      make(chan struct{}),
	}
	if _, busy := bySocket.LoadOrStore(sock, p); busy {
		rcancel()
		return nil, fmt.Errorf("pluginhost: plugin %s is already running on %s", spec.Name, sock)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		bySocket.CompareAndDelete(sock, p)
		rcancel()
		return nil, fmt.Errorf("pluginhost: plugin %s: remove stale socket: %w", spec.Name, err)
	}
	p.router = zmq4.NewRouter(rctx, zmq4.WithTimeout(sendTimeout), zmq4.WithLogger(zmqLogger(lg)))
	if err := p.router.Listen(scheme() + "://" + sock); err != nil {
		p.closeTransport()
		return nil, fmt.Errorf("pluginhost: plugin %s: listen on %s: %w", spec.Name, sock, err)
	}
	if fi, err := os.Lstat(sock); err == nil {
		p.sockInfo = fi // so that cleanup removes this socket file, never a successor's
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		p.closeTransport()
		return nil, fmt.Errorf("pluginhost: plugin %s: chmod socket: %w", spec.Name, err)
	}
	p.loops.Add(2)
	go p.recvLoop()
	go p.writer()

	if err := p.startProcess(tmp); err != nil {
		p.closeTransport()
		return nil, err
	}

	timer := time.NewTimer(helloTimeout)
	defer timer.Stop()
	var why error
	select {
	case <-p.helloOK:
		p.mu.Lock()
		p.started = !p.reaped // from now on, a death the core did not ask for is OnExit's
		started := p.started
		p.mu.Unlock()
		if started {
			lg.Info("plugin started", "pid", p.pid)
			return p, nil
		}
		<-p.exited
		why = fmt.Errorf("%s right after its hello", describeExit(p.waitErr))
	case err := <-p.helloErr:
		why = err
	case <-p.exited:
		why = fmt.Errorf("%s before saying hello", describeExit(p.waitErr))
	case <-timer.C:
		why = fmt.Errorf("no hello within %v", helloTimeout)
	case <-ctx.Done():
		why = fmt.Errorf("start abandoned: %w", ctx.Err())
	}
	p.Kill()
	<-p.done
	return nil, fmt.Errorf("pluginhost: plugin %s (%s) did not start: %w", spec.Name, spec.Exec, why)
}

// connect makes the handler's connection to its socket and returns it as
// a file to pass to the child.
func (p *Process) connect() (*os.File, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: p.socket, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("pluginhost: plugin %s: connect the handler's socket: %w", p.spec.Name, err)
	}
	defer c.Close()
	f, err := c.File() // a duplicate, in blocking mode, for the child
	if err != nil {
		return nil, fmt.Errorf("pluginhost: plugin %s: connect the handler's socket: %w", p.spec.Name, err)
	}
	return f, nil
}

// startProcess starts the executable in its own process group with the
// minimal environment, its output on pipes that pump drains.
func (p *Process) startProcess(tmp string) error {
	spec := &p.spec
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + spec.DataDir,
		"TMPDIR=" + tmp,
		"LANG=C.UTF-8",
		// One P: handlers wait on the network, not the CPU, and with one
		// P the hand-offs inside a call stay on one thread instead of
		// waking another (about 0.3 ms less per call here; see
		// docs/PERFORMANCE.md (f)). A CPU-bound handler can raise it with
		// runtime.GOMAXPROCS.
		"GOMAXPROCS=1",
		pluginproto.EnvEndpoint + "=" + zmtp.Scheme + "://" + p.socket,
		pluginproto.EnvToken + "=" + p.token,
		pluginproto.EnvName + "=" + spec.Name,
		pluginproto.EnvData + "=" + spec.DataDir,
	}
	// spec.Env first: a variable of the core's own below wins over it
	// (os/exec keeps the last of a name).
	env = append(slices.Clone(spec.Env), env...)
	// The handler's connection, made here: a confined handler may not
	// create sockets, so it inherits this one as descriptor 3.
	conn, err := p.connect()
	if err != nil {
		return err
	}
	defer conn.Close() // the child has its copy once started
	env = append(env, pluginproto.EnvConnFD+"=3")
	files := []*os.File{conn}
	if spec.Egress != nil {
		pt, err := egress.New(*spec.Egress)
		if err != nil {
			return fmt.Errorf("pluginhost: plugin %s: egress point: %w", spec.Name, err)
		}
		p.egress = pt
		end := pt.PluginEnd()
		defer end.Close() // the child has its copy once started; the point ends when the child's does
		files = append(files, end)
		env = append(env, pluginproto.EnvEgressFD+"=4")
	}
	// Pipes of our own rather than cmd.StdoutPipe: Wait then returns when
	// the process exits, even if a child it left behind holds the pipe.
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pluginhost: plugin %s: pipe: %w", spec.Name, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fmt.Errorf("pluginhost: plugin %s: pipe: %w", spec.Name, err)
	}
	cmd := &exec.Cmd{
		Path:        spec.Exec,
		Args:        []string{spec.Exec},
		Dir:         spec.Dir,
		Env:         env,
		Stdout:      outW, // Stdin nil: /dev/null
		Stderr:      errW,
		ExtraFiles:  files,
		SysProcAttr: sysProcAttr(),
	}
	if spec.Confine != nil {
		if err := confine.Wrap(cmd, *spec.Confine); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			p.closeEgress()
			return fmt.Errorf("pluginhost: plugin %s: %w", spec.Name, err)
		}
	}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		p.closeEgress()
		return fmt.Errorf("pluginhost: plugin %s: start %s: %w", spec.Name, spec.Exec, err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.pid = cmd.Process.Pid
	if p.cutReason != "" { // cut off before it even started
		p.killLocked()
	}
	p.mu.Unlock()
	p.pipes = []*os.File{outR, errR}
	p.output.Add(2)
	lim := rate.NewLimiter(outputRate, outputBurst)
	go p.pump("stdout", outR, lim)
	go p.pump("stderr", errR, lim)
	go p.wait()
	return nil
}
