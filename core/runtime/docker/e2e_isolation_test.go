package docker_test

// End-to-end isolation tests against the real Docker engine: every
// container is started by the Engine under test, with its full flag set,
// from the offline test image, and each test checks from inside the
// container what the agent can and cannot do.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/keychain"
)

// bridgeGateway returns the host's address on Docker's default bridge: the
// gateway of `docker network inspect bridge`, or, when the daemon does not
// record one, the address of the bridge's interface.
func bridgeGateway(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("docker", "network", "inspect", "bridge", "--format",
		`{{range .IPAM.Config}}{{.Gateway}}{{end}} {{index .Options "com.docker.network.bridge.name"}}`).Output()
	if err != nil {
		t.Fatalf("docker network inspect bridge: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) == 2 && net.ParseIP(f[0]) != nil {
		return f[0]
	}
	ifname := f[len(f)-1]
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatalf("bridge interface %q: %v", ifname, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ip, _, err := net.ParseCIDR(a.String()); err == nil && ip.To4() != nil {
			return ip.String()
		}
	}
	t.Fatalf("no IPv4 address on %s", ifname)
	return ""
}

// listener accepts TCP connections on every host address and counts them.
type listener struct {
	net.Listener
	accepted atomic.Int64
}

func listen(t *testing.T) *listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{Listener: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			c.Close()
		}
	}()
	return l
}

// probeScript defines probe NAME CMD...: it runs CMD and prints
// "PROBE NAME open|blocked: output".
const probeScript = `probe() {
	name=$1; shift
	if out=$("$@" 2>&1 </dev/null); then s=open; else s=blocked; fi
	echo "PROBE $name $s: $(echo $out)"
}
`

// 1. No network: no DNS, no egress by IP (TCP or UDP, v4 or v6), no way
// to the host, even to a port the host listens on on every address; only
// the loopback interface exists.
func TestNoNetwork(t *testing.T) {
	ctx := context.Background()
	gw := bridgeGateway(t)
	ln := listen(t)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	// Positive controls: the port is live on the gateway address, for the
	// host and for an ordinary container on the default bridge. Without
	// them a "blocked" below could mean a broken probe.
	c, err := net.DialTimeout("tcp", net.JoinHostPort(gw, port), 5*time.Second)
	if err != nil {
		t.Fatalf("control: the host cannot reach its own listener on %s:%s: %v", gw, port, err)
	}
	c.Close()
	waitAccepted(t, ln, 1)
	ctrl := "carapace-e2e-" + randHex(6)
	t.Cleanup(func() { removeByLabel(t, runtime.LabelSession, ctrl) })
	out, err := exec.Command("docker", "run", "--rm", "--pull", "never", "--name", ctrl,
		"--label", runtime.LabelSession+"="+ctrl, "--label", runtime.LabelInstance+"="+runID,
		"--network", "bridge", testImage, "--exec", "timeout", "10", "nc", "-w", "5", gw, port).CombinedOutput()
	if err != nil {
		t.Fatalf("control: a container on the default bridge cannot reach %s:%s: %v\n%s", gw, port, err, out)
	}
	waitAccepted(t, ln, 2)

	r := run(t, ctx, box{Script: probeScript + `
probe dns-resolver timeout 5 nslookup example.com
probe udp-8.8.8.8:53 timeout 5 nslookup example.com 8.8.8.8
probe udp-1.1.1.1:53 timeout 5 nslookup example.com 1.1.1.1
probe tcp-1.1.1.1:443 timeout 5 nc -w 2 1.1.1.1 443
probe tcp-8.8.8.8:53 timeout 5 nc -w 2 8.8.8.8 53
probe http-1.1.1.1:80 timeout 5 wget -q -O /dev/null http://1.1.1.1/
probe tcp-[2606:4700:4700::1111]:443 timeout 5 nc -w 2 2606:4700:4700::1111 443
probe host-listener-` + gw + `:` + port + ` timeout 5 nc -w 2 ` + gw + ` ` + port + `
probe host-ssh-` + gw + `:22 timeout 5 nc -w 2 ` + gw + ` 22
probe host-dockerd-` + gw + `:2375 timeout 5 nc -w 2 ` + gw + ` 2375
echo "LINKS $(ip -o link | cut -d: -f2 | tr -d ' ' | tr '\n' ' ')"
echo "DEVS $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
echo "ADDRS $(ip -o addr | awk '{print $2 "=" $4}' | tr '\n' ' ')"
echo "ROUTES $(ip route 2>&1; ip -6 route 2>&1)"
`})
	if r.Err != nil || r.Exit != 0 {
		t.Fatalf("probe container: exit %d, %v\n%s", r.Exit, r.Err, r.Output())
	}
	probes := lines(r.Stdout, "PROBE ")
	if len(probes) != 10 {
		t.Fatalf("%d probes ran, want 10:\n%s", len(probes), r.Output())
	}
	for _, p := range probes {
		t.Logf("probe %s", p)
		name, rest, _ := strings.Cut(p, " ")
		if !strings.HasPrefix(rest, "blocked") {
			t.Errorf("%s is reachable from the agent's container: %s", name, rest)
		} else if !strings.Contains(rest, "Network is unreachable") && !strings.Contains(rest, "Cannot assign requested address") {
			// A probe that failed for another reason (a missing applet,
			// an option busybox lacks) would pass as blocked.
			t.Errorf("%s failed, but not for want of a network: %s", name, rest)
		}
	}
	if n := ln.accepted.Load(); n != 2 {
		t.Errorf("the host listener accepted %d connections; only the 2 controls may connect", n)
	}
	for prefix, want := range map[string]string{"LINKS ": "lo", "DEVS ": "lo"} {
		if got := strings.Join(strings.Fields(strings.Join(lines(r.Stdout, prefix), " ")), " "); got != want {
			t.Errorf("interfaces (%s): %q, want only %q", strings.TrimSpace(prefix), got, want)
		}
	}
	if addrs := strings.Fields(strings.Join(lines(r.Stdout, "ADDRS "), " ")); len(addrs) == 0 || slices.ContainsFunc(addrs, func(a string) bool {
		return !strings.HasPrefix(a, "lo=127.") && a != "lo=::1/128"
	}) {
		t.Errorf("addresses: %q, want loopback only", addrs)
	}
	if routes := strings.TrimSpace(strings.Join(lines(r.Stdout, "ROUTES"), "")); routes != "" {
		t.Errorf("routes: %q, want none", routes)
	}
}

