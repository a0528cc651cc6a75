package prove

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/egress"
	"github.com/carapace-dev/carapace/core/internal/pluginproto"
	"github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/pluginhost"
	"github.com/carapace-dev/carapace/core/pluginpolicy"
	"github.com/carapace-dev/carapace/keychain"
)

// pluginTimeout bounds the plugin side: its start, its probes, its stop.
const pluginTimeout = 60 * time.Second

// The plugin side's checks, by name.
const (
	checkPluginStarts      = "plugin: starts confined"
	checkPluginCredentials = "plugin: cannot read the credentials"
	checkPluginCoreFiles   = "plugin: cannot read the core's files"
	checkPluginCanary      = "plugin: cannot read a file outside its folders"
	checkPluginWrites      = "plugin: writes only in its data folder"
	checkPluginControl     = "plugin: cannot reach the control socket"
	checkPluginSignal      = "plugin: cannot signal the core"
	checkPluginNetwork     = "plugin: has no network of its own"
	checkPluginUndeclared  = "plugin: reaches no undeclared host"
)

// provePlugin runs the plugin side: the probe plugin under the real
// confinement, each promise tried from inside with its control.
func (p *Prover) provePlugin(ctx context.Context, r *run) {
	ctx, cancel := context.WithTimeout(ctx, pluginTimeout)
	defer cancel()
	failed := func(name, why string) {
		r.check(api.ProveCheck{Name: name, Side: api.ProveSidePlugin, Detail: why, Control: "none: the probe plugin did not run"})
	}
	pp, err := p.preparePlugin()
	if pp != nil {
		defer pp.close()
	}
	if err != nil {
		failed(checkPluginStarts, err.Error())
		return
	}
	pol, err := pluginpolicy.For(p.o.Home, PluginName, pp.dir, pp.exe,
		&manifest.Manifest{Network: &manifest.Network{Hosts: []string{pp.declared.addr()}}},
		config.Plugin{Unconfined: p.o.Faults.PluginUnconfined})
	if err != nil {
		failed(checkPluginStarts, "its policy: "+err.Error())
		return
	}
	cp, eo, err := pol.Impose(p.o.Support, egress.Options{Logger: p.log, Record: pp.record})
	if err != nil {
		failed(checkPluginStarts, err.Error())
		return
	}
	how := "unconfined"
	if cp != nil {
		how = "confined by " + p.o.Support.String()
	}
	r.stage("plugin: starting the probe plugin, " + how)
	proc, err := pluginhost.Start(ctx, pluginhost.Spec{Name: PluginName, Dir: pp.dir, Exec: pp.exe, DataDir: pp.data,
		SocketDir: p.o.Home.PluginSocketDir(), Logger: p.log, Confine: cp, Egress: eo})
	if err != nil {
		failed(checkPluginStarts, err.Error())
		return
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer scancel()
		if err := proc.Shutdown(sctx); err != nil {
			proc.Kill()
		}
		<-proc.Done()
	}()
	if err := proc.Init(ctx, nil, nil); err != nil {
		failed(checkPluginStarts, "init: "+err.Error())
		return
	}
	r.check(api.ProveCheck{Name: checkPluginStarts, Side: api.ProveSidePlugin, Passed: cp != nil,
		Detail:  fmt.Sprintf("pid %d, %s; may read %s, write %s, reach %s through its egress point", proc.PID(), how, pp.dir, pp.data, pp.declared.addr()),
		Control: "it answered the core over its own connection"})
	r.stage("plugin: probing from inside the plugin")
	pr := &pluginProbes{ctx: ctx, proc: proc}
	p.judgePlugin(r, pp, pr)
}

// pluginProbes runs probes in the probe plugin.
type pluginProbes struct {
	ctx  context.Context
	proc *pluginhost.Process
}

// outcome is what one probe found.
type outcome struct {
	ok       bool   // it worked
	why      string // the error it got, or why the call failed
	answered bool   // the handler answered the call
}

func (pr *pluginProbes) try(kind, target string) outcome {
	res, err := pr.proc.Invoke(pr.ctx, &plugin.Request{Tool: "probe", Arguments: map[string]any{"kind": kind, "target": target}})
	if err != nil {
		return outcome{why: "the probe call failed: " + err.Error()}
	}
	ok, _ := res["ok"].(bool)
	why, _ := res["error"].(string)
	return outcome{ok: ok, why: why, answered: true}
}

