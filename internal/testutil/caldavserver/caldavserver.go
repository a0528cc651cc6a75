// Package caldavserver starts a real CalDAV server for tests: Debian's
// radicale (3.1.8), on the loopback at a free port, with its own users
// (htpasswd, plain text), its own storage folder and config in
// t.TempDir(). The server's log is printed when the test fails, and the
// process is killed at the test's cleanup.
//
//	srv := caldavserver.Start(t, caldavserver.User{Name: "alice", Password: "pw"})
//	// srv.URL is http://127.0.0.1:PORT/, alice's collections are under /alice/
//
// Without radicale the test is skipped, or fails under the project's CI
// (testutil.Require): .ci/run installs it.
package caldavserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil"
)

// User is one account of the server.
type User struct {
	Name     string
	Password string
}

// Server is a running radicale.
type Server struct {
	// URL is the server's root, http://127.0.0.1:PORT/ (with the slash).
	URL string
	// Addr is 127.0.0.1:PORT.
	Addr string
	// Storage is radicale's storage folder.
	Storage string

	cmd  *exec.Cmd
	logs *syncBuffer
}

// startTimeout bounds the wait for radicale to listen: generous, for a
// loaded 2-core machine.
const startTimeout = 90 * time.Second

// Start starts radicale with users and registers its stop with t.Cleanup.
// It fails the test when radicale does not come up (with its log).
func Start(t testing.TB, users ...User) *Server {
	t.Helper()
	bin := testutil.Require(t, "radicale", "the CalDAV tests run against a real Radicale (apt-get install radicale)")
	dir := t.TempDir()
	var htpasswd strings.Builder
	for _, u := range users {
		if u.Name == "" || strings.ContainsAny(u.Name, ":\n") || strings.Contains(u.Password, "\n") {
			t.Fatalf("caldavserver: user %q cannot be written to an htpasswd file", u.Name)
		}
		fmt.Fprintf(&htpasswd, "%s:%s\n", u.Name, u.Password)
	}
	htpasswdFile := filepath.Join(dir, "users")
	if err := os.WriteFile(htpasswdFile, []byte(htpasswd.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	storage := filepath.Join(dir, "collections")
	if err := os.Mkdir(storage, 0o700); err != nil {
		t.Fatal(err)
	}
	// A port taken meanwhile by someone else makes radicale exit: try a
	// few ports before giving up.
	var last string
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("caldavserver: a free port: %v", err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		conf := filepath.Join(dir, "config")
		if err := os.WriteFile(conf, []byte(config(addr, htpasswdFile, storage)), 0o600); err != nil {
			t.Fatal(err)
		}
		s, ready, err := launch(bin, conf, addr, storage)
		if err != nil {
			t.Fatalf("caldavserver: start radicale: %v", err)
		}
		if ready {
			t.Cleanup(func() {
				s.stop()
				if t.Failed() {
					t.Logf("radicale's log:\n%s", s.logs.String())
				}
			})
			return s
		}
		last = s.logs.String()
		if !strings.Contains(last, "in use") {
			break
		}
	}
	t.Fatalf("caldavserver: radicale did not start; its log:\n%s", last)
	return nil
}

// config is radicale's configuration: the loopback address only, htpasswd
// users, each user's collections their own (owner_only), and a log that
// says what each request did.
func config(addr, users, storage string) string {
	return fmt.Sprintf(`[server]
hosts = %s
max_connections = 20
timeout = 30

[encoding]
request = utf-8
stock = utf-8

[auth]
type = htpasswd
htpasswd_filename = %s
htpasswd_encryption = plain
delay = 0

[rights]
type = owner_only

[storage]
filesystem_folder = %s

[web]
type = none

[logging]
level = info
mask_passwords = True
`, addr, users, storage)
}

// launch starts radicale and waits until it logs that it is ready, or
// exits, or startTimeout passes. ready is false when it exited before.
func launch(bin, conf, addr, storage string) (s *Server, ready bool, err error) {
	cmd := exec.Command(bin, "--config", conf)
	// --config replaces radicale's default search path (/etc/radicale,
	// ~/.config/radicale); HOME in the test's folder keeps anything else
	// of a developer's out.
	cmd.Env = append(os.Environ(), "HOME="+filepath.Dir(conf))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, false, err
	}
	cmd.Stdout = cmd.Stderr
	logs := &syncBuffer{}
	s = &Server{URL: "http://" + addr + "/", Addr: addr, Storage: storage, cmd: cmd, logs: logs}
	if err := cmd.Start(); err != nil {
		return nil, false, err
	}
	readyc := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			logs.WriteLine(line)
			if strings.Contains(line, "Radicale server ready") {
				once.Do(func() { close(readyc) })
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-done
		_ = cmd.Wait()
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-readyc:
		return s, true, nil
	case <-done:
		return s, false, nil
	case <-timer.C:
		s.stop()
		return s, false, fmt.Errorf("radicale did not say it was ready within %v; its log:\n%s", startTimeout, logs.String())
	}
}

func (s *Server) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
}