// waitAccepted waits until the listener has accepted n connections.
func waitAccepted(t *testing.T, ln *listener, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ln.accepted.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the listener accepted %d connections, want %d", ln.accepted.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeScript defines try NAME SCRIPT: it runs SCRIPT and prints
// "TRY NAME ok" or "TRY NAME failed: error".
const writeScript = `try() {
	if out=$(sh -c "$2" 2>&1); then echo "TRY $1 ok"; else echo "TRY $1 failed: $(echo $out)"; fi
}
`

// 2. The root is read-only, even where the agent owns a folder; /tmp
// (not executable) and $HOME are writable, $HOME belongs to the Spec's
// user, and mounts inside $HOME work.
func TestReadOnlyRoot(t *testing.T) {
	for _, tc := range []struct {
		name, user string
		mounted    bool // the workspace and the Claude Code folder
	}{
		{"default user, no mounts", "", false},
		{"user 1001:1002 with mounts", "1001:1002", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mounts []runtime.Mount
			var ws, claude string
			if tc.mounted {
				ws, claude = workspace(t), workspace(t)
				mounts = []runtime.Mount{{Source: ws, Target: runtime.WorkspacePath}, {Source: claude, Target: runtime.ClaudeDir}}
			}
			r := run(t, context.Background(), box{User: tc.user, Mounts: mounts, Script: writeScript + `
try root 'echo x > /x'
try etc 'echo x >> /etc/passwd'
try bin 'rm -f /bin/sh'
try usr 'echo x > /usr/local/bin/ipc'
try run 'mkdir /run/carapace/x'
try tmp 'echo x > /tmp/x && cat /tmp/x'
try home 'echo x > $HOME/x && mkdir -p $HOME/.cache/a && echo y > $HOME/.cache/a/b'
try claude-dir 'echo x > $HOME/.claude/settings.json'
try workspace 'echo from-the-container > /workspace/out'
try tmp-exec 'cp /bin/busybox /tmp/bb && /tmp/bb true'
echo "HOME $HOME $(stat -c %u:%g $HOME)"
echo "ROOTMOUNT $(awk '$2 == "/" {print $4}' /proc/mounts)"
`})
			if r.Err != nil || r.Exit != 0 {
				t.Fatalf("exit %d, %v\n%s", r.Exit, r.Err, r.Output())
			}
			tries := map[string]string{}
			for _, l := range lines(r.Stdout, "TRY ") {
				name, rest, _ := strings.Cut(l, " ")
				tries[name] = rest
			}
			want := map[string]string{
				// Permission denied or read-only, depending on which check
				// the kernel makes first: either way, not written.
				"root": "failed", "etc": "failed", "bin": "failed", "usr": "failed", "run": "failed", // refined below
				"tmp": "ok", "home": "ok",
				"tmp-exec": "Permission denied", // noexec
				// The image's /workspace belongs to the agent (1000): only
				// the read-only root stops the write.
				"workspace": "Read-only file system",
				// The tmpfs at $HOME hides the image's .claude folder.
				"claude-dir": "nonexistent directory",
			}
			if tc.mounted {
				want["workspace"], want["claude-dir"] = "ok", "ok"
			}
			for name, w := range want {
				if got := tries[name]; !strings.Contains(got, w) {
					t.Errorf("%s: %q, want %q", name, got, w)
				}
			}
			for _, name := range []string{"root", "etc", "bin", "usr", "run"} {
				if got := tries[name]; !strings.Contains(got, "Read-only file system") && !strings.Contains(got, "Permission denied") {
					t.Errorf("%s: %q, want it refused as read-only or not permitted, not for another reason", name, got)
				}
			}
			owner := "1000:1000"
			if tc.user != "" {
				owner = tc.user
			}
			if got := lines(r.Stdout, "HOME "); len(got) != 1 || got[0] != runtime.HomePath+" "+owner {
				t.Errorf("$HOME: %q, want %s owned by %s", got, runtime.HomePath, owner)
			}
			if got := lines(r.Stdout, "ROOTMOUNT "); len(got) != 1 || !strings.HasPrefix(got[0], "ro,") {
				t.Errorf("root mount options %q, want ro", got)
			}
			if tc.mounted {
				if b, err := os.ReadFile(filepath.Join(ws, "out")); err != nil || string(b) != "from-the-container\n" {
					t.Errorf("the workspace file on the host: %q, %v", b, err)
				}
				if _, err := os.Stat(filepath.Join(claude, "settings.json")); err != nil {
					t.Errorf("the Claude Code folder on the host: %v", err)
				}
			}
		})
	}
}