// denied reports whether o is a refusal by the operating system (Landlock,
// seccomp and Seatbelt answer EACCES or EPERM), not a failure for some
// other reason, which would prove nothing.
func (o outcome) denied() bool {
	return !o.ok && o.answered && (strings.Contains(o.why, "permission denied") || strings.Contains(o.why, "operation not permitted"))
}

// String says what happened, on one line.
func (o outcome) String() string {
	switch {
	case o.ok:
		return "it WORKED"
	case o.denied():
		return "denied (" + o.why + ")"
	}
	return "failed, but not for want of permission (" + o.why + ")"
}

// preparedPlugin is the probe plugin's folders and the listeners of one run.
type preparedPlugin struct {
	work, dir, data, own, canary, exe string
	declared, undeclared              *tcpCounter
	udp, dns                          *udpCounter

	mu      sync.Mutex
	records []egress.Record // what its egress point reported
}

// preparePlugin makes the probe plugin's folder (run/prove/plugin, with a
// file of its own), its data folder, a canary beside its folder, and the
// loopback listeners: its declared host, an undeclared one, and UDP and
// DNS listeners that count what arrives.
func (p *Prover) preparePlugin() (*preparedPlugin, error) {
	h := p.o.Home
	pp := &preparedPlugin{work: h.Path("run", "prove"), data: h.DataDir(PluginName)}
	pp.dir, pp.canary = filepath.Join(pp.work, "plugin"), filepath.Join(pp.work, "canary")
	pp.own = filepath.Join(pp.dir, "own")
	for _, d := range []string{pp.work, pp.data} {
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("clear %s: %w", d, err)
		}
	}
	if err := os.MkdirAll(pp.dir, 0o700); err != nil {
		return nil, fmt.Errorf("the probe plugin's folder: %w", err)
	}
	for path, text := range map[string]string{pp.own: "the probe plugin's own file\n", pp.canary: "a file of the core's, outside the plugin's folders\n"} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return pp, fmt.Errorf("plant %s: %w", path, err)
		}
	}
	exe := p.o.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return pp, fmt.Errorf("find this executable, the probe plugin's handler: %w", err)
		}
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	pp.exe = filepath.Clean(exe)
	var err error
	if pp.declared, err = listenTCP(); err != nil {
		return pp, err
	}
	if pp.undeclared, err = listenTCP(); err != nil {
		return pp, err
	}
	if pp.udp, err = listenUDP("127.0.0.1:0"); err != nil {
		return pp, err
	}
	if pp.dns, err = listenUDP("127.0.0.1:0"); err != nil {
		return pp, err
	}
	return pp, nil
}

// record keeps what the egress point reports.
func (pp *preparedPlugin) record(rec egress.Record) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.records = append(pp.records, rec)
}

// refusedBy reports whether the egress point refused a request for
// target with code.
func (pp *preparedPlugin) refusedBy(target, code string) bool {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for _, r := range pp.records {
		if net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port))) == target && r.Code == code {
			return true
		}
	}
	return false
}

// close stops the listeners and removes the folders.
func (pp *preparedPlugin) close() {
	for _, c := range []*tcpCounter{pp.declared, pp.undeclared} {
		if c != nil {
			c.close()
		}
	}
	for _, c := range []*udpCounter{pp.udp, pp.dns} {
		if c != nil {
			c.close()
		}
	}
	_ = os.RemoveAll(pp.work)
	_ = os.RemoveAll(pp.data)
}

