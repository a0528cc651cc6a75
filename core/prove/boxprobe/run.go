package boxprobe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// dialTimeout bounds one connection attempt, and resolveTimeout one name.
const (
	dialTimeout    = 3 * time.Second
	resolveTimeout = 3 * time.Second
	relayTimeout   = 15 * time.Second
	// maxFileScan bounds what the scan reads of one file.
	maxFileScan = 16 << 20
)

// Run tries everything p asks for and reports each observation to emit,
// in order: the relay first (it is how the core learns the box reached
// it), then the controls and the network, the file system, the process's
// privileges, and last the scan for a key.
func Run(ctx context.Context, p Plan, emit func(Observation)) {
	emit(relay(ctx, p.RelayPath))
	emit(loopbackTCP(ctx))
	emit(loopbackDNS(ctx))
	for _, group := range [][]string{p.PublicTCP, p.HostTCP, p.ModelTCP} {
		for _, a := range group {
			emit(dialTCP(ctx, a))
		}
	}
	for _, group := range [][]string{p.PublicUDP, p.HostUDP} {
		for _, a := range group {
			emit(sendUDP(a))
		}
	}
	for _, n := range p.Names {
		emit(resolve(ctx, n))
	}
	var mine string // a file it wrote, for the chown probes
	for _, d := range p.Writable {
		o, path := write(d, p.Nonce)
		if o.OK && mine == "" {
			mine = path
		}
		emit(o)
	}
	for _, d := range p.ReadOnly {
		o, path := write(d, p.Nonce)
		if o.OK {
			_ = os.Remove(path)
		}
		emit(o)
	}
	emit(status())
	for _, o := range chown(mine) {
		emit(o)
	}
	for _, o := range scan(p.KeyPrefix, p.ScanRoots, p.ScanMax) {
		emit(o)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// relay sends an HTTP request through the model API's relay on
// 127.0.0.1:$CARAPACE_LLM_PORT, with raw TCP, and reads the answer's
// status line. When nothing listens there (an image whose entrypoint does
// not start the relay, such as the offline test image) it starts
// `ipc-relay` itself, as the real image's entrypoint does.
func relay(ctx context.Context, path string) Observation {
	o := Observation{Probe: ProbeRelay}
	port := os.Getenv("CARAPACE_LLM_PORT")
	if port == "" {
		o.Error = "CARAPACE_LLM_PORT is not set: the core did not give the box a model API relay"
		return o
	}
	addr := net.JoinHostPort("127.0.0.1", port)
	o.Target = addr
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		bin, lerr := exec.LookPath("ipc-relay")
		if lerr != nil {
			o.Error = fmt.Sprintf("nothing listens on %s (%v), and there is no ipc-relay to start the relay with: %v", addr, err, lerr)
			return o
		}
		cmd := exec.Command(bin, "--listen", addr)
		if err := cmd.Start(); err != nil {
			o.Error = fmt.Sprintf("nothing listens on %s, and `ipc-relay` did not start: %v", addr, err)
			return o
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		o.Value = "the probe started `ipc-relay` (the image's entrypoint had not); "
		for {
			if c, err = d.DialContext(ctx, "tcp", addr); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				o.Error = fmt.Sprintf("`ipc-relay` never listened on %s: %v", addr, err)
				return o
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		o.Error = "write the request: " + err.Error()
		return o
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		o.Error = fmt.Sprintf("read the answer: %v (got %.80q)", err, line)
		return o
	}
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "HTTP/1.") {
		o.Error = fmt.Sprintf("not an HTTP answer: %.80q", line)
		return o
	}
	o.OK = true
	o.Value += line
	return o
}

// loopbackTCP connects to a listener of its own on 127.0.0.1: the box's
// loopback works, so a refused connection elsewhere is the network's.
func loopbackTCP(ctx context.Context) Observation {
	o := Observation{Probe: ProbeLoopbackTCP}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		o.Error = "listen: " + err.Error()
		return o
	}
	defer ln.Close()
	o.Target = ln.Addr().String()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	got := dialTCP(ctx, o.Target)
	if !got.OK {
		o.Error = got.Error
		return o
	}
	select {
	case err := <-accepted:
		o.OK, o.Error = err == nil, errText(err)
	case <-time.After(dialTimeout):
		o.Error = "connected, but its listener accepted nothing"
	}
	return o
}

// loopbackDNS sends a DNS query, with the resolver the name probes use,
// to a listener of its own on 127.0.0.1, which counts it and never
// answers: the resolver works, so a failed lookup elsewhere is the
// network's.
func loopbackDNS(ctx context.Context) Observation {
	o := Observation{Probe: ProbeLoopbackDNS}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		o.Error = "listen: " + err.Error()
		return o
	}
	defer pc.Close()
	o.Target = pc.LocalAddr().String()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", o.Target)
	}}
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	go func() { _, _ = r.LookupHost(qctx, "carapace-prove.example") }()
	_ = pc.SetReadDeadline(time.Now().Add(dialTimeout))
	if _, _, err := pc.ReadFrom(make([]byte, 512)); err != nil {
		o.Error = "no query arrived: " + err.Error()
		return o
	}
	o.OK = true
	return o
}