// 3. The agent is uid 1000 with no capabilities, no-new-privileges, the
// default seccomp filter, an init as PID 1 and the Spec's limits.
func TestUnprivileged(t *testing.T) {
	limits := runtime.Limits{CPUs: 1.5, MemoryMB: 300, Pids: 64}
	r := run(t, context.Background(), box{Limits: &limits, Script: writeScript + `
echo "ID $(id -u):$(id -g) $(id -G)"
grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\t' | sed 's/^/STATUS /'
echo "PID1 $(cat /proc/1/comm)"
echo "PIDSMAX $(cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null)"
echo "MEMMAX $(cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null)"
echo "CPUMAX $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us))"
try chown 'echo x > /tmp/f && chown 0:0 /tmp/f'
try mknod 'mknod /tmp/null c 1 3'
try docker-sock 'test -e /var/run/docker.sock || test -e /run/docker.sock'
`})
	if r.Err != nil || r.Exit != 0 {
		t.Fatalf("exit %d, %v\n%s", r.Exit, r.Err, r.Output())
	}
	want := map[string]string{
		"ID ": "1000:1000 1000", "PID1 ": "docker-init",
		"PIDSMAX ": "64", "MEMMAX ": strconv.Itoa(300 << 20), "CPUMAX ": "150000 100000",
	}
	for prefix, w := range want {
		if got := lines(r.Stdout, prefix); len(got) != 1 || got[0] != w {
			t.Errorf("%s%q, want %q", prefix, got, w)
		}
	}
	status := map[string]string{}
	for _, l := range lines(r.Stdout, "STATUS ") {
		k, v, _ := strings.Cut(l, ":")
		status[k] = v
	}
	for k, w := range map[string]string{
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2", // 2: a seccomp filter is on (Docker's default profile)
	} {
		if status[k] != w {
			t.Errorf("/proc/self/status %s: %q, want %q", k, status[k], w)
		}
	}
	// Each refused for want of privilege, not for another reason.
	tries := map[string]string{}
	for _, l := range lines(r.Stdout, "TRY ") {
		name, rest, _ := strings.Cut(l, " ")
		tries[name] = rest
	}
	for name, w := range map[string]string{"chown": "Operation not permitted", "mknod": "Operation not permitted", "docker-sock": "failed"} {
		if got := tries[name]; !strings.HasPrefix(got, "failed") || !strings.Contains(got, w) {
			t.Errorf("%s inside the container: %q, want it refused (%s)", name, got, w)
		}
	}
}