// judgePlugin runs the probes and reports each promise with its control.
func (p *Prover) judgePlugin(r *run, pp *preparedPlugin, pr *pluginProbes) {
	h := p.o.Home
	check := func(name string, passed bool, detail, control string) {
		r.check(api.ProveCheck{Name: name, Side: api.ProveSidePlugin, Passed: passed, Detail: detail, Control: control})
	}
	// The positive controls first: what it may do, it can.
	own := pr.try(probeRead, pp.own)
	ownCtl := "it read its own folder's file (" + own.String() + ")"
	if own.ok {
		ownCtl = "it read its own folder's file"
	}
	egressOK := pr.try(probeEgress, pp.declared.addr())
	declaredSeen := egressOK.ok && pp.declared.wait(1)
	// An undeclared host through the egress point, before any direct
	// probe can reach its listener: the count is the egress point's.
	undeclared := pr.try(probeEgress, pp.undeclared.addr())
	undeclaredReached := pp.undeclared.accepted.Load()

	// Reads outside its folders: each target is one the core itself reads
	// (its control: the file is there and readable by this user).
	credTarget, credWhat, credCleanup := p.credentialTarget()
	defer credCleanup()
	coreFiles, coreWhat := []string{h.AuditLog()}, "the audit log (there is no config.toml)"
	if isFile(h.Config()) {
		coreFiles, coreWhat = append([]string{h.Config()}, coreFiles...), "config.toml and the audit log"
	}
	for _, c := range []struct {
		name    string
		targets []string
		what    string
	}{
		{checkPluginCredentials, []string{credTarget}, credWhat},
		{checkPluginCoreFiles, coreFiles, coreWhat},
		{checkPluginCanary, []string{pp.canary}, "a canary the core planted beside its folder"},
	} {
		passed := own.ok
		var details, controls []string
		for _, t := range c.targets {
			o := pr.try(probeRead, t)
			details = append(details, "read "+t+": "+o.String())
			passed = passed && o.denied()
			if err := coreReads(t); err != nil {
				passed = false
				controls = append(controls, "the core could not read "+t+" itself: "+err.Error())
			}
		}
		control := ownCtl + "; the core read " + c.what + " itself"
		if len(controls) > 0 {
			control = ownCtl + "; " + strings.Join(controls, "; ")
		}
		check(c.name, passed, strings.Join(details, "; "), control)
	}

	// Writes: only its data folder (and its temp folder inside).
	var details []string
	passed := true
	for _, t := range []string{filepath.Join(pp.dir, "dropped"), filepath.Join(pp.work, "dropped")} {
		o := pr.try(probeWrite, t)
		details = append(details, "write "+t+": "+o.String())
		passed = passed && o.denied()
	}
	note, tmpNote := filepath.Join(pp.data, "note"), filepath.Join(pp.data, "tmp", "note")
	wNote, wTmp := pr.try(probeWrite, note), pr.try(probeWrite, tmpNote)
	wrote := wNote.ok && wTmp.ok && hasContent(note) && hasContent(tmpNote)
	control := "it wrote its data folder and its temp folder, and the core read what it wrote"
	if !wrote {
		control = fmt.Sprintf("CONTROL FAILED: write %s: %s; write %s: %s", note, wNote, tmpNote, wTmp)
	}
	check(checkPluginWrites, passed && wrote, strings.Join(details, "; "), control)

	// The core's sockets: the control socket, which would let it approve
	// its own confirmations.
	ctl := pr.try(probeControl, h.ControlSocket())
	control = "it answered the core over its own connection, and the core connected to " + h.ControlSocket() + " itself"
	ctlLive := coreDials(h.ControlSocket())
	if ctlLive != nil {
		control = "CONTROL FAILED: the core could not connect to its own control socket: " + ctlLive.Error()
	}
	check(checkPluginControl, ctl.denied() && ctl.answered && ctlLive == nil, "GET /v1/status on "+h.ControlSocket()+": "+ctl.String(), control)

	// Signals: not the core.
	sig := pr.try(probeSignal, strconv.Itoa(os.Getpid()))
	self := pr.try(probeSignal, "0")
	control = "it signalled itself (signal 0)"
	if !self.ok {
		control = "CONTROL FAILED: signal 0 to itself: " + self.String()
	}
	check(checkPluginSignal, sig.denied() && self.ok, fmt.Sprintf("signal 0 to the core (pid %d): %s", os.Getpid(), sig), control)

	// Its own network: none, not even to its declared host directly.
	details, passed = nil, true
	for _, a := range []struct{ kind, target, what string }{
		{probeTCP, pp.declared.addr(), "TCP to its declared host, directly"},
		{probeTCP, pp.undeclared.addr(), "TCP to another loopback listener"},
		{probeUDP, pp.udp.addr(), "UDP to a loopback listener"},
		{probeResolve, pp.dns.addr(), "a DNS query to a loopback listener"},
	} {
		o := pr.try(a.kind, a.target)
		details = append(details, a.what+" ("+a.target+"): "+o.String())
		passed = passed && o.denied()
	}
	egressCtl := func() string {
		if declaredSeen {
			return "through its egress point it reached its declared host " + pp.declared.addr() + ", whose listener accepted the connection"
		}
		return fmt.Sprintf("CONTROL FAILED: through its egress point, its declared host %s: %s (the listener accepted %d)", pp.declared.addr(), egressOK, pp.declared.accepted.Load())
	}
	// Counted on the core's side, after every probe: only the egress
	// connection reached a listener.
	counts := fmt.Sprintf("the core's listeners counted: declared %d (want 1, the egress one), other %d, UDP %d, DNS %d (want 0)",
		pp.declared.accepted.Load(), pp.undeclared.accepted.Load(), pp.udp.got.Load(), pp.dns.got.Load())
	quiet := pp.declared.accepted.Load() == 1 && pp.undeclared.accepted.Load() == 0 && pp.udp.got.Load() == 0 && pp.dns.got.Load() == 0
	check(checkPluginNetwork, passed && declaredSeen && quiet, strings.Join(details, "; ")+"; "+counts, egressCtl())

	refused := !undeclared.ok && strings.Contains(undeclared.why, pluginproto.EgressHostNotDeclared) && pp.refusedBy(pp.undeclared.addr(), pluginproto.EgressHostNotDeclared)
	detail := "through its egress point, " + pp.undeclared.addr() + ": " + undeclared.why
	if undeclared.ok {
		detail = "through its egress point, " + pp.undeclared.addr() + ": it WORKED"
	}
	if refused {
		detail += " (the egress point recorded the refusal)"
	}
	check(checkPluginUndeclared, refused && declaredSeen && undeclaredReached == 0, detail, egressCtl())
}