// Logs returns what radicale logged so far.
func (s *Server) Logs() string { return s.logs.String() }

// UserURL is the root of user's collections: URL + user + "/".
func (s *Server) UserURL(user string) string { return s.URL + user + "/" }

// MkCalendar creates the calendar collection user/name/ (MKCALENDAR) for
// the given component types (VEVENT, VTODO) and returns its URL. It fails
// the test unless the server answers 201 Created.
func (s *Server) MkCalendar(t testing.TB, u User, name string, components ...string) string {
	t.Helper()
	code, body, err := s.mkCalendar(u, name, components)
	if err != nil {
		t.Fatalf("MKCALENDAR %s: %v", name, err)
	}
	if code != http.StatusCreated {
		t.Fatalf("MKCALENDAR %s: HTTP %d: %s", name, code, body)
	}
	return s.UserURL(u.Name) + name + "/"
}

// TryMkCalendar is MkCalendar that returns the HTTP status instead of
// failing the test on one other than 201.
func (s *Server) TryMkCalendar(u User, name string, components ...string) (int, error) {
	code, _, err := s.mkCalendar(u, name, components)
	return code, err
}

func (s *Server) mkCalendar(u User, name string, components []string) (int, string, error) {
	if len(components) == 0 {
		components = []string{"VEVENT"}
	}
	var comps strings.Builder
	for _, c := range components {
		fmt.Fprintf(&comps, `<C:comp name=%q/>`, c)
	}
	body := `<?xml version="1.0" encoding="utf-8"?>
<C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">
  <D:set><D:prop>
    <D:displayname>` + name + `</D:displayname>
    <C:supported-calendar-component-set>` + comps.String() + `</C:supported-calendar-component-set>
  </D:prop></D:set>
</C:mkcalendar>`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "MKCALENDAR", s.UserURL(u.Name)+name+"/", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.SetBasicAuth(u.Name, u.Password)
	req.Header.Set("Content-Type", "application/xml; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	return resp.StatusCode, string(b), nil
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before radicale binds it: Start then tries another.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer collects the server's log lines for several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.WriteString(s)
	b.b.WriteByte('\n')
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// RequireDateutil fails the test under the project's CI and skips it
// elsewhere when python3 cannot import dateutil (Debian's
// python3-dateutil, installed by .ci/run), and returns python3's path:
// tests compare their recurrence expansion with dateutil's.
func RequireDateutil(t testing.TB) string {
	t.Helper()
	py := testutil.Require(t, "python3", "recurrences are checked against python3's dateutil (apt-get install python3-dateutil)")
	if out, err := exec.Command(py, "-c", "import dateutil.rrule, dateutil.tz").CombinedOutput(); err != nil {
		testutil.Missing(t, fmt.Sprintf("python3 cannot import dateutil (%v: %s); recurrences are checked against it (apt-get install python3-dateutil)", err, strings.TrimSpace(string(out))))
	}
	return py
}