// 4. The session's socket is the only way out, and it reaches only its own
// session: nothing of the sessions folder, or of another session's
// socket, is in the container.
func TestSessionSocketIsTheOnlyWayOut(t *testing.T) {
	ctx := context.Background()
	c := startCore(t, "", nil)
	a, b := c.Session(t, "main"), c.Session(t, "main")
	r := run(t, ctx, box{Mounts: []runtime.Mount{socketMount(a)}, Script: `
echo "ECHO $(ipc tool.invoke.echo '{"message":"hi"}')"
echo "INFO $(ipc tool.invoke.get_session_info)"
echo "LS $(ls -A /run/carapace | tr '\n' ' ')"
echo "SOCKETS $(find / -path /proc -prune -o -path /sys -prune -o -type s -print 2>/dev/null | tr '\n' ' ')"
for p in ` + b.Socket + ` ` + filepath.Dir(b.Socket) + ` ` + string(c.Home) + `; do
	if [ -e "$p" ]; then echo "VISIBLE $p"; else echo "ABSENT $p"; fi
done
out=$(CARAPACE_IPC_ENDPOINT=ipc://` + b.Socket + ` CARAPACE_IPC_TIMEOUT=3s CARAPACE_IPC_RETRY=1s ipc tool.invoke.echo '{"message":"via B"}' 2>&1)
echo "OTHER exit $? $(echo $out)"
`})
	if r.Err != nil || r.Exit != 0 {
		t.Fatalf("exit %d, %v\n%s", r.Exit, r.Err, r.Output())
	}
	var echo, info map[string]any
	if got := lines(r.Stdout, "ECHO "); len(got) != 1 || json.Unmarshal([]byte(got[0]), &echo) != nil || echo["message"] != "hi" {
		t.Fatalf("echo through the session socket: %q\n%s", got, r.Output())
	}
	if got := lines(r.Stdout, "INFO "); len(got) != 1 || json.Unmarshal([]byte(got[0]), &info) != nil || info["session"] != a.ID {
		t.Fatalf("the core did not see session A (%s): %q", a.ID, got)
	}
	if got := lines(r.Stdout, "LS "); len(got) != 1 || strings.TrimSpace(got[0]) != "ipc.sock" {
		t.Errorf("/run/carapace holds %q, want only ipc.sock", got)
	}
	if got := lines(r.Stdout, "SOCKETS "); len(got) != 1 || strings.TrimSpace(got[0]) != runtime.SocketPath {
		t.Errorf("sockets in the container: %q, want only %s", got, runtime.SocketPath)
	}
	if got := lines(r.Stdout, "VISIBLE "); len(got) != 0 {
		t.Errorf("host paths visible in the container: %q", got)
	}
	if got := lines(r.Stdout, "OTHER "); len(got) != 1 || !strings.HasPrefix(got[0], "exit 1 ") {
		t.Errorf("ipc to session B's socket path: %q, want a failure", got)
	}
	for _, e := range c.Audit(t) {
		if e.Session == b.ID && e.Topic != "" {
			t.Errorf("session B has a request in the audit log: %+v", e)
		}
	}
}

