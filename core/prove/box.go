package prove

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/carapace-dev/carapace/core/agent"
	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/prove/boxprobe"
	"github.com/carapace-dev/carapace/core/runtime"
)

// Box runs the box side's container as a session's (core/agent's Runner).
type Box interface {
	RunProbe(ctx context.Context, p agent.Probe) (agent.ProbeResult, error)
}

var _ Box = (*agent.Runner)(nil)

// BoxGroup is the group the box side's session belongs to: its workspace
// is where the canary is planted.
const BoxGroup = "carapace-prove"

// Where the probe is, on the host and in the box.
const (
	probeName   = "carapace-probe"
	probeTarget = "/run/carapace/" + probeName
	// canaryFile is the canary key's file in the workspace.
	canaryFile = ".carapace-prove-canary"
	// keyPrefix is what the model API's keys and tokens start with.
	keyPrefix = "sk-ant-"
)

// boxTimeout bounds the box side: the container's start (an engine that
// boots a VM first takes the longest), its probes and its stop.
const boxTimeout = 4 * time.Minute

// The box side's checks, by name.
const (
	checkBoxStarts  = "box: starts as an agent session's"
	checkBoxPublic  = "box: no route out: public addresses"
	checkBoxHost    = "box: no route out: the host and the engine's bridge"
	checkBoxDNS     = "box: no DNS"
	checkBoxRootFS  = "box: read-only root"
	checkBoxCaps    = "box: no capabilities"
	checkBoxNotRoot = "box: not root"
	checkBoxNoKey   = "box: no model key inside"
	checkBoxModel   = "box: the model API only through the core's proxy"
)

// Addresses out in the world the box must not reach.
var (
	publicTCP = []string{"1.1.1.1:443", "8.8.8.8:53", "[2606:4700:4700::1111]:443"}
	publicUDP = []string{"1.1.1.1:53", "8.8.8.8:53"}
	// hostNames are the names engines give the host inside a container.
	hostNames = []string{"example.com", "host.docker.internal", "host.containers.internal"}
)

// ProbePath is the static linux probe for arch beside this executable, as
// `make build` puts it (bin/linux-<arch>/carapace-probe), or in
// Carapace.app's Resources when this is Contents/MacOS/carapace.
func ProbePath(arch string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this executable: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	dir := filepath.Dir(exe)
	if filepath.Base(dir) == "MacOS" {
		dir = filepath.Join(filepath.Dir(dir), "Resources")
	}
	p := filepath.Join(dir, "linux-"+arch, probeName)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("the box's probe for linux/%s is not at %s: build it with make build (it builds bin/linux-%s/%s beside the static ipc)", arch, p, arch, probeName)
	}
	return p, nil
}

// proveBox runs the box side and returns the engine that ran it.
func (p *Prover) proveBox(ctx context.Context, r *run) string {
	ctx, cancel := context.WithTimeout(ctx, boxTimeout)
	defer cancel()
	failed := func(why string) {
		r.check(api.ProveCheck{Name: checkBoxStarts, Side: api.ProveSideBox, Detail: why, Control: "none: the probe did not run in a box"})
	}
	if p.o.Engine == "none" {
		failed("config.toml sets runtime.engine = \"none\": agents run on this machine as you, in no box, and none of the box's promises hold (set it to \"auto\", \"docker\", \"podman\" or \"apple\")")
		return ""
	}
	if p.o.Box == nil {
		failed("this core has no container engine")
		return ""
	}
	bin := p.o.ProbeBinary
	if bin == "" {
		var err error
		if bin, err = ProbePath(goruntime.GOARCH); err != nil {
			failed(err.Error())
			return ""
		}
	}
	b, err := p.prepareBox()
	if b != nil {
		defer b.close()
	}
	if err != nil {
		failed(err.Error())
		return ""
	}
	plan, err := json.Marshal(b.plan)
	if err != nil {
		failed("the plan: " + err.Error())
		return ""
	}
	probe := agent.Probe{Group: BoxGroup, Cmd: []string{probeTarget, string(plan)},
		Mounts:  []runtime.Mount{{Source: bin, Target: probeTarget, ReadOnly: true}},
		Prepare: b.prepare}
	if p.o.Faults.BoxRoot {
		probe.User = "0:0"
	}
	if p.o.Faults.BoxKeyInEnv {
		probe.Env = append(probe.Env, "CARAPACE_PROVE_FAULT="+keyPrefix+"api03-fault-"+b.plan.Nonce)
	}
	r.stage(fmt.Sprintf("box: starting a container (runtime.engine = %s), built as an agent session's, with the probe instead of the agent", p.o.Engine))
	res, err := p.o.Box.RunProbe(ctx, probe)
	if err != nil {
		failed(err.Error())
		return res.Engine
	}
	obs, perr := boxprobe.Parse(res.Stdout)
	what := fmt.Sprintf("%s, image %s, session %s, user %s, the flags and mounts of every session, the probe mounted read-only at %s",
		res.Engine, res.Image, res.Session, res.User, probeTarget)
	if res.Error != "" || res.Exit != 0 || perr != nil || len(obs) == 0 {
		why := fmt.Sprintf("%s: exit %d %s %v; stderr: %s", what, res.Exit, res.Error, errors.Join(perr), clip(res.Stderr, 600))
		failed(why)
		return res.Engine
	}
	r.check(api.ProveCheck{Name: checkBoxStarts, Side: api.ProveSideBox, Passed: true, Detail: what,
		Control: fmt.Sprintf("the probe ran to the end and reported %d observations", len(obs))})
	r.stage("box: judging what the probe saw from inside")
	p.judgeBox(r, b, res, obs)
	return res.Engine
}

