// Package mailserver starts real mail servers from Debian for one test:
// Dovecot for IMAP (and LMTP), and Postfix for SMTP submission with AUTH,
// delivering into Dovecot, so a message sent by SMTP to a user of the test
// domain shows up in that user's INBOX over IMAP.
//
// Each Start runs a fresh pair from configuration generated into its own
// directory: listeners on a loopback address (Host) only, on free ports; Dovecot's
// base_dir, state_dir and pid file, Postfix's queue and data directories,
// the Maildir homes and the logs all live there, and nothing under /etc,
// /var or /run is read for configuration or written. Both servers run in
// the foreground as children of the test and are stopped, with every
// process they started, when the test ends; their logs are printed when
// it failed.
//
// A server per test, rather than one per package, costs about 0.3 s (start
// and stop, measured by BenchmarkStart) and buys isolation: no mailbox, UID, queue or rate-limit state leaks
// from one test into the next, and a test may stop its servers (Stop) to
// exercise a client's reconnects without disturbing the others.
//
// The servers need root (Postfix's master does; the mail is stored as
// the system user mail) and the Debian packages dovecot-imapd, dovecot-lmtpd and
// postfix, which .ci/run installs. Without them Start fails the test under
// the project's CI (CARAPACE_CI=1) and skips it elsewhere.
package mailserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil"
)

// Domain is the mail domain every test user belongs to. It is reserved
// (RFC 2606), so nothing here can ever reach a real mailbox.
const Domain = "example.test"

// Host is the address every listener is bound to: loopback, but not
// 127.0.0.1, which is where a client's connection comes from. Dovecot
// counts a connection whose two ends have the same address as secure and
// would take a password in clear text on it; from 127.0.0.1 to 127.0.0.2
// it refuses LOGIN before STARTTLS, as a server elsewhere does.
const Host = "127.0.0.2"

// Dovecot is where Debian's dovecot-core package installs Dovecot,
// which Start runs in the foreground (a path, not a PATH lookup: root's
// PATH does not always hold /usr/sbin).
const Dovecot = "/usr/sbin/dovecot"

// PostfixMaster is where Debian's postfix package installs the master
// daemon, which Start runs in the foreground.
const PostfixMaster = "/usr/lib/postfix/sbin/master"

// startTimeout bounds how long Start waits for the servers to answer, and
// WaitMessages for a delivery: generous, for a loaded 2-core machine.
const startTimeout = 90 * time.Second

// User is a mail account on the test servers.
type User struct {
	// Name is the local part given to Start ("alice").
	Name string
	// Address is the user's mail address, and also the login for IMAP
	// and SMTP ("alice@example.test").
	Address string
	// Password is the user's password, random per Start.
	Password string
}

// Server is a running Dovecot and Postfix for one test. Its fields are
// read-only.
type Server struct {
	// Dir is the servers' directory: configuration, TLS files, Maildir
	// homes (mail/NAME/Maildir) and logs (log/).
	Dir string
	// Host is the address of every listener (127.0.0.2, see the constant).
	Host string
	// IMAPPort is Dovecot's IMAP port, plain text with STARTTLS.
	IMAPPort int
	// IMAPSPort is Dovecot's IMAP port with implicit TLS.
	IMAPSPort int
	// SubmissionPort is Postfix's submission port: STARTTLS is required
	// before AUTH (PLAIN or LOGIN), and AUTH before MAIL.
	SubmissionPort int
	// SubmissionsPort is Postfix's submission port with implicit TLS.
	SubmissionsPort int
	// LMTPPort is Dovecot's LMTP port, through which Postfix delivers.
	LMTPPort int
	// Users are the accounts, in the order given to Start.
	Users []User
	// CAFile is the PEM file of the certificate authority that signed the
	// servers' certificate (for Host; it also names localhost).
	CAFile string
	// CAPEM is CAFile's content.
	CAPEM []byte

	pool    *x509.CertPool
	procs   []*proc
	stopped bool
}

// Option changes what Start sets up.
type Option func(*options)

type options struct {
	users []string
}