// The image's entrypoint is the scripted test agent.
func TestScriptedAgent(t *testing.T) {
	ctx := context.Background()
	c := startCore(t, "", nil)
	s := c.Session(t, "main")
	r := run(t, ctx, box{Mounts: []runtime.Mount{socketMount(s)}, Cmd: []string{"--prompt",
		"# a comment, then a blank line\n\ntool.invoke.echo {\"message\": \"hi there\"}\n  tool.invoke.list_tools\n"}})
	if r.Err != nil || r.Exit != 0 {
		t.Fatalf("exit %d, %v\n%s", r.Exit, r.Err, r.Output())
	}
	for _, want := range []string{"> tool.invoke.echo {\"message\": \"hi there\"}\n", `"message":"hi there"`, "> tool.invoke.list_tools \n", "exit 0\n"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.Stdout)
		}
	}
	if strings.Count(r.Stdout, "exit 0\n") != 2 {
		t.Errorf("want two calls:\n%s", r.Stdout)
	}

	// The prompt from a file, with a call that fails: exit 1.
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "prompt"), []byte("tool.invoke.nope {}\ntool.invoke.echo {\"message\":\"after\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, ctx, box{Mounts: []runtime.Mount{socketMount(s), {Source: ws, Target: runtime.WorkspacePath, ReadOnly: true}},
		Env: []string{"CARAPACE_PROMPT_FILE=/workspace/prompt"}})
	if r.Err != nil || r.Exit != 1 || !strings.Contains(r.Stderr, "UNKNOWN_TOOL") || !strings.Contains(r.Stdout, "exit 1\n") || !strings.Contains(r.Stdout, `"after"`) {
		t.Fatalf("failing call: exit %d, %v\n%s", r.Exit, r.Err, r.Output())
	}
	// No prompt at all: a usage error.
	if r = run(t, ctx, box{}); r.Err != nil || r.Exit != 2 || !strings.Contains(r.Stderr, "usage") {
		t.Fatalf("no prompt: exit %d, %v\n%s", r.Exit, r.Err, r.Output())
	}
}

// 5. A credential the core holds for a plugin is nowhere the agent can
// look: not in its environment, files, processes or replies, and not in
// the audit log or the core's log. Nor is anything of the environment of
// the process that runs the engine's CLI.
func TestCanaryCredentialNeverReachesTheContainer(t *testing.T) {
	ctx := context.Background()
	canary := "canary-" + randHex(16)     // a plugin's credential in the core's store
	hostEnv := "canary-" + randHex(16)    // in the environment of the process that runs docker
	decoy := "canary-decoy-" + randHex(4) // a file in the workspace: proves the search sees files
	c := startCore(t, "", func(h home.Dir) {
		if err := keychain.NewFileStore(h.CredentialsDir()).Set("echo", "token", []byte(canary)); err != nil {
			t.Fatal(err)
		}
	})
	if got, err := keychain.NewFileStore(c.Home.CredentialsDir()).Get("echo", "token"); err != nil || string(got) != canary {
		t.Fatalf("the canary is not in the store: %q, %v", got, err)
	}
	t.Setenv("CARAPACE_TEST_CANARY", hostEnv)
	s := c.Session(t, "main")
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "notes"), []byte("nothing secret: "+decoy+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, ctx, box{
		Mounts: []runtime.Mount{socketMount(s), {Source: ws, Target: runtime.WorkspacePath}},
		Env:    []string{"CARAPACE_SESSION_HINT=main"},
		Script: `
echo "== env"; env
echo "== /proc/self/environ"; tr '\0' '\n' < /proc/self/environ
echo "== /proc/1/environ"; tr '\0' '\n' < /proc/1/environ
echo "== /proc/1/cmdline"; tr '\0' ' ' < /proc/1/cmdline; echo
echo "== files"
for d in /*; do
	case $d in /proc|/sys|/dev) continue ;; esac
	grep -rslaF canary- "$d" | while IFS= read -r f; do
		grep -saoE 'canary-[0-9a-z-]+' "$f" | sed "s|^|$f:|"
	done
done
echo "== ipc"
ipc tool.invoke.echo '{"message":"what is the token?"}'
ipc tool.invoke.list_tools
ipc tool.invoke.get_session_info
ipc tool.invoke.get_diagnostics '{"last_n": 10}'
ipc tool.invoke.echo '{"message":"$ECHO_TOKEN ${token} {{token}}"}'
echo "== done"
`})
	if r.Err != nil || r.Exit != 0 || !strings.Contains(r.Stdout, "== done") {
		t.Fatalf("exit %d, %v\n%s", r.Exit, r.Err, r.Output())
	}
	if !strings.Contains(r.Stdout, "/workspace/notes:"+decoy) {
		t.Fatalf("the file search did not find the decoy in the workspace: it proves nothing\n%s", r.Stdout)
	}
	if n := strings.Count(r.Stdout, `"message":`); n < 2 {
		t.Fatalf("the ipc calls did not answer:\n%s", r.Output())
	}
	c.Stop(t) // flushes the audit log
	logs, err := os.ReadFile(c.Home.AuditLog())
	if err != nil || len(logs) == 0 {
		t.Fatalf("audit log: %d bytes, %v", len(logs), err)
	}
	for _, secret := range []string{canary, hostEnv} {
		for where, text := range map[string]string{"container output": r.Output(), "audit log": string(logs), "core's log": c.Log.String()} {
			if strings.Contains(text, secret) {
				t.Errorf("a canary reached the %s", where)
			}
		}
	}
}