// preparedBox is one run's plan, its canary and the host's listeners.
type preparedBox struct {
	plan      boxprobe.Plan
	canary    string // the canary key
	groupDir  string // the group's folder, as the core lays it out
	existed   bool   // the group's folder was there before the proof
	workspace string // filled in by prepare

	tcp      net.Listener
	udp      net.PacketConn
	mu       sync.Mutex
	accepted []string // remote addresses of the TCP connections, in order
	datagram atomic.Int64
	controls []string // the host addresses the core reached its listener on
	skipped  []string // host addresses left out: the core could not reach them itself
	model    string   // the model API's host:port
}

// prepareBox opens the host's listeners on every address and proves them
// live from the host (each one's control), then writes the plan.
func (p *Prover) prepareBox() (*preparedBox, error) {
	var nb [8]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return nil, err
	}
	nonce := hex.EncodeToString(nb[:])
	b := &preparedBox{canary: keyPrefix + "carapace-prove-canary-" + nonce, groupDir: p.o.Home.Path("groups", BoxGroup)}
	if _, err := os.Stat(b.groupDir); err == nil {
		b.existed = true
	}
	var err error
	if b.tcp, err = net.Listen("tcp", ":0"); err != nil {
		return b, fmt.Errorf("a listener on the host's addresses: %w", err)
	}
	if b.udp, err = net.ListenPacket("udp", ":0"); err != nil {
		return b, fmt.Errorf("a UDP socket on the host's addresses: %w", err)
	}
	go b.accept()
	go b.receive()
	port := b.tcp.Addr().(*net.TCPAddr).Port
	uport := b.udp.LocalAddr().(*net.UDPAddr).Port
	var hostTCP, hostUDP []string
	for _, a := range hostAddrs() {
		ta, ua := netip.AddrPortFrom(a, uint16(port)).String(), netip.AddrPortFrom(a, uint16(uport)).String()
		c, err := net.DialTimeout("tcp", ta, 2*time.Second)
		if err != nil {
			b.skipped = append(b.skipped, ta+" ("+err.Error()+")")
			continue
		}
		c.Close()
		if u, err := net.Dial("udp", ua); err == nil {
			_, _ = u.Write([]byte("control"))
			u.Close()
		}
		b.controls = append(b.controls, a.String())
		hostTCP, hostUDP = append(hostTCP, ta), append(hostUDP, ua)
	}
	// The controls must have arrived before the box starts: what arrives
	// later is the box's.
	for deadline := time.Now().Add(5 * time.Second); b.acceptedCount() < len(b.controls) || b.datagram.Load() < int64(len(b.controls)); {
		if time.Now().After(deadline) {
			return b, fmt.Errorf("the core's listener on the host's addresses got %d of %d connections and %d of %d datagrams from the core itself",
				b.acceptedCount(), len(b.controls), b.datagram.Load(), len(b.controls))
		}
		time.Sleep(5 * time.Millisecond)
	}
	model, modelTCP := p.modelTargets()
	b.model = model
	names := slices.Clone(hostNames)
	if h, _, err := net.SplitHostPort(model); err == nil && net.ParseIP(h) == nil {
		names = append(names, h)
	}
	b.plan = boxprobe.Plan{
		Nonce: nonce, RelayPath: "/v1/carapace-prove-" + nonce,
		PublicTCP: publicTCP, PublicUDP: publicUDP, HostTCP: hostTCP, HostUDP: hostUDP,
		Names: names, ModelTCP: modelTCP,
		Writable: []string{runtime.WorkspacePath}, ReadOnly: []string{"/", "/usr", "/etc"},
		KeyPrefix: keyPrefix,
	}
	return b, nil
}

