package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeSystem records the commands run and answers them.
type fakeSystem struct {
	mu     sync.Mutex
	ran    []string
	answer func(cmd string) ([]byte, error)
}

func (f *fakeSystem) run(_ context.Context, name string, args ...string) ([]byte, error) {
	cmd := strings.Join(append([]string{name}, args...), " ")
	f.mu.Lock()
	f.ran = append(f.ran, cmd)
	f.mu.Unlock()
	if f.answer != nil {
		return f.answer(cmd)
	}
	return nil, nil
}

func newService(t *testing.T, goos string, f *fakeSystem) (*Service, string) {
	t.Helper()
	user := t.TempDir()
	s, err := New(Options{GOOS: goos, Carapace: "/opt/carapace/bin/carapace", Home: filepath.Join(user, ".carapace"), UserHome: user, UID: 501, Run: f.run})
	if err != nil {
		t.Fatal(err)
	}
	return s, user
}

func TestLinuxPlan(t *testing.T) {
	f := &fakeSystem{}
	s, user := newService(t, "linux", f)
	if want := filepath.Join(user, ".config", "systemd", "user", "carapace.service"); s.File() != want {
		t.Fatalf("file %s, want %s", s.File(), want)
	}
	st, err := s.Status(t.Context())
	if err != nil || st.Installed || !strings.Contains(st.Detail, "carapace service install") {
		t.Fatalf("before install: %+v %v", st, err)
	}
	if err := s.Install(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(s.File())
	if err != nil || !strings.Contains(string(b), `ExecStart="/opt/carapace/bin/carapace" --home "`+filepath.Join(user, ".carapace")+`" serve`) {
		t.Fatalf("unit: %v\n%s", err, b)
	}
	want := []string{"systemctl --user daemon-reload", "systemctl --user enable carapace.service", "systemctl --user restart carapace.service"}
	if strings.Join(f.ran, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ran %q, want %q", f.ran, want)
	}

	f.ran, f.answer = nil, func(cmd string) ([]byte, error) {
		if cmd == "systemctl --user is-active carapace.service" {
			return []byte("active\n"), nil
		}
		return nil, nil
	}
	st, err = s.Status(t.Context())
	if err != nil || !st.Installed || !st.Current || !st.Running || !strings.Contains(st.Logs, "journalctl --user -u carapace.service") {
		t.Fatalf("after install: %+v %v", st, err)
	}
	// Another binary would install another unit: not current.
	other, _ := New(Options{GOOS: "linux", Carapace: "/usr/local/bin/carapace", Home: filepath.Join(user, ".carapace"), UserHome: user, Run: f.run})
	if st, _ := other.Status(t.Context()); !st.Installed || st.Current {
		t.Fatalf("another binary's view: %+v", st)
	}

	f.ran = nil
	if err := s.Uninstall(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.File()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unit is still there: %v", err)
	}
	if want := []string{"systemctl --user disable --now carapace.service", "systemctl --user daemon-reload"}; strings.Join(f.ran, "\n") != strings.Join(want, "\n") {
		t.Fatalf("uninstall ran %q", f.ran)
	}
	if err := s.Uninstall(t.Context()); err != nil {
		t.Fatalf("uninstalling twice: %v", err)
	}
}

func TestLinuxInstallFailureSaysWhich(t *testing.T) {
	f := &fakeSystem{answer: func(cmd string) ([]byte, error) {
		if strings.Contains(cmd, "daemon-reload") {
			return []byte("Failed to connect to bus: No medium found"), errors.New("exit status 1")
		}
		return nil, nil
	}}
	s, _ := newService(t, "linux", f)
	err := s.Install(t.Context())
	if err == nil || !strings.Contains(err.Error(), "systemctl --user daemon-reload") || !strings.Contains(err.Error(), "Failed to connect to bus") {
		t.Fatalf("install with no user manager: %v", err)
	}
}

func TestDarwinPlan(t *testing.T) {
	f := &fakeSystem{}
	s, user := newService(t, "darwin", f)
	if want := filepath.Join(user, "Library", "LaunchAgents", "dev.carapace.serve.plist"); s.File() != want {
		t.Fatalf("file %s, want %s", s.File(), want)
	}
	if err := s.Install(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(user, "Library", "Logs", "Carapace")); err != nil || !fi.IsDir() {
		t.Fatalf("the log folder was not created: %v", err)
	}
	b, _ := os.ReadFile(s.File())
	if !strings.Contains(string(b), "<string>/opt/carapace/bin/carapace</string>") || !strings.Contains(string(b), user+"/Library/Logs/Carapace/serve.log") {
		t.Fatalf("plist:\n%s", b)
	}
	if want := []string{"launchctl bootout gui/501/dev.carapace.serve", "launchctl bootstrap gui/501 " + s.File()}; strings.Join(f.ran, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ran %q, want %q", f.ran, want)
	}
	f.answer = func(cmd string) ([]byte, error) {
		return []byte("gui/501/dev.carapace.serve = {\n\tstate = running\n"), nil
	}
	if st, err := s.Status(t.Context()); err != nil || !st.Running || !st.Current {
		t.Fatalf("status %+v %v", st, err)
	}
}

func TestUnsupported(t *testing.T) {
	if _, err := New(Options{GOOS: "windows", Carapace: "/c", Home: "/h", UserHome: "/u"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("windows: %v", err)
	}
	if _, err := New(Options{GOOS: "linux", Carapace: "carapace", Home: "/h", UserHome: "/u"}); err == nil {
		t.Fatal("a relative binary was accepted")
	}
}
