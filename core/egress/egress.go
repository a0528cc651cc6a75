// Package egress is a plugin's one way to the network: a per-plugin point
// in the core that opens TCP connections for a confined handler, which
// cannot create sockets itself, and relays their bytes.
//
// The handler inherits one end of a Unix socket pair (PluginEnd). To
// connect, it sends a request naming a host and a port, with one end of a
// stream socket pair of its own attached; the point checks the host
// against the plugin's declared hosts, resolves the name itself, refuses
// every special-purpose address (Classify) but one that was configured as
// such or a fake-IP DNS answer the user opted into, dials, answers one JSON line on the passed stream, and from then
// on relays bytes between it and the TCP connection, counting them. TLS
// stays in the plugin: the point sees hosts, ports and byte counts, never
// content. The wire is pluginproto's (egress.go there), the handler's side
// is plugin.Dial, and docs/PLUGIN-PROTOCOL.md#network has the rules.
//
// What it enforces: a plugin reaches only its declared hosts (name and
// port, exactly), or, in Public mode (the web plugin), any public address;
// names are resolved once, by the point, and the address dialled is
// checked again in the dialer's Control hook, so a DNS answer that changes
// (rebinding) cannot take a connection anywhere the first check did not
// pass; at most MaxConns connections at once; every connection and every
// refusal is reported to Record. What it does not: look inside the
// connections, limit bytes or rates, or keep a plugin from reaching a
// public address of its declared host's operator that serves something
// else on the same port.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/internal/netclass"
	"github.com/carapace-dev/carapace/internal/ratelog"
)

// Host is one host a plugin may reach: a DNS name or an IP literal, as
// declared in its manifest or configured, and a port.
type Host struct {
	Name string
	Port uint16
}

func (h Host) String() string { return net.JoinHostPort(h.Name, fmt.Sprint(h.Port)) }

// Resolver resolves names for the point; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Point.
type Options struct {
	// Plugin names the plugin in records and logs.
	Plugin string
	// Allow are the declared hosts: a request's host must equal a Name
	// (without regard to case, no other normalisation) and its port the
	// Port. A Name that is an IP literal may be a special address (that
	// exact address was configured); a Name "localhost" is 127.0.0.1 and
	// ::1, without DNS (RFC 6761), and may be loopback. Any other name
	// reaches only public addresses.
	Allow []Host
	// Public lets the plugin reach any public address on any port (the web
	// plugin): a request for a host not in Allow is served if every
	// address dialled is public, whether it was named or given literally.
	Public bool
	// FakeIP are the prefixes of a fake-IP DNS ([network] fake_ip in
	// config.toml, each inside netclass.FakeIPRanges): an address in one
	// is accepted when the point resolved it from a name (never an IP
	// literal: fake IPs only come from DNS), whether the name is declared
	// or Public serves it, and the reply says so (EgressReply.FakeIP).
	FakeIP []netip.Prefix
	// Resolver resolves names; nil is net.DefaultResolver.
	Resolver Resolver
	// Dialer dials an "ip:port" address the point has checked; nil is a
	// net.Dialer whose Control hook checks the address again. Tests may
	// replace it.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// Record, if set, is called when a connection ends and for every
	// refusal, from the point's goroutines (concurrently): the consumer
	// audits it. It must not block for long.
	Record func(Record)
	// Logger logs requests the point could not read; nil discards.
	Logger *slog.Logger
	// MaxConns bounds the connections being dialled or relayed at once;
	// 0 is 64.
	MaxConns int
	// DialTimeout bounds resolving and dialling one request; 0 is 10 s.
	DialTimeout time.Duration
}

// Record is what the point reports of one request: a connection when it
// ends, or a refusal. It never holds content.
type Record struct {
	Plugin   string
	Host     string // as requested
	Port     uint16
	Addr     string // the address connected to, "ip:port"; "" if none
	BytesOut int64  // plugin to host
	BytesIn  int64  // host to plugin
	Duration time.Duration
	FakeIP   bool   // Addr was accepted as a fake-IP DNS answer (Options.FakeIP)
	Refused  string // why the request was refused, for a person; "" for a connection
	Code     string // the refusal's code (pluginproto.Egress*); "" for a connection
}

// Defaults.
const (
	DefaultMaxConns    = 64
	DefaultDialTimeout = 10 * time.Second
	// replyTimeout bounds writing the reply line on a passed stream.
	replyTimeout = 5 * time.Second
	// tooManyTimeout bounds writing TOO_MANY, which the serving
	// goroutine does itself.
	tooManyTimeout = time.Second
	// maxFDs is how many descriptors a request is read with; more are
	// closed by the kernel, and the request is malformed anyway.
	maxFDs = 8
	// maxAddrs bounds how many addresses of a name are tried.
	maxAddrs = 8
)