// prepare plants the canary key in the group's workspace, readable by the
// agent's user.
func (b *preparedBox) prepare(workspace string) error {
	b.workspace = workspace
	return os.WriteFile(filepath.Join(workspace, canaryFile), []byte("a canary the core planted: "+b.canary+"\n"), 0o644)
}

// close stops the listeners and removes what the proof left in the
// group's folder: all of it when the proof made it, else its own files.
func (b *preparedBox) close() {
	if b.tcp != nil {
		b.tcp.Close()
	}
	if b.udp != nil {
		b.udp.Close()
	}
	if b.workspace == "" {
		return
	}
	if !b.existed && filepath.Dir(b.workspace) == b.groupDir {
		_ = os.RemoveAll(b.groupDir)
		return
	}
	_ = os.Remove(filepath.Join(b.workspace, canaryFile))
	_ = os.Remove(filepath.Join(b.workspace, ".carapace-probe-"+b.plan.Nonce))
}

func (b *preparedBox) accept() {
	for {
		c, err := b.tcp.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.accepted = append(b.accepted, c.RemoteAddr().String())
		b.mu.Unlock()
		c.Close()
	}
}

func (b *preparedBox) receive() {
	buf := make([]byte, 512)
	for {
		if _, _, err := b.udp.ReadFrom(buf); err != nil {
			return
		}
		b.datagram.Add(1)
	}
}

func (b *preparedBox) acceptedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.accepted)
}

// hostAddrs are this machine's addresses but loopback and link-local:
// its LAN addresses and the engines' bridges (Docker's docker0, Apple's
// vmnet bridge while a VM runs), at most 16.
func hostAddrs() []netip.Addr {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, ifa := range ifas {
		pfx, err := netip.ParsePrefix(ifa.String())
		if err != nil {
			continue
		}
		a := pfx.Addr().Unmap()
		if a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || slices.Contains(out, a) {
			continue
		}
		out = append(out, a)
		if len(out) == 16 {
			break
		}
	}
	return out
}

// modelTargets are the model API's host:port (config.toml's [llm]
// upstream) and the addresses the host resolves it to, at most four.
func (p *Prover) modelTargets() (string, []string) {
	up := p.o.ModelUpstream
	if up == "" {
		up = "https://api.anthropic.com"
	}
	u, err := url.Parse(up)
	if err != nil || u.Hostname() == "" {
		return "", nil
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	model := net.JoinHostPort(u.Hostname(), port)
	targets := []string{model}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname()); err == nil {
		for _, ip := range ips {
			t := netip.AddrPortFrom(ip.Unmap(), 0).Addr().String()
			if t != u.Hostname() && len(targets) < 5 {
				targets = append(targets, net.JoinHostPort(t, port))
			}
		}
	}
	return model, targets
}

// noRoute reports whether a failed connection failed for want of a
// route: the network is unreachable, no address could be bound, it
// timed out, or the name did not resolve. A refused connection is not
// one: something answered.
func noRoute(o boxprobe.Observation) bool {
	if o.OK {
		return false
	}
	for _, s := range []string{"unreachable", "no route to host", "cannot assign requested address", "i/o timeout",
		"deadline exceeded", "lookup ", "no such host"} {
		if strings.Contains(o.Error, s) {
			return true
		}
	}
	return false
}

// said says what an observation found, on one line.
func said(o boxprobe.Observation) string {
	switch {
	case o.OK && o.Value != "":
		return "it WORKED (" + o.Value + ")"
	case o.OK:
		return "it WORKED"
	}
	return o.Error
}

