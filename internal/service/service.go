// Package service installs the Carapace core as the user's background
// service, for machines without the menu-bar app: a systemd user unit on
// Linux (its log is the user journal), the LaunchAgent on macOS (its log
// in ~/Library/Logs/Carapace). `carapace service` drives it. The plans of
// both platforms are plain data and commands, run through a Runner, so
// that both are tested anywhere; on a real machine the Runner runs
// systemctl or launchctl.
package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/carapace-dev/carapace/Resources/launchd"
	"github.com/carapace-dev/carapace/Resources/systemd"
	"github.com/carapace-dev/carapace/internal/atomicfile"
)

// Runner runs a command and returns its combined output.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// Exec is the Runner of a real machine.
func Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

// Options say where and for whom the service is.
type Options struct {
	GOOS       string // "linux" or "darwin"
	Carapace   string // the carapace binary, absolute
	Home       string // Carapace's home, absolute (Linux: passed as --home; macOS: the default home)
	UserHome   string // the user's home directory
	ConfigHome string // $XDG_CONFIG_HOME, "" for ~/.config (Linux)
	UID        int    // the user's id (macOS: launchctl's gui/UID domain)
	Run        Runner // nil: Exec
}

// Service is the core as a background service.
type Service struct{ o Options }

// ErrUnsupported: there is no background service for this system.
var ErrUnsupported = errors.New("no background service for this system")

// New returns the Service o describes.
func New(o Options) (*Service, error) {
	if o.GOOS != "linux" && o.GOOS != "darwin" {
		return nil, fmt.Errorf("%w (%s): run carapace serve yourself", ErrUnsupported, o.GOOS)
	}
	for _, p := range []struct{ what, path string }{{"the carapace binary", o.Carapace}, {"the home", o.Home}, {"your home directory", o.UserHome}} {
		if !filepath.IsAbs(p.path) {
			return nil, fmt.Errorf("service: %s must be an absolute path, not %q", p.what, p.path)
		}
	}
	if o.Run == nil {
		o.Run = Exec
	}
	return &Service{o: o}, nil
}

// File is where the unit or the LaunchAgent is written.
func (s *Service) File() string {
	if s.o.GOOS == "darwin" {
		return filepath.Join(s.o.UserHome, "Library", "LaunchAgents", launchd.Label+".plist")
	}
	config := s.o.ConfigHome
	if config == "" {
		config = filepath.Join(s.o.UserHome, ".config")
	}
	return filepath.Join(config, "systemd", "user", systemd.Unit)
}

// Logs says where the service's log goes.
func (s *Service) Logs() string {
	if s.o.GOOS == "darwin" {
		return filepath.Join(s.o.UserHome, "Library", "Logs", "Carapace", "serve.log")
	}
	return "the user journal: journalctl --user -u " + systemd.Unit
}

// Render returns the file Install writes.
func (s *Service) Render() ([]byte, error) {
	if s.o.GOOS == "darwin" {
		return launchd.Render(s.o.Carapace, s.o.UserHome)
	}
	return systemd.Render(s.o.Carapace, s.o.Home)
}

func (s *Service) domain() string { return "gui/" + strconv.Itoa(s.o.UID) }

// Install writes the file (atomically) and starts the service now and at
// each login. Installing again rewrites the file and restarts it.
func (s *Service) Install(ctx context.Context) error {
	b, err := s.Render()
	if err != nil {
		return err
	}
	if s.o.GOOS == "darwin" {
		if err := os.MkdirAll(filepath.Dir(s.Logs()), 0o700); err != nil {
			return fmt.Errorf("service: create the log folder: %w", err)
		}
		_, _ = s.o.Run(ctx, "launchctl", "bootout", s.domain()+"/"+launchd.Label) // an earlier one, if any
	}
	if err := os.MkdirAll(filepath.Dir(s.File()), 0o755); err != nil {
		return fmt.Errorf("service: create the folder of %s: %w", s.File(), err)
	}
	if err := atomicfile.Write(s.File(), b, 0o644); err != nil {
		return fmt.Errorf("service: write %s: %w", s.File(), err)
	}
	if s.o.GOOS == "darwin" {
		return s.run(ctx, "launchctl", "bootstrap", s.domain(), s.File())
	}
	if err := s.run(ctx, "systemctl", "--user", "daemon-reload"); err != nil {
		return err
	}
	if err := s.run(ctx, "systemctl", "--user", "enable", systemd.Unit); err != nil {
		return err
	}
	return s.run(ctx, "systemctl", "--user", "restart", systemd.Unit)
}

// Uninstall stops the service and removes its file. Uninstalling what is
// not installed is no error.
func (s *Service) Uninstall(ctx context.Context) error {
	if s.o.GOOS == "darwin" {
		_, _ = s.o.Run(ctx, "launchctl", "bootout", s.domain()+"/"+launchd.Label)
	} else {
		_, _ = s.o.Run(ctx, "systemctl", "--user", "disable", "--now", systemd.Unit)
	}
	if err := os.Remove(s.File()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("service: remove %s: %w", s.File(), err)
	}
	if s.o.GOOS == "linux" {
		_, _ = s.o.Run(ctx, "systemctl", "--user", "daemon-reload")
	}
	return nil
}

// State is what Status found.
type State struct {
	Installed bool   `json:"installed"` // the file is there
	Current   bool   `json:"current"`   // the file is what Install would write now
	Running   bool   `json:"running"`   // the service manager says it runs
	Detail    string `json:"detail"`    // the manager's word on it
	File      string `json:"file"`
	Logs      string `json:"logs"`
}

// Status reports whether the service is installed, current and running.
func (s *Service) Status(ctx context.Context) (State, error) {
	st := State{File: s.File(), Logs: s.Logs()}
	have, err := os.ReadFile(st.File)
	switch {
	case errors.Is(err, os.ErrNotExist):
		st.Detail = "not installed (carapace service install)"
		return st, nil
	case err != nil:
		return st, fmt.Errorf("service: read %s: %w", st.File, err)
	}
	st.Installed = true
	if want, err := s.Render(); err == nil {
		st.Current = bytes.Equal(have, want)
	}
	if s.o.GOOS == "darwin" {
		out, err := s.o.Run(ctx, "launchctl", "print", s.domain()+"/"+launchd.Label)
		st.Running = err == nil && strings.Contains(string(out), "state = running")
		st.Detail = "not loaded"
		if err == nil {
			st.Detail = "loaded"
			if st.Running {
				st.Detail = "running"
			}
		}
		return st, nil
	}
	out, _ := s.o.Run(ctx, "systemctl", "--user", "is-active", systemd.Unit)
	st.Detail = strings.TrimSpace(string(out))
	st.Running = st.Detail == "active"
	if st.Detail == "" {
		st.Detail = "unknown (systemctl --user did not answer)"
	}
	return st, nil
}

// run runs a command, and says which and what it printed when it fails.
func (s *Service) run(ctx context.Context, name string, args ...string) error {
	out, err := s.o.Run(ctx, name, args...)
	if err != nil {
		return fmt.Errorf("service: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