// 6. A container that floods its session until it is rate limited does
// not rate-limit or starve another session's container. The latencies are
// logged, not asserted: wall-clock thresholds make flaky tests.
func TestFloodingSessionDoesNotStarveAnother(t *testing.T) {
	ctx := context.Background()
	// B makes 2×calls echo calls, within its own burst; A exhausts its own.
	const calls = 15
	c := startCore(t, "[rate_limit.tools.echo]\nper_minute = 30\nburst = 40\n", nil)
	a, b := c.Session(t, "main"), c.Session(t, "main")

	// B's calls, each between a "start" and an "end" line that ts stamps
	// with the container's clock (µs).
	bScript := `for i in $(seq ` + strconv.Itoa(calls) + `); do
	echo start
	if ! ipc tool.invoke.echo '{"message":"b"}' >/dev/null 2>/tmp/err; then echo "FAILED $(tail -n 1 /tmp/err)"; fi
	echo end
	sleep 0.05
done | ts '%.s'`
	runB := func(phase string) []time.Duration {
		r := run(t, ctx, box{Mounts: []runtime.Mount{socketMount(b)}, Script: bScript})
		if r.Err != nil || r.Exit != 0 {
			t.Fatalf("B (%s): exit %d, %v\n%s", phase, r.Exit, r.Err, r.Output())
		}
		if strings.Contains(r.Output(), "FAILED") {
			t.Fatalf("B's calls failed (%s):\n%s", phase, r.Output())
		}
		return latencies(t, r.Stdout)
	}
	alone := runB("alone")

	// A floods echo until told to stop by a file in its workspace.
	ws := workspace(t)
	var limited sync.Once
	limitedCh := make(chan struct{})
	var aLines []stamped
	var aMu sync.Mutex
	aOut := &lineWriter{fn: func(line string, at time.Time) {
		aMu.Lock()
		aLines = append(aLines, stamped{line, at})
		aMu.Unlock()
		if strings.HasPrefix(line, "FIRST_LIMITED") {
			limited.Do(func() { close(limitedCh) })
		}
	}}
	aDone := make(chan result, 1)
	go func() {
		aDone <- run(t, ctx, box{Mounts: []runtime.Mount{socketMount(a), {Source: ws, Target: runtime.WorkspacePath}}, Stdout: aOut, Script: `
ok=0; limited=0; other=0; n=0; end=$(( $(date +%s) + 90 ))
while [ ! -e /workspace/stop ] && [ "$(date +%s)" -lt "$end" ]; do
	if ipc tool.invoke.echo '{"message":"flood"}' >/dev/null 2>/tmp/err; then ok=$((ok + 1))
	elif grep -q '"RATE_LIMITED"' /tmp/err; then
		limited=$((limited + 1))
		[ "$limited" -eq 1 ] && echo "FIRST_LIMITED after $ok calls"
	else other=$((other + 1)); echo "OTHER $(tail -n 1 /tmp/err)"; fi
	n=$((n + 1))
	echo "CALL $n"
done
echo "SUMMARY $n $ok $limited $other"
`})
	}()
	select {
	case <-limitedCh:
	case r := <-aDone:
		t.Fatalf("A ended before it was rate limited: exit %d, %v\n%s", r.Exit, r.Err, r.Output())
	case <-time.After(90 * time.Second):
		t.Fatal("A was not rate limited within 90s")
	}
	bStart := time.Now()
	flooded := runB("while A floods")
	bEnd := time.Now()
	if err := os.WriteFile(filepath.Join(ws, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ra := <-aDone
	if ra.Err != nil || ra.Exit != 0 {
		t.Fatalf("A: exit %d, %v\n%s", ra.Exit, ra.Err, ra.Output())
	}
	var n, ok, lim, other int
	if s := lines(ra.Stdout, "SUMMARY "); len(s) != 1 {
		t.Fatalf("A printed no summary:\n%s", ra.Output())
	} else if _, err := fmt.Sscan(s[0], &n, &ok, &lim, &other); err != nil {
		t.Fatal(err)
	}
	if lim == 0 || other != 0 {
		t.Fatalf("A: %d calls, %d ok, %d rate limited, %d other errors\n%s", n, ok, lim, other, ra.Output())
	}
	aMu.Lock()
	during := 0
	for _, l := range aLines {
		if strings.HasPrefix(l.line, "CALL ") && !l.at.Before(bStart) && !l.at.After(bEnd) {
			during++
		}
	}
	aMu.Unlock()
	if during == 0 {
		t.Errorf("A made no call while B ran: the flood did not overlap")
	}

	// The audit log: A was rate limited, B never.
	limitedOf := map[string]int{}
	for _, e := range c.Audit(t) {
		if e.Code == "RATE_LIMITED" {
			limitedOf[e.Session]++
		}
	}
	if limitedOf[b.ID] != 0 || limitedOf[a.ID] == 0 {
		t.Errorf("rate-limited requests in the audit log: A %d, B %d", limitedOf[a.ID], limitedOf[b.ID])
	}
	t.Logf("A: %d echo calls, %d ok then %d RATE_LIMITED, %d other errors; %d calls (%.0f/s) during B's second run of %s",
		n, ok, lim, other, during, float64(during)/bEnd.Sub(bStart).Seconds(), bEnd.Sub(bStart).Round(time.Millisecond))
	t.Logf("B alone:          %s", summary(alone))
	t.Logf("B while A floods: %s", summary(flooded))
}

// stamped is a line of output and when the test received it.
type stamped struct {
	line string
	at   time.Time
}

// latencies pairs the ts-stamped start and end lines of B's script.
func latencies(t *testing.T, out string) []time.Duration {
	t.Helper()
	var ds []time.Duration
	var start float64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		stamp, what, _ := strings.Cut(l, " ")
		at, err := strconv.ParseFloat(stamp, 64)
		if err != nil {
			t.Fatalf("bad timestamp line %q", l)
		}
		switch what {
		case "start":
			start = at
		case "end":
			ds = append(ds, time.Duration((at-start)*float64(time.Second)))
		}
	}
	if len(ds) == 0 {
		t.Fatalf("no latencies in %q", out)
	}
	return ds
}

// summary describes latencies: count, min, median, mean, max.
func summary(ds []time.Duration) string {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
	return fmt.Sprintf("%d calls: min %s, median %s, mean %s, max %s",
		len(s), ms(s[0]), ms(s[len(s)/2]), ms(sum/time.Duration(len(s))), ms(s[len(s)-1]))
}

// 7. A container is removed when Run returns; List finds it by label while
// it runs; cancelling Run's context stops and removes it; Stop removes a
// running one.
func TestContainerLifecycle(t *testing.T) {
	ctx := context.Background()
	gone := func(t *testing.T, name string) {
		t.Helper()
		if names, err := eng.List(ctx, runtime.LabelSession, name); err != nil || len(names) != 0 {
			t.Fatalf("container %s still listed: %q, %v", name, names, err)
		}
		out, err := exec.Command("docker", "ps", "-a", "-q", "--filter", "name=^"+name+"$").Output()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Fatalf("docker ps -a shows %s: %q, %v", name, out, err)
		}
	}

	t.Run("exit status, then removed", func(t *testing.T) {
		r := run(t, ctx, box{Script: "echo out; echo err >&2; exit 3"})
		if r.Err != nil || r.Exit != 3 || r.Stdout != "out\n" || r.Stderr != "err\n" {
			t.Fatalf("exit %d, %v, stdout %q, stderr %q", r.Exit, r.Err, r.Stdout, r.Stderr)
		}
		gone(t, r.Name)
	})

	// background starts a sleeping container and waits until List sees it.
	background := func(t *testing.T, ctx context.Context) (string, <-chan result) {
		t.Helper()
		s := spec(t, box{Script: "echo up; exec sleep 300"})
		done := make(chan result, 1)
		go func() {
			exit, err := eng.Run(ctx, s, runtime.IO{})
			done <- result{Name: s.Name, Exit: exit, Err: err}
		}()
		deadline := time.Now().Add(60 * time.Second)
		for {
			names, err := eng.List(ctx, runtime.LabelSession, s.Name)
			if err != nil {
				t.Fatal(err)
			}
			if len(names) == 1 && names[0] == s.Name {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("List never found %s: %q", s.Name, names)
			}
			time.Sleep(50 * time.Millisecond)
		}
		all, err := eng.List(ctx, runtime.LabelInstance, runID)
		if err != nil || !slices.Contains(all, s.Name) {
			t.Fatalf("List by instance: %q, %v", all, err)
		}
		return s.Name, done
	}
	// wait bounds the wait for Run (a hang guard, not a timing assertion).
	wait := func(t *testing.T, done <-chan result) result {
		t.Helper()
		select {
		case r := <-done:
			return r
		case <-time.After(90 * time.Second):
			t.Fatal("Run did not return")
		}
		return result{}
	}

	t.Run("cancel stops and removes", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		name, done := background(t, cctx)
		cancel()
		r := wait(t, done)
		if !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("Run after cancel: exit %d, %v; want context.Canceled", r.Exit, r.Err)
		}
		gone(t, name)
	})

	// A context that ends while the CLI is still creating or starting the
	// container: nothing may be left behind.
	t.Run("cancel while starting", func(t *testing.T) {
		for _, after := range []time.Duration{0, 20 * time.Millisecond, 80 * time.Millisecond, 200 * time.Millisecond} {
			s := spec(t, box{Script: "exec sleep 300"})
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan result, 1)
			go func() {
				exit, err := eng.Run(cctx, s, runtime.IO{})
				done <- result{Name: s.Name, Exit: exit, Err: err}
			}()
			time.Sleep(after)
			cancel()
			r := wait(t, done)
			if !errors.Is(r.Err, context.Canceled) {
				t.Fatalf("cancel after %s: exit %d, %v; want context.Canceled", after, r.Exit, r.Err)
			}
			gone(t, s.Name)
		}
	})

	t.Run("Stop removes a running container", func(t *testing.T) {
		name, done := background(t, ctx)
		if err := eng.Stop(ctx, name); err != nil {
			t.Fatal(err)
		}
		r := wait(t, done)
		if r.Exit == 0 {
			t.Fatalf("Run of a stopped container: exit %d, %v", r.Exit, r.Err)
		}
		t.Logf("Run after Stop: exit %d, %v", r.Exit, r.Err)
		gone(t, name)
		if err := eng.Stop(ctx, name); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
	})
}