// dialTCP opens a TCP connection to addr.
func dialTCP(ctx context.Context, addr string) Observation {
	o := Observation{Probe: ProbeTCP, Target: addr}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		o.Error = err.Error()
		return o
	}
	o.OK = true
	_, _ = c.Write([]byte("carapace-probe\n"))
	c.Close()
	return o
}

// sendUDP sends one datagram to addr: it works when there is a route.
func sendUDP(addr string) Observation {
	o := Observation{Probe: ProbeUDP, Target: addr}
	c, err := net.DialTimeout("udp", addr, dialTimeout)
	if err == nil {
		_, err = c.Write([]byte("carapace-probe"))
		c.Close()
	}
	o.OK, o.Error = err == nil, errText(err)
	return o
}

// resolve looks name up with the container's own resolver (the pure Go
// one of a static binary, reading /etc/resolv.conf and /etc/hosts).
func resolve(ctx context.Context, name string) Observation {
	o := Observation{Probe: ProbeResolve, Target: name}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		o.Error = err.Error()
		return o
	}
	o.OK, o.Value = true, strings.Join(addrs, " ")
	return o
}

// write creates a file named for the nonce in dir and writes to it; it
// returns the file's path.
func write(dir, nonce string) (Observation, string) {
	path := filepath.Join(dir, ".carapace-probe-"+nonce)
	o := Observation{Probe: ProbeWrite, Target: dir}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.WriteString("written by carapace-probe " + nonce + "\n")
		err = errors.Join(err, f.Close())
	}
	o.OK, o.Error = err == nil, errText(err)
	if o.OK {
		o.Value = path
	}
	return o, path
}

// status reads the process's identity and capability sets from
// /proc/self/status: "uid=1000 gid=1000 CapEff=… CapPrm=… CapBnd=…
// NoNewPrivs=1 Seccomp=2" (the kernel's own values).
func status() Observation {
	o := Observation{Probe: ProbeStatus, Target: "/proc/self/status"}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		o.Error = err.Error()
		return o
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			fields[k] = strings.Fields(v + " ?")[0] // the first value (Uid: real, effective, …)
		}
	}
	parts := []string{"uid=" + strconv.Itoa(os.Getuid()), "gid=" + strconv.Itoa(os.Getgid()), "euid=" + fields["Uid"]}
	for _, k := range []string{"CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"} {
		parts = append(parts, k+"="+fields[k])
	}
	o.OK, o.Value = true, strings.Join(parts, " ")
	return o
}

// chown gives the file it wrote to another uid, which takes CAP_CHOWN,
// and then to its own, which does not (the control).
func chown(path string) []Observation {
	other := Observation{Probe: ProbeChownOther, Target: path}
	self := Observation{Probe: ProbeChownSelf, Target: path}
	if path == "" {
		other.Error, self.Error = "no file written to try it on", "no file written to try it on"
		return []Observation{other, self}
	}
	uid, gid := os.Getuid(), os.Getgid()
	err := os.Chown(path, uid+1, -1)
	other.OK, other.Error = err == nil, errText(err)
	other.Value = "to uid " + strconv.Itoa(uid+1)
	err = os.Chown(path, uid, gid)
	self.OK, self.Error = err == nil, errText(err)
	self.Value = "to uid " + strconv.Itoa(uid)
	return []Observation{other, self}
}