// judgeBox turns the probe's observations and the core's counts into the
// box's checks.
func (p *Prover) judgeBox(r *run, b *preparedBox, res agent.ProbeResult, obs []boxprobe.Observation) {
	check := func(name string, passed bool, detail, control string) {
		r.check(api.ProveCheck{Name: name, Side: api.ProveSideBox, Passed: passed, Detail: detail, Control: control})
	}
	of := func(probe string) []boxprobe.Observation {
		var out []boxprobe.Observation
		for _, o := range obs {
			if o.Probe == probe {
				out = append(out, o)
			}
		}
		return out
	}
	one := func(probe string) boxprobe.Observation {
		if l := of(probe); len(l) > 0 {
			return l[0]
		}
		return boxprobe.Observation{Probe: probe, Error: "the probe did not report it"}
	}
	in := func(list []string, t string) bool { return slices.Contains(list, t) }
	// tried lists observations of probe whose target is in targets, and
	// whether every one failed for want of a route.
	tried := func(probe string, targets []string) (bool, []string) {
		all, seen := true, 0
		var lines []string
		for _, o := range of(probe) {
			if !in(targets, o.Target) {
				continue
			}
			seen++
			lines = append(lines, fmt.Sprintf("%s %s: %s", strings.ToUpper(probe), o.Target, said(o)))
			all = all && noRoute(o)
		}
		return all && seen == len(targets), lines
	}
	lo := one(boxprobe.ProbeLoopbackTCP)
	loCtl := "TCP to its own listener on the box's loopback (" + lo.Target + ") worked"
	if !lo.OK {
		loCtl = "CONTROL FAILED: TCP to its own listener on the box's loopback: " + lo.Error
	}

	// Public addresses.
	okT, lt := tried(boxprobe.ProbeTCP, b.plan.PublicTCP)
	okU, lu := tried(boxprobe.ProbeUDP, b.plan.PublicUDP)
	check(checkBoxPublic, okT && okU && lo.OK, strings.Join(append(lt, lu...), "; "), loCtl)

	// The host and the engine's bridge: nothing arrived but the controls.
	okT, lt = tried(boxprobe.ProbeTCP, b.plan.HostTCP)
	okU, lu = tried(boxprobe.ProbeUDP, b.plan.HostUDP)
	b.mu.Lock()
	extra := slices.Clone(b.accepted[min(len(b.controls), len(b.accepted)):])
	b.mu.Unlock()
	dgrams := b.datagram.Load() - int64(len(b.controls))
	counted := fmt.Sprintf("the core's listener on those addresses got %d connections and %d datagrams besides its own controls", len(extra), dgrams)
	if len(extra) > 0 {
		counted += " (from " + strings.Join(extra, ", ") + ")"
	}
	detail := strings.Join(append(lt, lu...), "; ")
	if len(b.plan.HostTCP) == 0 {
		detail = "the host has no address but loopback and link-local to try"
	}
	detail += "; " + counted
	if len(b.skipped) > 0 {
		detail += "; left out, the core could not reach them itself: " + strings.Join(b.skipped, ", ")
	}
	hostCtl := fmt.Sprintf("the core reached its own listener on each of them (%s), TCP and UDP; ", strings.Join(b.controls, ", ")) + loCtl
	check(checkBoxHost, okT && okU && len(b.plan.HostTCP) > 0 && len(extra) == 0 && dgrams == 0 && lo.OK, detail, hostCtl)

	// DNS.
	dns := one(boxprobe.ProbeLoopbackDNS)
	dnsCtl := "the same resolver's query reached its own DNS listener on the box's loopback (" + dns.Target + ")"
	if !dns.OK {
		dnsCtl = "CONTROL FAILED: a query to its own DNS listener on the box's loopback: " + dns.Error
	}
	var lines []string
	resolved := false
	for _, o := range of(boxprobe.ProbeResolve) {
		lines = append(lines, "resolve "+o.Target+": "+said(o))
		resolved = resolved || o.OK
	}
	check(checkBoxDNS, !resolved && len(lines) == len(b.plan.Names) && dns.OK, strings.Join(lines, "; "), dnsCtl)

	// The root.
	var roLines []string
	ro, wsOK := true, false
	wsCtl := "CONTROL FAILED: it could not write " + runtime.WorkspacePath
	for _, o := range of(boxprobe.ProbeWrite) {
		if o.Target == runtime.WorkspacePath {
			host := filepath.Join(b.workspace, ".carapace-probe-"+b.plan.Nonce)
			if o.OK && hasContent(host) {
				wsOK, wsCtl = true, "it wrote "+o.Value+", and the core found the file in the group's workspace on the host ("+host+")"
			} else if o.OK {
				wsCtl = "CONTROL FAILED: it wrote " + o.Value + ", but the core did not find " + host
			} else {
				wsCtl += ": " + o.Error
			}
			continue
		}
		roLines = append(roLines, "write in "+o.Target+": "+said(o))
		ro = ro && !o.OK && strings.Contains(o.Error, "read-only file system")
	}
	check(checkBoxRootFS, ro && len(roLines) == len(b.plan.ReadOnly) && wsOK, strings.Join(roLines, "; "), wsCtl)

	// Capabilities and the user.
	st := one(boxprobe.ProbeStatus)
	fields := map[string]string{}
	for _, f := range strings.Fields(st.Value) {
		if k, v, ok := strings.Cut(f, "="); ok {
			fields[k] = v
		}
	}
	zero := func(k string) bool { v := fields[k]; return v != "" && strings.Trim(v, "0") == "" }
	other, self := one(boxprobe.ProbeChownOther), one(boxprobe.ProbeChownSelf)
	capsCtl := "it gave its file to its own uid (chown " + self.Value + ")"
	if !self.OK {
		capsCtl = "CONTROL FAILED: chown of its own file to its own uid: " + self.Error
	}
	detail = fmt.Sprintf("/proc/self/status: CapEff=%s CapPrm=%s CapBnd=%s CapAmb=%s NoNewPrivs=%s Seccomp=%s; chown %s: %s",
		fields["CapEff"], fields["CapPrm"], fields["CapBnd"], fields["CapAmb"], fields["NoNewPrivs"], fields["Seccomp"], other.Value, said(other))
	check(checkBoxCaps, st.OK && zero("CapEff") && zero("CapPrm") && zero("CapAmb") && !other.OK && strings.Contains(other.Error, "operation not permitted") && self.OK,
		detail, capsCtl)
	wantUID, _, _ := strings.Cut(res.User, ":")
	uidCtl := "the uid is the one the core asked the engine for (" + res.User + ")"
	if fields["uid"] != wantUID {
		uidCtl = fmt.Sprintf("CONTROL FAILED: the core asked the engine for %s, the probe runs as uid %s", res.User, fields["uid"])
	}
	check(checkBoxNotRoot, st.OK && fields["uid"] != "0" && fields["euid"] != "0" && fields["uid"] != "" && fields["uid"] == wantUID,
		fmt.Sprintf("uid %s (effective %s), gid %s", fields["uid"], fields["euid"], fields["gid"]), uidCtl)

	// The model key.
	scan := one(boxprobe.ProbeScan)
	canaryAt := filepath.Join(runtime.WorkspacePath, canaryFile)
	canaryHash := boxprobe.KeyHash(b.canary)
	found, foreign := false, []string{}
	for _, o := range of(boxprobe.ProbeKey) {
		if o.Target == canaryAt && o.Value == canaryHash {
			found = true
			continue
		}
		foreign = append(foreign, fmt.Sprintf("%s (sha256 %.12s…)", o.Target, o.Value))
	}
	detail = fmt.Sprintf("scanned %s (the mount points: %s)", scan.Value, scan.Target)
	if scan.Error != "" {
		detail += "; the scan: " + scan.Error
	}
	if len(foreign) > 0 {
		detail += "; FOUND a key-shaped string (" + keyPrefix + "…) at " + strings.Join(foreign, ", ")
	} else {
		detail += "; found no key-shaped string (" + keyPrefix + "…) but the canary"
	}
	keyCtl := "the same scan found the canary key the core planted at " + canaryAt
	if !found {
		keyCtl = "CONTROL FAILED: the scan did not find the canary key the core planted at " + canaryAt
	}
	check(checkBoxNoKey, scan.OK && len(foreign) == 0 && found, detail, keyCtl)

	// The model API: through the relay and the core's proxy, and no other way.
	rel := one(boxprobe.ProbeRelay)
	okM, lm := tried(boxprobe.ProbeTCP, b.plan.ModelTCP)
	detail = "directly: " + strings.Join(lm, "; ")
	if len(b.plan.ModelTCP) == 0 {
		detail = "no model API host to try (config.toml's [llm] upstream)"
	}
	relCtl := fmt.Sprintf("through the relay (%s, then the session's model API socket) it got an answer: %s; the core's proxy counted %d request(s) from the box",
		rel.Target, rel.Value, res.ModelRequests)
	if !rel.OK || res.ModelRequests < 1 {
		relCtl = "CONTROL FAILED: " + relCtl
		if !rel.OK {
			relCtl = fmt.Sprintf("CONTROL FAILED: through the relay (%s): %s; the core's proxy counted %d request(s) from the box", rel.Target, rel.Error, res.ModelRequests)
		}
	}
	check(checkBoxModel, okM && len(b.plan.ModelTCP) > 0 && rel.OK && res.ModelRequests >= 1, detail, relCtl)
}

// clip cuts s to n bytes for a message.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