// WithUsers names the accounts to create (local parts of Domain); the
// default is "alice" and "bob".
func WithUsers(names ...string) Option {
	return func(o *options) { o.users = append([]string(nil), names...) }
}

// Require fails the test under the project's CI and skips it elsewhere
// when the servers cannot run here: not root, or the Debian packages
// missing. Start calls it; a test may call it first to skip early.
func Require(t testing.TB) {
	t.Helper()
	const why = "the mail tests run real Dovecot and Postfix servers (apt-get install dovecot-imapd dovecot-lmtpd postfix; .ci/run installs them)"
	if os.Geteuid() != 0 {
		testutil.Missing(t, "the test mail servers need root (Postfix's master daemon does); "+why)
	}
	testutil.RequireFile(t, Dovecot, why)
	testutil.RequireFile(t, PostfixMaster, why)
	for _, u := range []string{"postfix", "dovecot", "dovenull", "mail"} {
		if _, err := user.Lookup(u); err != nil {
			testutil.Missing(t, fmt.Sprintf("the system user %s is missing (%v); %s", u, err, why))
		}
	}
	if _, err := user.LookupGroup("postdrop"); err != nil {
		testutil.Missing(t, fmt.Sprintf("the group postdrop is missing (%v); %s", err, why))
	}
}

// Start runs a Dovecot and a Postfix for t and returns once every port
// answers with its greeting. Both are stopped when t ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	Require(t)
	o := options{users: []string{"alice", "bob"}}
	for _, opt := range opts {
		opt(&o)
	}
	for _, n := range o.users {
		if n == "" || strings.ContainsAny(n, ":@/ \t\r\n") {
			t.Fatalf("mailserver: user name %q: give a plain local part (no ':', '@', '/' or space)", n)
		}
	}
	// A port picked free may be taken by someone else before the server
	// binds it; then the whole start is tried again on new ports.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(t, o)
		if err == nil {
			return s
		}
		lastErr = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("%v", lastErr)
	return nil
}

// errPortTaken marks a start that failed because a port was taken.
var errPortTaken = errors.New("a port was taken")

// start makes the directory, writes the configuration and runs both
// servers; on an error it has already stopped and cleaned what it began.
func start(t testing.TB, o options) (s *Server, err error) {
	// Not t.TempDir: Postfix's unprivileged daemons must reach the
	// queue and Dovecot's auth socket by path, and t.TempDir's parent is
	// private to root.
	dir, err := os.MkdirTemp("", "carapace-mail-")
	if err != nil {
		return nil, fmt.Errorf("mailserver: %w", err)
	}
	s = &Server{Dir: dir, Host: Host}
	// One cleanup, registered first: stop, show the logs of a failed
	// test, remove the directory.
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.dumpLogs(t)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("mailserver: removing %s: %v", dir, err)
		}
	})
	defer func() {
		if err != nil {
			s.Stop()
			err = fmt.Errorf("%w\n%s", err, s.logTail())
		}
	}()
	if err := os.Chmod(dir, 0o711); err != nil {
		return s, fmt.Errorf("mailserver: %w", err)
	}
	ports, err := pickPorts(5)
	if err != nil {
		return s, err
	}
	s.IMAPPort, s.IMAPSPort, s.LMTPPort, s.SubmissionPort, s.SubmissionsPort = ports[0], ports[1], ports[2], ports[3], ports[4]
	if err := s.writeFiles(o); err != nil {
		return s, err
	}

	dctx, dcancel := context.WithTimeout(context.Background(), startTimeout)
	defer dcancel()
	// Both start at once: Postfix reaches Dovecot only per session (SASL,
	// LMTP), and every port is awaited before Start returns.
	dove, err := s.run("dovecot", Dovecot, "-F", "-c", filepath.Join(dir, "dovecot", "dovecot.conf"))
	if err != nil {
		return s, err
	}
	pf, err := s.run("postfix", PostfixMaster, "-d", "-c", filepath.Join(dir, "postfix", "etc"))
	if err != nil {
		return s, err
	}
	if err := s.watch(); err != nil {
		return s, err
	}
	for _, p := range []struct {
		proc *proc
		port int
		tls  bool
	}{
		{dove, s.IMAPPort, false}, {dove, s.IMAPSPort, true}, {dove, s.LMTPPort, false},
		{pf, s.SubmissionPort, false}, {pf, s.SubmissionsPort, true},
	} {
		if err := s.awaitGreeting(dctx, p.proc, p.port, p.tls); err != nil {
			return s, err
		}
	}
	return s, nil
}