// scan looks for prefix, and the key that follows it, in the environment,
// in init's environment, and in every regular file under roots, or when
// roots is empty under the container's mounts (from /proc/self/mountinfo:
// not the image's root, not /proc, /sys or /dev), reading at most max
// bytes in all. Each hit is reported
// by where it is and the SHA-256 of the key, never the key.
func scan(prefix string, roots []string, max int64) []Observation {
	if max <= 0 {
		max = DefaultScanMax
	}
	var out []Observation
	if prefix == "" {
		return []Observation{{Probe: ProbeScan, Error: "no key prefix to look for"}}
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		for _, h := range hits([]byte(v), prefix) {
			out = append(out, Observation{Probe: ProbeKey, Target: "environment " + k, OK: true, Value: h})
		}
	}
	if b, err := os.ReadFile("/proc/1/environ"); err == nil {
		for _, h := range hits(b, prefix) {
			out = append(out, Observation{Probe: ProbeKey, Target: "/proc/1/environ", OK: true, Value: h})
		}
	}
	mounts := roots
	if len(mounts) == 0 {
		var err error
		if mounts, err = mountPoints(); err != nil {
			return append(out, Observation{Probe: ProbeScan, Error: "read /proc/self/mountinfo: " + err.Error()})
		}
	}
	var files int
	var read int64
	var stopped []string
	seen := map[string]bool{}
	for _, m := range mounts {
		_ = filepath.WalkDir(m, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				stopped = append(stopped, path+": "+err.Error())
				return nil
			}
			if seen[path] {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			seen[path] = true
			if d.IsDir() {
				if skipped(path) {
					return fs.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			if read >= max {
				return fs.SkipAll
			}
			n, found, err := scanFile(path, prefix, min(maxFileScan, max-read))
			files++
			read += n
			if err != nil {
				stopped = append(stopped, path+": "+err.Error())
			}
			for _, h := range found {
				out = append(out, Observation{Probe: ProbeKey, Target: path, OK: true, Value: h})
			}
			return nil
		})
	}
	s := Observation{Probe: ProbeScan, OK: true, Target: strings.Join(mounts, " "),
		Value: fmt.Sprintf("its environment and %d files, %d bytes, under %d mount points", files, read, len(mounts))}
	if read >= max {
		s.OK, s.Error = false, fmt.Sprintf("stopped at %d bytes: the rest was not scanned", max)
	}
	if len(stopped) > 0 {
		sort.Strings(stopped)
		s.Value += fmt.Sprintf("; %d paths unreadable (first: %s)", len(stopped), stopped[0])
	}
	return append(out, s)
}

// skipped are the trees the scan leaves out: the kernel's.
func skipped(path string) bool {
	for _, p := range []string{"/proc", "/sys", "/dev"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// mountPoints lists the container's mount points, the root and the
// kernel's trees left out, sorted.
func mountPoints() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescape(f[4])
		if mp == "/" || skipped(mp) || seen[mp] {
			continue
		}
		seen[mp] = true
		out = append(out, mp)
	}
	sort.Strings(out)
	return out, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// scanFile reads up to limit bytes of path and returns the SHA-256 of
// every key that starts with prefix.
func scanFile(path, prefix string, limit int64) (int64, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit))
	return int64(len(b)), hits(b, prefix), err
}

// hits returns the SHA-256 (hex) of every key in b: prefix and the key
// characters that follow it.
func hits(b []byte, prefix string) []string {
	var out []string
	p := []byte(prefix)
	for {
		i := bytes.Index(b, p)
		if i < 0 {
			return out
		}
		j := i + len(p)
		for j < len(b) && isKeyChar(b[j]) {
			j++
		}
		sum := sha256.Sum256(b[i:j])
		out = append(out, hex.EncodeToString(sum[:]))
		b = b[j:]
	}
}

func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// KeyHash is what the probe reports for a key: its SHA-256 in hex.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