// credentialCanaryKey is the key of the canary credential the proof
// stores in the model key's own namespace when no model key is in a file.
const credentialCanaryKey = "prove-canary"

// credentialTarget is the credential file the probe plugin must not read:
// the model key's, when it is stored in a file (the file store: Linux);
// else a canary the core stores beside where it would be (on macOS the
// model key is in the Keychain, which the plugin's Seatbelt profile does
// not reach; this proves the file store's folder is out of reach too).
// cleanup removes the canary.
func (p *Prover) credentialTarget() (path, what string, cleanup func()) {
	dir := filepath.Join(p.o.Home.CredentialsDir(), "plugins", keychain.LLMPlugin)
	for _, k := range []string{keychain.LLMKeyAPI, keychain.LLMKeyOAuth} {
		if f := filepath.Join(dir, k); isFile(f) {
			return f, "the model key's file", func() {}
		}
	}
	fs := keychain.NewFileStore(p.o.Home.CredentialsDir())
	if err := fs.Set(keychain.LLMPlugin, credentialCanaryKey, []byte("carapace-prove canary credential")); err != nil {
		p.log.Warn("could not store the canary credential", "err", err)
	}
	return filepath.Join(dir, credentialCanaryKey), "a canary credential stored beside where the model key would be (no model key is in a file here)",
		func() {
			_ = fs.Delete(keychain.LLMPlugin, credentialCanaryKey)
			_ = os.Remove(dir) // only if empty: it was for the canary
		}
}

// isFile reports whether path is a regular file.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// hasContent reports whether the file at path is there and not empty.
func hasContent(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && len(b) > 0
}

// coreReads reads a byte of the file at path, or an entry of the folder,
// as the core: the control of a read the plugin must be refused.
func coreReads(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		_, err = f.ReadDir(1)
	} else {
		_, err = f.Read(make([]byte, 1))
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// coreDials connects to the Unix socket at path and hangs up.
func coreDials(path string) error {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// tcpCounter is a loopback TCP listener that counts what it accepts.
type tcpCounter struct {
	ln       net.Listener
	accepted atomic.Int64
}

func listenTCP() (*tcpCounter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("a loopback listener: %w", err)
	}
	c := &tcpCounter{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			go func() {
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = conn.Read(make([]byte, 64))
				conn.Close()
			}()
		}
	}()
	return c, nil
}

func (c *tcpCounter) addr() string { return c.ln.Addr().String() }
func (c *tcpCounter) close()       { c.ln.Close() }

// wait waits, within a bound, until the listener has accepted n
// connections, and reports whether it has.
func (c *tcpCounter) wait(n int64) bool {
	for deadline := time.Now().Add(5 * time.Second); c.accepted.Load() < n; {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// udpCounter is a UDP socket that counts the datagrams it gets and never
// answers.
type udpCounter struct {
	pc  net.PacketConn
	got atomic.Int64
}

func listenUDP(addr string) (*udpCounter, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("a UDP listener: %w", err)
	}
	c := &udpCounter{pc: pc}
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			c.got.Add(1)
		}
	}()
	return c, nil
}

func (c *udpCounter) addr() string { return c.pc.LocalAddr().String() }
func (c *udpCounter) close()       { c.pc.Close() }