// writeFiles writes the certificates, the users, both configurations and
// Postfix's queue directories, owned as Postfix expects them.
func (s *Server) writeFiles(o options) error {
	c, err := newCerts()
	if err != nil {
		return err
	}
	s.pool, s.CAPEM = c.pool, c.caPEM
	s.CAFile = filepath.Join(s.Dir, "tls", "ca.pem")
	pfOwner, err := lookupIDs("postfix", "postfix")
	if err != nil {
		return err
	}
	postdrop, err := lookupIDs("postfix", "postdrop")
	if err != nil {
		return err
	}
	dove, err := lookupIDs("dovecot", "dovecot")
	if err != nil {
		return err
	}
	// The mail is stored as Debian's system user mail (Dovecot refuses
	// root as a mail user).
	mail, err := lookupIDs("mail", "mail")
	if err != nil {
		return err
	}
	root := ids{0, 0}
	dirs := []struct {
		path  string
		mode  os.FileMode
		owner ids
	}{
		{"tls", 0o755, root},
		{"log", 0o755, root},
		{"mail", 0o700, mail},
		{"dovecot", 0o755, root},
		{"dovecot/run", 0o755, root},
		{"dovecot/state", 0o700, root},
		{"postfix", 0o755, root},
		{"postfix/etc", 0o755, root},
		{"postfix/data", 0o700, pfOwner},
		{"postfix/queue", 0o755, root},
		{"postfix/queue/pid", 0o755, root},
		{"postfix/queue/maildrop", 0o730, postdrop},
		{"postfix/queue/public", 0o710, postdrop},
	}
	for _, q := range []string{"active", "bounce", "corrupt", "defer", "deferred", "flush", "hold", "incoming", "private", "saved", "trace"} {
		dirs = append(dirs, struct {
			path  string
			mode  os.FileMode
			owner ids
		}{"postfix/queue/" + q, 0o700, ids{pfOwner.uid, 0}})
	}
	for _, d := range dirs {
		p := filepath.Join(s.Dir, d.path)
		if err := os.Mkdir(p, d.mode); err != nil {
			return fmt.Errorf("mailserver: %w", err)
		}
		if err := os.Chown(p, d.owner.uid, d.owner.gid); err != nil {
			return fmt.Errorf("mailserver: %w", err)
		}
		if err := os.Chmod(p, d.mode); err != nil { // past the umask
			return fmt.Errorf("mailserver: %w", err)
		}
	}

	var users strings.Builder
	for _, n := range o.users {
		u := User{Name: n, Address: n + "@" + Domain, Password: randomHex(12)}
		s.Users = append(s.Users, u)
		// passwd-file: user:password:uid:gid:gecos:home
		fmt.Fprintf(&users, "%s:{PLAIN}%s:%d:%d::%s\n", u.Address, u.Password, mail.uid, mail.gid, filepath.Join(s.Dir, "mail", n))
	}
	d := configData{
		Dir:             s.Dir,
		Host:            Host,
		Domain:          Domain,
		IMAPPort:        s.IMAPPort,
		IMAPSPort:       s.IMAPSPort,
		LMTPPort:        s.LMTPPort,
		SubmissionPort:  s.SubmissionPort,
		SubmissionsPort: s.SubmissionsPort,
		InstanceName:    "carapace-test-" + filepath.Base(s.Dir),
	}
	dc, err := render(dovecotConf, d)
	if err != nil {
		return err
	}
	pm, err := render(postfixMain, d)
	if err != nil {
		return err
	}
	pmc, err := render(postfixMaster, d)
	if err != nil {
		return err
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{"tls/ca.pem", c.caPEM, 0o644},
		{"tls/server.pem", c.certPEM, 0o644},
		{"tls/server.key", c.keyPEM, 0o600},
		{"dovecot/users", []byte(users.String()), 0o640},
		{"dovecot/dovecot.conf", dc, 0o644},
		{"postfix/etc/main.cf", pm, 0o644},
		{"postfix/etc/master.cf", pmc, 0o644},
	}
	for _, f := range files {
		p := filepath.Join(s.Dir, f.path)
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return fmt.Errorf("mailserver: %w", err)
		}
		// Postfix rereads a table or main.cf modified within the current
		// second until it is older (it may be half written), 300 ms at a
		// time: dated a minute back, the start does not wait.
		past := time.Now().Add(-time.Minute)
		if err := os.Chtimes(p, past, past); err != nil {
			return fmt.Errorf("mailserver: %w", err)
		}
	}
	// Dovecot's auth process reads the passwords as its internal user.
	if err := os.Chown(filepath.Join(s.Dir, "dovecot", "users"), 0, dove.gid); err != nil {
		return fmt.Errorf("mailserver: %w", err)
	}
	return nil
}

