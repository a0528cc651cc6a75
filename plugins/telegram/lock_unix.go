//go:build unix

package telegram

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockFile is the name of the lock file in the data folder: one plugin
// process at a time may hold it, since two would both poll Telegram and
// answer the same messages.
const LockFile = "telegram.lock"

// lock takes an exclusive, non-blocking flock on dir/LockFile. The lock
// goes with the process: a SIGKILLed holder releases it.
func lock(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("telegram: open the lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("telegram: another telegram plugin process holds %s: only one may run per data folder; stop the other core (carapace stop) or plugin first", path)
		}
		return nil, fmt.Errorf("telegram: lock %s: %w", path, err)
	}
	return f, nil
}

// unlock releases the lock.
func unlock(f *os.File) error {
	if f == nil {
		return nil
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}