// Point is one plugin's egress point. It serves from New until Close or
// until the plugin's end of the socket is closed everywhere.
type Point struct {
	o      Options
	allow  map[Host]bool // lower-cased names
	conn   *net.UnixConn // the core's end
	plugin *os.File      // the plugin's end, until the caller closes it
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	log    *slog.Logger
	bad    ratelog.Limited

	mu     sync.Mutex
	closed bool
	open   map[*relay]struct{}

	wg   sync.WaitGroup
	done chan struct{}
}

// New makes the point's socket pair and starts serving it: requests that
// arrive before the plugin starts wait in the socket. Give PluginEnd to the
// handler process; one Point serves one start of one plugin.
func New(o Options) (*Point, error) {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	allow := map[Host]bool{}
	for _, h := range o.Allow {
		if h.Port == 0 || !validHost(h.Name) {
			return nil, fmt.Errorf("egress: plugin %s: declared host %q port %d is not a host name or IP literal and a port", o.Plugin, h.Name, h.Port)
		}
		allow[Host{strings.ToLower(h.Name), h.Port}] = true
	}
	for _, pr := range o.FakeIP {
		if _, err := netclass.FakeIPPrefix(pr.String()); err != nil {
			return nil, fmt.Errorf("egress: plugin %s: fake-IP prefix: %w", o.Plugin, err)
		}
	}
	fds, err := socketpair()
	if err != nil {
		return nil, fmt.Errorf("egress: plugin %s: socket pair: %w", o.Plugin, err)
	}
	coreEnd := os.NewFile(uintptr(fds[0]), "egress-core-"+o.Plugin)
	c, err := net.FileConn(coreEnd)
	coreEnd.Close() // FileConn holds a duplicate
	if err != nil {
		unix.Close(fds[1])
		return nil, fmt.Errorf("egress: plugin %s: %w", o.Plugin, err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok { // cannot happen: a Unix socket pair
		c.Close()
		unix.Close(fds[1])
		return nil, fmt.Errorf("egress: plugin %s: socket pair is a %T", o.Plugin, c)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Point{
		o:      o,
		allow:  allow,
		conn:   uc,
		plugin: os.NewFile(uintptr(fds[1]), "egress-"+o.Plugin),
		ctx:    ctx,
		cancel: cancel,
		slots:  make(chan struct{}, o.MaxConns),
		log:    log.With("plugin", o.Plugin),
		bad:    ratelog.New(),
		open:   map[*relay]struct{}{},
		done:   make(chan struct{}),
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// PluginEnd is the plugin's end of the socket, to give the handler
// process (exec.Cmd.ExtraFiles; its number there goes in
// pluginproto.EnvEgressFD). Close it in the core once the process has
// started: the point notices the plugin's exit only when no copy of this
// end is left open. Close closes it too, if it is still open.
func (p *Point) PluginEnd() *os.File { return p.plugin }

// Done is closed when the point stops serving requests: the plugin's end
// was closed everywhere, or Close was called. Relayed connections may
// outlive it, until they end or Close closes them.
func (p *Point) Done() <-chan struct{} { return p.done }

// Close stops serving, closes every relayed connection, aborts the
// requests being resolved or dialled, and waits for all of it. It is safe
// to call more than once.
func (p *Point) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.cancel()
		p.conn.Close()
		p.plugin.Close()
		for r := range p.open {
			r.close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// serve reads requests until the plugin's end is gone or Close.
func (p *Point) serve() {
	defer p.wg.Done()
	defer close(p.done)
	buf := make([]byte, pluginproto.MaxEgressRequest+1)
	oob := make([]byte, unix.CmsgSpace(4*maxFDs))
	for {
		n, oobn, flags, _, err := p.conn.ReadMsgUnix(buf, oob)
		if err != nil || (n == 0 && oobn == 0) {
			// A zero-length message without descriptors is the end of
			// the plugin's side (a plugin that sends one ends its own
			// network); an error is Close or the same end (ECONNRESET
			// on macOS's datagram sockets).
			if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				p.log.Warn("egress point stops: reading requests failed", "err", err)
			}
			return
		}
		fds, perr := rights(oob[:oobn])
		var why string
		switch {
		case perr != nil:
			why = perr.Error()
		case flags&unix.MSG_CTRUNC != 0:
			why = fmt.Sprintf("more than %d descriptors", maxFDs)
		case flags&unix.MSG_TRUNC != 0 || n > pluginproto.MaxEgressRequest:
			why = fmt.Sprintf("longer than %d bytes", pluginproto.MaxEgressRequest)
		case len(fds) != 1:
			why = fmt.Sprintf("%d descriptors attached, not 1", len(fds))
		}
		var req *pluginproto.EgressRequest
		if why == "" {
			if req, err = pluginproto.DecodeEgressRequest(buf[:n]); err != nil {
				why = err.Error()
			}
		}
		if why != "" {
			closeAll(fds)
			p.bad.Warn(p.log, "egress request dropped: malformed", "why", why)
			continue
		}
		p.accept(req, fds[0])
	}
}

// rights returns the descriptors of SCM_RIGHTS messages in oob.
func rights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("control message: %w", err)
	}
	var fds []int
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return fds, fmt.Errorf("descriptors: %w", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// accept takes a well-formed request and its descriptor: a stream socket
// gets a slot and a goroutine, or TOO_MANY.
func (p *Point) accept(req *pluginproto.EgressRequest, fd int) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_STREAM {
		unix.Close(fd)
		p.bad.Warn(p.log, "egress request dropped: the descriptor attached is not a stream socket", "type", typ, "err", err)
		return
	}
	f := os.NewFile(uintptr(fd), "egress-stream")
	c, err := net.FileConn(f)
	f.Close()
	uc, ok := c.(*net.UnixConn)
	if err != nil || !ok {
		if c != nil {
			c.Close()
		}
		p.bad.Warn(p.log, "egress request dropped: the descriptor attached is not a Unix stream socket", "err", err)
		return
	}
	start := time.Now()
	select {
	case p.slots <- struct{}{}:
	default:
		// On the serving goroutine: a short deadline, so that a stream
		// whose peer does not read holds up the plugin's next request
		// (and Close) for a second at most.
		p.refuseWithin(tooManyTimeout, uc, req, start, pluginproto.EgressTooMany,
			fmt.Sprintf("the plugin has %d connections open, as many as it may", p.o.MaxConns))
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// The slot is freed before the connection is recorded, so that
		// whoever sees its record may count on its slot.
		release := sync.OnceFunc(func() { <-p.slots })
		defer release()
		p.handle(uc, req, start, release)
	}()
}

// refuse answers a refusal on the passed stream, closes it and records it.
func (p *Point) refuse(uc *net.UnixConn, req *pluginproto.EgressRequest, start time.Time, code, why string) {
	p.refuseWithin(replyTimeout, uc, req, start, code, why)
}

func (p *Point) refuseWithin(d time.Duration, uc *net.UnixConn, req *pluginproto.EgressRequest, start time.Time, code, why string) {
	_ = uc.SetWriteDeadline(time.Now().Add(d))
	_, _ = uc.Write(pluginproto.EncodeEgressReply(&pluginproto.EgressReply{Code: code, Error: why}))
	uc.Close()
	host := req.Host
	if !validHost(host) { // the plugin's bytes, on their way to an audit log
		host = fmt.Sprintf("%.100q", host)
	}
	p.record(Record{Plugin: p.o.Plugin, Host: host, Port: req.Port, Duration: time.Since(start), Refused: why, Code: code})
}

func (p *Point) record(r Record) {
	if p.o.Record != nil {
		p.o.Record(r)
	}
}

// handle checks, resolves and dials one request, answers it, and relays.
func (p *Point) handle(uc *net.UnixConn, req *pluginproto.EgressRequest, start time.Time, release func()) {
	ctx, cancel := context.WithTimeout(p.ctx, p.o.DialTimeout)
	remote, addr, fake, code, why := p.connect(ctx, req)
	cancel()
	if code != "" {
		release()
		p.refuse(uc, req, start, code, why)
		return
	}
	rec := Record{Plugin: p.o.Plugin, Host: req.Host, Port: req.Port, Addr: addr.String(), FakeIP: fake}
	_ = uc.SetWriteDeadline(time.Now().Add(replyTimeout))
	if _, err := uc.Write(pluginproto.EncodeEgressReply(&pluginproto.EgressReply{OK: true, Addr: rec.Addr, FakeIP: fake})); err != nil {
		uc.Close()
		remote.Close()
		release()
		rec.Duration = time.Since(start)
		p.record(rec)
		return
	}
	_ = uc.SetWriteDeadline(time.Time{})
	r := &relay{plugin: uc, remote: remote}
	if !p.track(r) {
		r.close()
		release()
		rec.Duration = time.Since(start)
		p.record(rec)
		return
	}
	rec.BytesOut, rec.BytesIn = r.run()
	p.untrack(r)
	release()
	rec.Duration = time.Since(start)
	p.record(rec)
}

func (p *Point) track(r *relay) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.open[r] = struct{}{}
	return true
}

func (p *Point) untrack(r *relay) {
	p.mu.Lock()
	delete(p.open, r)
	p.mu.Unlock()
}
