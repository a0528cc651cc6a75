package sockfile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	if err := RemoveStale(filepath.Join(dir, "missing.sock")); err != nil {
		t.Errorf("missing: %v", err)
	}

	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RemoveStale(file); !errors.Is(err, ErrNotSocket) {
		t.Errorf("regular file: %v, want ErrNotSocket", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("a regular file was removed: %v", err)
	}

	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := RemoveStale(live); !errors.Is(err, ErrInUse) {
		t.Errorf("live socket: %v, want ErrInUse", err)
	}

	stale := filepath.Join(dir, "stale.sock")
	sl, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	sl.SetUnlinkOnClose(false)
	sl.Close()
	if err := RemoveStale(stale); err != nil {
		t.Errorf("stale socket: %v", err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("stale socket still there: %v", err)
	}
}

func TestCheckPrivateDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivateDir(dir); err != nil {
		t.Errorf("0700 dir: %v", err)
	}
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivateDir(open); err == nil {
		t.Error("a 0750 dir passes")
	}
	file := filepath.Join(dir, "f")
	_ = os.WriteFile(file, nil, 0o600)
	if err := CheckPrivateDir(file); err == nil {
		t.Error("a file passes as a dir")
	}
	if err := CheckPrivateDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing dir passes")
	}
}