// ids is a numeric owner.
type ids struct{ uid, gid int }

// lookupIDs finds the uid of userName and the gid of groupName.
func lookupIDs(userName, groupName string) (ids, error) {
	u, err := user.Lookup(userName)
	if err != nil {
		return ids{}, fmt.Errorf("mailserver: %w (install postfix)", err)
	}
	g, err := user.LookupGroup(groupName)
	if err != nil {
		return ids{}, fmt.Errorf("mailserver: %w (install postfix)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(g.Gid)
	return ids{uid, gid}, nil
}

// pickPorts is freePorts; a test replaces it to hand out a taken port.
var pickPorts = freePorts

// freePorts finds n ports free on Host by binding them all at once, so
// that they differ, and releasing them.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(Host, "0"))
		if err != nil {
			return nil, fmt.Errorf("mailserver: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// proc is one server's master process, in its own process group with
// every process it starts.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
	err  error         // cmd.Wait's, once done is closed
}

// run starts a server's master in the foreground, its output in
// log/NAME.out.
func (s *Server) run(name, bin string, args ...string) (*proc, error) {
	out, err := os.Create(filepath.Join(s.Dir, "log", name+".out"))
	if err != nil {
		return nil, fmt.Errorf("mailserver: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = s.Dir
	// Its own group, for Stop to reach every process it starts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mailserver: starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s.procs = append(s.procs, p)
	return p, nil
}

// watchdog is the shell loop of watch: $0 is the test binary's pid, $1
// the servers' directory, the other arguments their process groups.
const watchdog = `while [ "$(cut -d' ' -f4 /proc/$$/stat)" = "$0" ]; do sleep 1; done
dir=$1; shift
for g in "$@"; do kill -KILL "-$g"; done
sleep 1; rm -rf -- "$dir"`

// watch starts a watchdog that kills both servers' process groups, and
// removes their directory, when the test binary dies without its cleanups (a -timeout panic, a
// SIGKILL): Dovecot's and Postfix's masters drop the parent-death signal
// when they change credentials, so Pdeathsig cannot do it. The watchdog
// notices within a second that its parent is gone; Stop ends it first.
func (s *Server) watch() error {
	args := []string{"-c", watchdog, strconv.Itoa(os.Getpid()), s.Dir}
	for _, p := range s.procs {
		args = append(args, strconv.Itoa(p.cmd.Process.Pid))
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mailserver: starting the watchdog: %w", err)
	}
	p := &proc{name: "watchdog", cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s.procs = append(s.procs, p)
	return nil
}

// awaitGreeting dials port until it answers with a greeting (IMAP's
// "* OK", SMTP's and LMTP's "220"), over TLS when tls is set. It gives up
// when p exits or ctx ends.
func (s *Server) awaitGreeting(ctx context.Context, p *proc, port int, useTLS bool) error {
	addr := net.JoinHostPort(Host, strconv.Itoa(port))
	var last error
	for {
		select {
		case <-p.done:
			err := fmt.Errorf("mailserver: %s exited before %s answered: %v", p.name, addr, p.err)
			if p.name == "postfix" {
				// Its fatal errors before postlogd runs go to syslog.
				err = fmt.Errorf("%w (an error in main.cf or master.cf is logged only to syslog: `postfix -c DIR/postfix/etc check` says more)", err)
			}
			if s.logsSay("Address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("mailserver: %s did not answer on %s within %v: %v", p.name, addr, startTimeout, last)
		default:
		}
		if last = s.greet(ctx, addr, useTLS); last == nil {
			return nil
		}
		if s.logsSay("Address already in use") {
			return fmt.Errorf("%w: mailserver: %s could not listen on %s", errPortTaken, p.name, addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// greet connects to addr once and reads the greeting line.
func (s *Server) greet(ctx context.Context, addr string, useTLS bool) error {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	if useTLS {
		tc := tls.Client(c, s.TLSConfig())
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		c = tc
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "* OK") && !strings.HasPrefix(line, "220") {
		return fmt.Errorf("unexpected greeting %q", strings.TrimSpace(line))
	}
	return nil
}

// Stop stops both servers and every process they started, and waits for
// them. Cleanup calls it; a test may call it earlier.
func (s *Server) Stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	// Postfix first, so that nothing is delivering into a stopping Dovecot.
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].stop()
	}
}

// stop sends SIGTERM to the master's process group, waits for the whole
// group to go, and kills what is left after a grace period.
func (p *proc) stop() {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done: // exited by itself; its group may live on
	default:
		// The whole group at once: Dovecot's master, told alone, waits
		// a second for its children.
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
	}
	// The master is gone. A child serving a client that is still
	// connected lingers for seconds (Dovecot's imap waits for its
	// client): it gets SIGTERM, then SIGKILL, for the test is over.
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	for i := 0; i < 1500 && len(groupMembers(pgid)) > 0; i++ { // 30 s
		if i == 100 { // 2 s
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupMembers lists the live processes (zombies not counted: they are
// gone, waiting for whoever reaps orphans) of process group pgid, from
// /proc.
func groupMembers(pgid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[2] != strconv.Itoa(pgid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		pids = append(pids, pid)
	}
	return pids
}

// Addr returns Host:port.
func (s *Server) Addr(port int) string { return net.JoinHostPort(s.Host, strconv.Itoa(port)) }

// CertPool returns a pool holding only the servers' CA.
func (s *Server) CertPool() *x509.CertPool { return s.pool }

// TLSConfig returns a client configuration that trusts only the servers'
// CA, for Host.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{RootCAs: s.pool, ServerName: s.Host, MinVersion: tls.VersionTLS12}
}

// User returns the account named name (the local part given to Start),
// failing the test when there is none.
func (s *Server) User(t testing.TB, name string) User {
	t.Helper()
	for _, u := range s.Users {
		if u.Name == name {
			return u
		}
	}
	t.Fatalf("mailserver: no user %q (users: %v)", name, s.Users)
	return User{}
}

// logFiles are the servers' logs, in the order they are shown.
func (s *Server) logFiles() []string {
	return []string{"dovecot.out", "dovecot.log", "postfix.out", "postfix.log"}
}

// dumpLogs prints every log of the servers into the test's output.
func (s *Server) dumpLogs(t testing.TB) {
	for _, f := range s.logFiles() {
		b, err := os.ReadFile(filepath.Join(s.Dir, "log", f))
		if err != nil || len(b) == 0 {
			continue
		}
		t.Logf("mailserver: --- %s ---\n%s", f, b)
	}
}

// logTail is the last lines of every log, for a start that failed.
func (s *Server) logTail() string {
	var b strings.Builder
	for _, f := range s.logFiles() {
		data, err := os.ReadFile(filepath.Join(s.Dir, "log", f))
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		fmt.Fprintf(&b, "--- %s (last lines) ---\n%s\n", f, strings.Join(lines, "\n"))
	}
	return b.String()
}

// logsSay reports whether any log contains s.
func (s *Server) logsSay(sub string) bool {
	for _, f := range s.logFiles() {
		b, err := os.ReadFile(filepath.Join(s.Dir, "log", f))
		if err == nil && strings.Contains(string(b), sub) {
			return true
		}
	}
	return false
}
